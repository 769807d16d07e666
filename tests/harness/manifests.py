"""The kustomize manifests (manifests/) rendered, the checks every rendering of our objects must pass
(kustomize here, the Helm chart in tests/unit/test_chart.py), and the example jobs."""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import warnings
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_controller.config import load_config
from tests.harness.required import cannot_run

Rendering = tuple[str, list[dict[str, Any]]]  # (what was rendered, its objects)
ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
OVERLAYS = ("local", "kind", "cert-manager")
KUSTOMIZATIONS = ("base", *(f"overlays/{o}" for o in OVERLAYS))
NAMESPACE = "volcano-elastic-system"
OPERATOR_LABEL = ("training.kubeflow.org/operator-name", "pytorchjob-controller")
KUSTOMIZE_MODULE = "sigs.k8s.io/kustomize/kustomize/v5"
KUSTOMIZE_VERSION = "v5.7.1"  # the one kubectl v1.35 embeds
SA_CONTROLLER = "volcano-elastic-controller"
SA_WEBHOOK = "volcano-elastic-webhook"
SA_CERTGEN = "volcano-elastic-certgen"


# Every call the controller + agent make (elastic_controller/kube, controller.py, agent.py, execute/,
# kube/leader.py, kube/events.py): (apiGroup, resource, verb, namespace or None for cluster-wide).
# The ClusterRole must grant exactly these, and the integration test asks the API server
# `kubectl auth can-i` for each one as the ServiceAccount.
CONTROLLER_NEEDS: tuple[tuple[str, str, str, str | None], ...] = (
    *(("", "pods", v, None) for v in ("list", "watch", "patch")),
    ("", "pods/eviction", "create", None),
    ("", "pods", "delete", None),  # only past a tenant's PDB (issue 36, T13), bounded by an admission policy
    *(("", r, v, None) for r in ("nodes", "namespaces") for v in ("list", "watch")),
    *(("scheduling.k8s.io", "priorityclasses", v, None) for v in ("list", "watch")),
    *(("scheduling.volcano.sh", "queues", v, None) for v in ("list", "watch")),
    *(("scheduling.volcano.sh", "podgroups", v, None)
      for v in ("get", "list", "watch", "create", "patch", "delete")),
    *(("kubeflow.org", "pytorchjobs", v, None) for v in ("get", "list", "watch", "patch")),
    ("kubeflow.org", "pytorchjobs/finalizers", "update", None),
    ("", "events", "create", None),
    # each elastic job's Role + RoleBinding: its ServiceAccount may patch its own pods (checkpoint_access.py)
    *(("rbac.authorization.k8s.io", r, v, None) for r in ("roles", "rolebindings") for v in ("create", "patch")),
)
LEASE_NAME = "volcano-elastic-controller"
CONTROLLER_NAMESPACED_NEEDS: tuple[tuple[str, str, str, str | None], ...] = (
    ("coordination.k8s.io", "leases", "create", None),
    ("coordination.k8s.io", "leases", "get", LEASE_NAME),
    ("coordination.k8s.io", "leases", "update", LEASE_NAME),
)


# What nobody of ours may do (checked here on the rules and in integration with can-i).
CONTROLLER_FORBIDDEN: tuple[tuple[str, str, str], ...] = (
    ("", "pods", "deletecollection"),
    ("", "pods", "update"),
    ("", "pods", "create"),
    ("", "secrets", "get"),
    ("", "nodes", "patch"),
    ("scheduling.volcano.sh", "podgroups", "update"),
    ("kubeflow.org", "pytorchjobs", "update"),
    ("", "pods", "get"),
    ("", "events", "patch"),
    ("events.k8s.io", "events", "create"),
)


# ---------------------------------------------------------------------- rendering
def _cache_root() -> Path:
    env = os.environ.get("VOLCANO_ELASTIC_CACHE")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "volcano-elastic"


def _box_kubectl() -> Path | None:
    """The kubectl hack/build-binaries.sh built for the current versions.env, else any cached one."""
    try:
        from hack.localbox import paths

        own = paths.binary("kubectl")
        if os.access(own, os.X_OK):
            return own
    except Exception:  # hack/ missing or broken: fall back to a scan of the cache
        pass
    found = sorted(_cache_root().glob("*/bin/kubectl"), key=lambda p: p.stat().st_mtime, reverse=True)
    return next((p for p in found if os.access(p, os.X_OK)), None)


def _build_kustomize(why: list[str]) -> Path | None:
    go = shutil.which("go")
    if go is None:
        why.append("no `go` on PATH to build kustomize")
        return None
    out = _cache_root() / "tools" / f"kustomize-{KUSTOMIZE_VERSION}"
    binary = out / "kustomize"
    if os.access(binary, os.X_OK):
        return binary
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "GOBIN": str(out), "CGO_ENABLED": "0",
           "GOFLAGS": "-mod=mod", "GOPROXY": os.environ.get("GOPROXY", "https://proxy.golang.org,direct")}
    return build_tool([go, "install", f"{KUSTOMIZE_MODULE}@{KUSTOMIZE_VERSION}"], binary, why, timeout=900,
                      env=env)


def build_tool(argv: list[str], binary: Path, why: list[str], *, timeout: float,
               env: dict[str, str] | None = None) -> Path | None:
    """Run the build ``argv`` that makes ``binary``: the binary, or None with the reason added to ``why``."""
    try:
        proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        why.append(f"`{' '.join(argv)}` took over {timeout / 60:.0f} minutes")
        return None
    if proc.returncode != 0 or not os.access(binary, os.X_OK):
        why.append(f"`{' '.join(argv)}` failed: {(proc.stdout + proc.stderr).strip()[-800:]}")
        return None
    return binary


@cache
def kustomize_command() -> tuple[tuple[str, ...] | None, str]:
    """The argv prefix that renders a kustomization directory, and where it came from."""
    why: list[str] = []
    kubectl = _box_kubectl()
    if kubectl is not None:
        return (str(kubectl), "kustomize"), f"{kubectl} (built by hack/build-binaries.sh)"
    why.append(f"no kubectl under {_cache_root()}/*/bin (hack/build-binaries.sh kubectl builds it)")
    for name, argv in (("kubectl", ("kustomize",)), ("kustomize", ("build",))):
        path = shutil.which(name)
        if path:
            return (path, *argv), f"{path} (PATH)"
    why.append("no kubectl or kustomize on PATH")
    built = _build_kustomize(why)
    if built is not None:
        return (str(built), "build"), f"{built} (built from the Go module proxy)"
    return None, "; ".join(why)


def render(kustomization: str) -> list[dict[str, Any]]:
    """Every object of ``manifests/<kustomization>`` as kustomize renders it (a fresh copy)."""
    return copy.deepcopy(list(_render(kustomization)))


@cache
def _render(kustomization: str) -> tuple[dict[str, Any], ...]:
    argv, source = kustomize_command()
    if argv is None:
        msg = f"cannot render manifests: no kustomize available ({source})"
        warnings.warn(msg, stacklevel=2)
        cannot_run("manifests", msg)
    proc = subprocess.run([*argv, str(MANIFESTS / kustomization)], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(argv)} manifests/{kustomization} failed ({source}):\n{proc.stderr}")
    return tuple(d for d in yaml.safe_load_all(proc.stdout) if d)


def of_kind(objs: list[dict[str, Any]], *kinds: str) -> list[dict[str, Any]]:
    return [o for o in objs if o.get("kind") in kinds]


def named(objs: list[dict[str, Any]], kind: str, name: str) -> dict[str, Any] | None:
    return next((o for o in of_kind(objs, kind) if o["metadata"]["name"] == name), None)


def ident(o: dict[str, Any]) -> str:
    ns = o["metadata"].get("namespace")
    return f"{o['kind']} {ns + '/' if ns else ''}{o['metadata']['name']}"


def pod_specs(objs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for o in objs:
        spec = o.get("spec") or {}
        if o["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet"):
            yield ident(o), spec["template"]["spec"]
        elif o["kind"] == "CronJob":
            yield ident(o), spec["jobTemplate"]["spec"]["template"]["spec"]


# ---------------------------------------------------------------------- selectors
def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """metav1.LabelSelector semantics (an empty or missing selector matches everything)."""
    selector = selector or {}
    for k, v in (selector.get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        present = key in labels
        if op == "In" and not (present and labels[key] in values):
            return False
        if op == "NotIn" and present and labels[key] in values:
            return False
        if op == "Exists" and not present:
            return False
        if op == "DoesNotExist" and present:
            return False
    return True


def ns_labels(name: str, **extra: str) -> dict[str, str]:
    return {"kubernetes.io/metadata.name": name, **extra}


# ---------------------------------------------------------------------- fixtures

def check_renders_unique_objects(rendered: Rendering) -> None:
    name, objs = rendered
    assert objs, f"{name} rendered nothing"
    ids = [ident(o) for o in objs]
    assert len(ids) == len(set(ids)), f"{name}: duplicate objects"
    for o in objs:
        ns = o["metadata"].get("namespace")
        assert ns in (None, NAMESPACE), f"{name}: {ident(o)} is outside {NAMESPACE}"
        assert o["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") == "volcano-elastic", ident(o)


# ---------------------------------------------------------------------- RBAC
def _rules(objs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    for role in of_kind(objs, "Role", "ClusterRole"):
        assert not role.get("aggregationRule"), f"{ident(role)}: aggregated roles hide what they grant"
        for rule in role.get("rules") or []:
            yield ident(role), rule


def check_no_role_grants_pod_delete_or_wildcards(rendered: Rendering) -> None:
    name, objs = rendered
    problems = []
    for who, rule in _rules(objs):
        for field in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
            if any("*" in str(v) for v in rule.get(field) or []):
                problems.append(f"{who}: wildcard in {field}: {rule}")
        core = "" in (rule.get("apiGroups") or [])
        pods = any(r == "pods" for r in rule.get("resources") or [])
        if core and pods and {"delete", "deletecollection"} & set(rule.get("verbs") or []):
            # the one exception (issue 36, T13): the controller's `delete pods`, alone in its rule and
            # bounded by the admission policy volcano-elastic-controller-pod-deletes
            bounded = named(objs, "ValidatingAdmissionPolicy", "volcano-elastic-controller-pod-deletes") is not None
            if not (who.endswith("volcano-elastic-controller") and rule.get("verbs") == ["delete"] and
                    rule.get("resources") == ["pods"] and bounded):
                problems.append(f"{who}: grants pod delete: {rule}")
        if rule.get("nonResourceURLs"):
            problems.append(f"{who}: non-resource URLs are never needed: {rule}")
    assert not problems, f"{name}:\n" + "\n".join(problems)


def _granted(objs: list[dict[str, Any]], role_kind: str, role_name: str) -> set[tuple[str, str, str, str | None]]:
    role = named(objs, role_kind, role_name)
    assert role is not None, f"{role_kind} {role_name} is missing"
    out = set()
    for rule in role.get("rules") or []:
        names = rule.get("resourceNames") or [None]
        for g in rule["apiGroups"]:
            for r in rule["resources"]:
                for v in rule["verbs"]:
                    for n in names:
                        out.add((g, r, v, n))
    return out


def _bound_to(objs: list[dict[str, Any]], sa: str) -> list[tuple[str, str]]:
    """(role kind, role name) of every binding whose subjects include the ServiceAccount."""
    out = []
    for b in of_kind(objs, "RoleBinding", "ClusterRoleBinding"):
        for s in b.get("subjects") or []:
            if s.get("kind") == "ServiceAccount" and s.get("name") == sa and s.get("namespace") == NAMESPACE:
                out.append((b["roleRef"]["kind"], b["roleRef"]["name"]))
    return out


def check_controller_gets_exactly_what_it_uses(rendered: Rendering) -> None:
    _, objs = rendered
    assert sorted(_bound_to(objs, SA_CONTROLLER)) == [("ClusterRole", SA_CONTROLLER),
                                                     ("Role", "volcano-elastic-leader-election")]
    assert _granted(objs, "ClusterRole", SA_CONTROLLER) == set(CONTROLLER_NEEDS)
    assert _granted(objs, "Role", "volcano-elastic-leader-election") == set(CONTROLLER_NAMESPACED_NEEDS)
    granted = _granted(objs, "ClusterRole", SA_CONTROLLER)
    for g, r, v in CONTROLLER_FORBIDDEN:
        assert (g, r, v, None) not in granted


def check_webhook_has_no_api_access(rendered: Rendering) -> None:
    _, objs = rendered
    sa = named(objs, "ServiceAccount", SA_WEBHOOK)
    assert sa is not None and sa.get("automountServiceAccountToken") is False
    assert _bound_to(objs, SA_WEBHOOK) == []
    for who, spec in pod_specs(objs):
        if spec.get("serviceAccountName") == SA_WEBHOOK:
            assert spec.get("automountServiceAccountToken") is False, who


def check_certgen_touches_one_secret_and_our_webhook_configs(rendered: Rendering) -> None:
    name, objs = rendered
    if name == "overlays/cert-manager":
        assert named(objs, "ServiceAccount", SA_CERTGEN) is None
        assert _bound_to(objs, SA_CERTGEN) == []
        return
    assert sorted(_bound_to(objs, SA_CERTGEN)) == [("ClusterRole", SA_CERTGEN), ("Role", SA_CERTGEN)]
    role = named(objs, "Role", SA_CERTGEN)
    assert role is not None and role["metadata"]["namespace"] == NAMESPACE
    secret = "volcano-elastic-webhook-tls"
    assert _granted(objs, "Role", SA_CERTGEN) == {
        ("", "secrets", "create", None),  # create cannot be limited by name (see rbac.yaml)
        *(("", "secrets", v, secret) for v in ("get", "update", "patch")),
    }
    assert _granted(objs, "ClusterRole", SA_CERTGEN) == {
        ("admissionregistration.k8s.io", r, "patch", "volcano-elastic")
        for r in ("mutatingwebhookconfigurations", "validatingwebhookconfigurations")
    }


def check_bindings_point_at_objects_that_exist(rendered: Rendering) -> None:
    _, objs = rendered
    for b in of_kind(objs, "RoleBinding", "ClusterRoleBinding"):
        ref = b["roleRef"]
        assert named(objs, ref["kind"], ref["name"]) is not None, f"{ident(b)} -> missing {ref}"
        for s in b["subjects"]:
            assert s["kind"] == "ServiceAccount" and named(objs, "ServiceAccount", s["name"]), ident(b)


# ---------------------------------------------------------------------- webhooks
def _webhooks(objs: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(o["kind"], w) for o in of_kind(objs, "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
            for w in o["webhooks"]]


def _resources(webhook: dict[str, Any]) -> set[str]:
    return {r for rule in webhook["rules"] for r in rule["resources"]}


def check_webhook_configurations(rendered: Rendering) -> None:
    name, objs = rendered
    hooks = _webhooks(objs)
    assert sorted((k, w["name"]) for k, w in hooks) == [
        ("MutatingWebhookConfiguration", "mutate-pods.volcano-elastic.io"),
        ("ValidatingWebhookConfiguration", "validate-pytorchjobs.volcano-elastic.io"),
    ]
    for kind, w in hooks:
        where = f"{name}: {w['name']}"
        assert w["failurePolicy"] == "Fail", where
        assert w["timeoutSeconds"] == 5, where
        assert w["sideEffects"] == "None", where
        assert w["admissionReviewVersions"] == ["v1"], where
        assert w["matchPolicy"] == "Equivalent", where
        assert "caBundle" not in w["clientConfig"], f"{where}: caBundle is injected, never shipped"
        if kind == "MutatingWebhookConfiguration":
            assert w["reinvocationPolicy"] == "IfNeeded", where
        # never our own namespace nor the control plane's, always a department's
        sel = w["namespaceSelector"]
        for ns in ("kube-system", NAMESPACE):
            assert not selector_matches(sel, ns_labels(ns)), f"{where}: admits namespace {ns}"
        assert selector_matches(sel, ns_labels("team-vision")), f"{where}: misses ordinary namespaces"
        assert not selector_matches(sel, ns_labels("team-x", **{"volcano-elastic.io/admission": "disabled"}))
        # the pod webhook only sees pods the training operator creates for PyTorchJobs
        if "pods" in _resources(w):
            assert w["objectSelector"] == {"matchLabels": dict([OPERATOR_LABEL])}, where
            assert selector_matches(w["objectSelector"], dict([OPERATOR_LABEL]))
            assert not selector_matches(w["objectSelector"], {"app": "anything-else"})
            assert [r["operations"] for r in w["rules"]] == [["CREATE"]], where
        else:
            # PyTorchJob objects carry no operator label: an objectSelector would disable this webhook
            assert _resources(w) == {"pytorchjobs"}, where
            assert not w.get("objectSelector"), where
        for rule in w["rules"]:
            assert rule["scope"] == "Namespaced", where
            assert not {"DELETE", "CONNECT", "*"} & set(rule["operations"]), where


def check_webhooks_reach_the_webhook(rendered: Rendering) -> None:
    name, objs = rendered
    paths = {"mutate-pods.volcano-elastic.io": "/mutate-pods",
             "validate-pytorchjobs.volcano-elastic.io": "/validate-pytorchjobs"}
    for _, w in _webhooks(objs):
        cc = w["clientConfig"]
        if name == "overlays/local":
            assert cc == {"url": f"https://127.0.0.1:8443{paths[w['name']]}"}, w["name"]
            continue
        svc_ref = cc["service"]
        assert svc_ref["path"] == paths[w["name"]]
        svc = named(objs, "Service", svc_ref["name"])
        assert svc is not None and svc["metadata"]["namespace"] == svc_ref["namespace"] == NAMESPACE
        port = next(p for p in svc["spec"]["ports"] if p["port"] == svc_ref["port"])
        dep = named(objs, "Deployment", "volcano-elastic-webhook")
        assert dep is not None and selector_matches({"matchLabels": svc["spec"]["selector"]},
                                                    dep["spec"]["template"]["metadata"]["labels"])
        ports = {p["name"] for c in dep["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
        assert port["targetPort"] in ports


def check_controller_pod_writes_are_bounded_by_an_admission_policy(rendered: Rendering) -> None:
    """Issue 23, least privilege: `patch pods` is bounded to our gate and our annotations by a
    ValidatingAdmissionPolicy bound with Deny (exercised with the real token in integration)."""
    name, objs = rendered
    pol = named(objs, "ValidatingAdmissionPolicy", "volcano-elastic-controller-writes")
    binding = named(objs, "ValidatingAdmissionPolicyBinding", "volcano-elastic-controller-writes")
    assert pol is not None and binding is not None, name
    assert pol["apiVersion"] == binding["apiVersion"] == "admissionregistration.k8s.io/v1"
    assert binding["spec"]["policyName"] == pol["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert pol["spec"]["failurePolicy"] == "Fail"
    rules = {(r["apiGroups"][0], r["resources"][0]): r["operations"]
             for r in pol["spec"]["matchConstraints"]["resourceRules"]}
    assert rules == {("", "pods"): ["UPDATE"], ("kubeflow.org", "pytorchjobs"): ["UPDATE"]}
    conditions = " ".join(c["expression"] for c in pol["spec"]["matchConditions"])
    assert f"system:serviceaccount:{NAMESPACE}:{SA_CONTROLLER}" in conditions
    text = " ".join(v["expression"] for v in pol["spec"]["validations"]) + \
        " ".join(v["expression"] for v in pol["spec"]["variables"])
    assert "volcano-elastic.io/scale-up" in text and "'volcano-elastic.io/'" in text
    for field in ("nodeSelector", "affinity", "tolerations"):  # issue 31 item 6: a gated pod's directives
        assert f"object.spec.{field} == oldObject.spec.{field}" in text, field
    # PodGroup deletes: only the ones we manage (the grant cannot say so)
    pg = named(objs, "ValidatingAdmissionPolicy", "volcano-elastic-controller-podgroup-deletes")
    pg_binding = named(objs, "ValidatingAdmissionPolicyBinding", "volcano-elastic-controller-podgroup-deletes")
    assert pg is not None and pg_binding is not None, name
    assert pg_binding["spec"]["policyName"] == pg["metadata"]["name"]
    assert pg_binding["spec"]["validationActions"] == ["Deny"] and pg["spec"]["failurePolicy"] == "Fail"
    pg_rules = pg["spec"]["matchConstraints"]["resourceRules"]
    assert [(r["apiGroups"], r["resources"], r["operations"]) for r in pg_rules] == \
        [(["scheduling.volcano.sh"], ["podgroups"], ["UPDATE", "DELETE"])]
    assert f"system:serviceaccount:{NAMESPACE}:{SA_CONTROLLER}" in pg["spec"]["matchConditions"][0]["expression"]
    assert "oldObject.metadata.labels['app.kubernetes.io/managed-by'] == 'volcano-elastic'" in \
        " ".join(v["expression"] for v in pg["spec"]["validations"])
    # Pod deletes (issue 36, T13): only PyTorchJob workers the controller claimed for a gang
    pd = named(objs, "ValidatingAdmissionPolicy", "volcano-elastic-controller-pod-deletes")
    pd_binding = named(objs, "ValidatingAdmissionPolicyBinding", "volcano-elastic-controller-pod-deletes")
    assert pd is not None and pd_binding is not None, name
    assert pd_binding["spec"]["validationActions"] == ["Deny"] and pd["spec"]["failurePolicy"] == "Fail"
    pd_rules = pd["spec"]["matchConstraints"]["resourceRules"]
    assert [(r["apiGroups"], r["resources"], r["operations"]) for r in pd_rules] == [([""], ["pods"], ["DELETE"])]
    assert f"system:serviceaccount:{NAMESPACE}:{SA_CONTROLLER}" in pd["spec"]["matchConditions"][0]["expression"]
    text = " ".join(v["expression"] for v in pd["spec"]["validations"])
    assert "'volcano-elastic.io/evicted-for' in variables.ann" in text and "PyTorchJob" in text


def check_controller_policies_match_its_account(rendered: Rendering) -> None:
    """Review B3: each admission policy bounding the controller (its pod and job writes, PodGroup
    deletes, pod deletes) matches the username of the controller's ServiceAccount as rendered, its
    namespace included: a namespace changed on the objects alone would leave the policy matching
    nobody and the controller's grants (`delete pods` among them) unbounded."""
    name, objs = rendered
    sa = next((o for o in of_kind(objs, "ServiceAccount") if o["metadata"]["name"] == SA_CONTROLLER), None)
    if sa is None:
        return  # a rendering without the controller (none today)
    user = f"system:serviceaccount:{sa['metadata'].get('namespace')}:{SA_CONTROLLER}"
    policies = [p for p in of_kind(objs, "ValidatingAdmissionPolicy")
                if p["metadata"]["name"].startswith("volcano-elastic-controller-")]
    for pol in policies:
        who = " ".join(c["expression"] for c in pol["spec"].get("matchConditions") or [])
        assert user in who, (f"{name}: {ident(pol)} matches nobody: it names another account than the "
                             f"controller's {user}: {who}")


# ---------------------------------------------------------------------- workloads
def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*(spec.get("initContainers") or []), *spec["containers"]]


def check_pods_are_locked_down(rendered: Rendering) -> None:
    name, objs = rendered
    specs = list(pod_specs(objs))
    if name != "overlays/local":
        assert {w for w, _ in specs} >= {f"Deployment {NAMESPACE}/volcano-elastic-webhook",
                                         f"Deployment {NAMESPACE}/volcano-elastic-controller"}
    for who, spec in specs:
        psc = spec.get("securityContext") or {}
        assert psc.get("seccompProfile") == {"type": "RuntimeDefault"}, who
        assert spec.get("serviceAccountName"), f"{who}: runs as the default ServiceAccount"
        assert not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC"), who
        for c in _containers(spec):
            where = f"{who} container {c['name']}"
            sc = c.get("securityContext") or {}
            assert sc.get("runAsNonRoot", psc.get("runAsNonRoot")) is True, where
            assert (sc.get("runAsUser", psc.get("runAsUser")) or 0) > 0, where
            assert sc.get("readOnlyRootFilesystem") is True, where
            assert sc.get("allowPrivilegeEscalation") is False, where
            assert sc.get("capabilities") == {"drop": ["ALL"]}, where
            assert not sc.get("privileged"), where
            res = c.get("resources") or {}
            for part in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(res.get(part) or {}), f"{where}: {part} must set cpu and memory"
            assert re.fullmatch(r"[\w./-]*volcano-elastic(:[\w.-]+)?", c["image"]), f"{where}: image {c['image']}"
            assert ":" in c["image"], f"{where}: image without a tag"
            mounts = {m["mountPath"] for m in c.get("volumeMounts") or []}
            assert "/tmp" in mounts, f"{where}: read-only root needs a writable /tmp"


def check_deployments_are_highly_available(rendered: Rendering) -> None:
    name, objs = rendered
    pdbs = of_kind(objs, "PodDisruptionBudget")
    for dep in of_kind(objs, "Deployment"):
        who = ident(dep)
        spec = dep["spec"]["template"]["spec"]
        assert dep["spec"]["replicas"] >= 2, who
        assert spec.get("topologySpreadConstraints"), f"{who}: no topology spread"
        for c in spec["containers"]:
            assert c.get("livenessProbe") and c.get("readinessProbe"), f"{who}: probes"
        labels = dep["spec"]["template"]["metadata"]["labels"]
        covering = [p for p in pdbs if p["metadata"]["namespace"] == dep["metadata"]["namespace"]
                    and selector_matches(p["spec"]["selector"], labels)]
        assert len(covering) == 1, f"{who}: needs exactly one PodDisruptionBudget, has {len(covering)}"
        pdb = covering[0]["spec"]
        assert pdb.get("minAvailable", 1) >= 1 or pdb.get("maxUnavailable") == 1
    assert (len(pdbs) >= 2) == (name != "overlays/local")


def check_controller_flags_match_its_command_line(rendered: Rendering) -> None:
    """Flags in the manifests exist in the CLI (a renamed flag would crash-loop the pods)."""
    from elastic_controller.cli import build_parser

    _, objs = rendered
    parser = build_parser()
    for dep in of_kind(objs, "Deployment", "Job", "CronJob"):
        for _, spec in pod_specs([dep]):
            for c in spec["containers"]:
                if c.get("command"):
                    continue  # the certgen script, not our CLI
                args = parser.parse_args(c["args"])
                if c["args"][0] == "controller":
                    assert args.lease_name == LEASE_NAME
                    port = {p["name"]: p["containerPort"] for p in c["ports"]}["http-metrics"]
                    assert args.http_port == port
                if c["args"][0] == "webhook":
                    assert args.port == {p["name"]: p["containerPort"] for p in c["ports"]}["https"]


def check_rendered_config_loads_and_is_mounted(rendered: Rendering) -> None:
    name, objs = rendered
    cms = [o for o in of_kind(objs, "ConfigMap") if o["metadata"]["name"].startswith("volcano-elastic-config")]
    assert len(cms) == 1, name
    load_config(cms[0]["data"]["config.yaml"], f"{name} ConfigMap")
    for who, spec in pod_specs(objs):
        if "certgen" in who:
            continue
        vols = {v["configMap"]["name"] for v in spec.get("volumes") or [] if "configMap" in v}
        assert cms[0]["metadata"]["name"] in vols, f"{who} does not mount the config"
        args = spec["containers"][0]["args"]
        assert "--config=/etc/volcano-elastic/config.yaml" in args, who


# ---------------------------------------------------------------------- examples
EXAMPLES = MANIFESTS / "examples"


def _example(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def example_job(name: str) -> dict[str, Any]:
    """The one PyTorchJob of an example file (which may also hold its ServiceAccount and RBAC)."""
    (job,) = [d for d in _example(name) if d["kind"] == "PyTorchJob"]
    return job


def check_network_policies_keep_pods_off_the_webhook(rendered: Rendering) -> None:
    """Issue 23, item 8: any pod could reach the webhook; only non-pod addresses (the API server,
    kubelet probes) may, on the serving port only, and the controller's 8080 likewise plus scrapers.
    Issue 31, item 5: no pod network is right for every cluster, so only kind's overlay (kind's pod
    network) has them; the base and the other overlays have none (docs/install.md says why)."""
    name, objs = rendered
    policies = of_kind(objs, "NetworkPolicy")
    if name in ("base", "overlays/cert-manager", "overlays/local"):
        assert not policies, f"{name}: a NetworkPolicy without a pod network of the user's"
        return
    for app, port in (("volcano-elastic-webhook", "https"), ("volcano-elastic-controller", "http-metrics")):
        pols = [p for p in policies if selector_matches(p["spec"]["podSelector"], {"app.kubernetes.io/name": app})]
        assert len(pols) == 1, f"{name}: {app} has {len(pols)} NetworkPolicies"
        spec = pols[0]["spec"]
        assert spec["policyTypes"] == ["Ingress"]
        for rule in spec["ingress"]:
            assert [p["port"] for p in rule["ports"]] == [port]
            for peer in rule["from"]:
                if "ipBlock" in peer:
                    assert peer["ipBlock"]["except"], f"{name}: {app} admits the pod network"
                else:
                    assert peer.get("namespaceSelector", {}).get("matchLabels") == \
                        {"volcano-elastic.io/scrape": "true"} and "podSelector" not in peer


def check_viewer_role_grants_exactly_what_status_reads(rendered: Rendering) -> None:
    """`status`, `queues` and a dump for `plan` list every resource of the agent's snapshot,
    cluster-wide (decisions are planned on the whole cluster); the viewer role grants that and
    nothing else, and nobody of ours is bound to it (admins bind their researchers' group)."""
    from elastic_controller.kube.resources import SNAPSHOT_RESOURCES

    _, objs = rendered
    assert _granted(objs, "ClusterRole", "volcano-elastic-viewer") == {
        (r.group, r.plural, "list", None) for r in SNAPSHOT_RESOURCES}
    assert not [b for b in of_kind(objs, "RoleBinding", "ClusterRoleBinding")
                if b["roleRef"]["name"] == "volcano-elastic-viewer"]


def check_viewer_role_reads_exactly_the_controllers_config(rendered: Rendering) -> None:
    """Issue 40: `status` and `queues` decide with the controller's ConfigMap. The viewer Role in our
    namespace grants `get` on that ConfigMap (by its rendered name: kustomize hashes it) and on the
    controller's Deployment that names it, nothing else; nobody of ours is bound to it."""
    from elastic_controller.cli.effective_config import CONFIG_VOLUME, CONTROLLER_DEPLOYMENT, VIEWER_ROLE

    _, objs = rendered
    deployment = named(objs, "Deployment", CONTROLLER_DEPLOYMENT)
    if deployment is not None:
        mounted = next(v["configMap"]["name"] for v in deployment["spec"]["template"]["spec"]["volumes"]
                       if v["name"] == CONFIG_VOLUME)
    else:  # overlays/local: no Deployment; its (hashed) ConfigMap is still the one to read
        mounted = next(c["metadata"]["name"] for c in of_kind(objs, "ConfigMap")
                       if c["metadata"]["name"].startswith("volcano-elastic-config"))
    assert named(objs, "ConfigMap", mounted) is not None
    assert _granted(objs, "Role", VIEWER_ROLE) == {("", "configmaps", "get", mounted),
                                                   ("apps", "deployments", "get", CONTROLLER_DEPLOYMENT)}
    assert not [b for b in of_kind(objs, "RoleBinding") if b["roleRef"]["name"] == VIEWER_ROLE]


# Every check of a rendering (kustomize or the chart): tests/unit/test_manifests.py and test_chart.py run them all.
CHECKS: tuple[Callable[[Rendering], None], ...] = (
    check_renders_unique_objects,
    check_no_role_grants_pod_delete_or_wildcards,
    check_controller_gets_exactly_what_it_uses,
    check_webhook_has_no_api_access,
    check_certgen_touches_one_secret_and_our_webhook_configs,
    check_bindings_point_at_objects_that_exist,
    check_webhook_configurations,
    check_webhooks_reach_the_webhook,
    check_controller_pod_writes_are_bounded_by_an_admission_policy,
    check_controller_policies_match_its_account,
    check_pods_are_locked_down,
    check_deployments_are_highly_available,
    check_controller_flags_match_its_command_line,
    check_rendered_config_loads_and_is_mounted,
    check_network_policies_keep_pods_off_the_webhook,
    check_viewer_role_grants_exactly_what_status_reads,
    check_viewer_role_reads_exactly_the_controllers_config,
)


EXAMPLE = "pytorchjob-elastic.yaml"
