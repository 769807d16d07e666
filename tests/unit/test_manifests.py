"""Render every kustomization under manifests/ and check what a cluster admin relies on.

Rendering needs kustomize: the kubectl the box builds (``hack/build-binaries.sh kubectl``,
``kubectl kustomize`` works offline), else a kubectl or kustomize on PATH, else kustomize built
from the Go module proxy into the same cache. Without any of them the tests are skipped with
the reason, loudly.
"""

from __future__ import annotations

import copy
import os
import re
import shutil
import subprocess
import warnings
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml

from elastic_controller.config import load_config, load_config_file

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
    try:
        proc = subprocess.run([go, "install", f"{KUSTOMIZE_MODULE}@{KUSTOMIZE_VERSION}"], env=env,
                              capture_output=True, text=True, timeout=900)
    except subprocess.TimeoutExpired:
        why.append(f"building {KUSTOMIZE_MODULE}@{KUSTOMIZE_VERSION} took over 15 minutes")
        return None
    if proc.returncode != 0 or not os.access(binary, os.X_OK):
        why.append(f"`go install {KUSTOMIZE_MODULE}@{KUSTOMIZE_VERSION}` failed: {proc.stderr.strip()[-800:]}")
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
        pytest.skip(msg)
    proc = subprocess.run([*argv, str(MANIFESTS / kustomization)], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        pytest.fail(f"{' '.join(argv)} manifests/{kustomization} failed ({source}):\n{proc.stderr}")
    return tuple(d for d in yaml.safe_load_all(proc.stdout) if d)


def render_yaml(kustomization: str) -> str:
    return yaml.safe_dump_all(render(kustomization), sort_keys=False)


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
@pytest.fixture(scope="module", params=KUSTOMIZATIONS)
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param, render(request.param)


def test_renderer_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    argv, source = kustomize_command()
    if argv is None:
        pytest.skip(f"no kustomize: {source}")
    with capsys.disabled():
        print(f"\n[manifests] rendering with {source}")


def test_every_kustomization_is_tested() -> None:
    found = sorted(str(p.parent.relative_to(MANIFESTS)) for p in MANIFESTS.rglob("kustomization.yaml"))
    expected = sorted([*KUSTOMIZATIONS, "base/certgen", "monitoring"])  # monitoring: test_monitoring.py
    assert found == expected, "a kustomization was added or removed: update KUSTOMIZATIONS"


def test_renders_unique_objects(rendered: tuple[str, list[dict[str, Any]]]) -> None:
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


def test_no_role_grants_pod_delete_or_wildcards(rendered: tuple[str, list[dict[str, Any]]]) -> None:
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


def test_controller_gets_exactly_what_it_uses(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objs = rendered
    assert sorted(_bound_to(objs, SA_CONTROLLER)) == [("ClusterRole", SA_CONTROLLER),
                                                     ("Role", "volcano-elastic-leader-election")]
    assert _granted(objs, "ClusterRole", SA_CONTROLLER) == set(CONTROLLER_NEEDS)
    assert _granted(objs, "Role", "volcano-elastic-leader-election") == set(CONTROLLER_NAMESPACED_NEEDS)
    granted = _granted(objs, "ClusterRole", SA_CONTROLLER)
    for g, r, v in CONTROLLER_FORBIDDEN:
        assert (g, r, v, None) not in granted


def test_webhook_has_no_api_access(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    _, objs = rendered
    sa = named(objs, "ServiceAccount", SA_WEBHOOK)
    assert sa is not None and sa.get("automountServiceAccountToken") is False
    assert _bound_to(objs, SA_WEBHOOK) == []
    for who, spec in pod_specs(objs):
        if spec.get("serviceAccountName") == SA_WEBHOOK:
            assert spec.get("automountServiceAccountToken") is False, who


def test_certgen_touches_one_secret_and_our_webhook_configs(rendered: tuple[str, list[dict[str, Any]]]) -> None:
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


def test_bindings_point_at_objects_that_exist(rendered: tuple[str, list[dict[str, Any]]]) -> None:
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


def test_webhook_configurations(rendered: tuple[str, list[dict[str, Any]]]) -> None:
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


def test_webhooks_reach_the_webhook(rendered: tuple[str, list[dict[str, Any]]]) -> None:
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


def test_local_overlay_has_only_what_the_api_server_needs() -> None:
    kinds = {o["kind"] for o in render("overlays/local")}
    assert kinds == {"Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
                     "ConfigMap", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
                     "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


def test_controller_pod_writes_are_bounded_by_an_admission_policy(rendered: tuple[str, list[dict[str, Any]]]) -> None:
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


# ---------------------------------------------------------------------- workloads
def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return [*(spec.get("initContainers") or []), *spec["containers"]]


def test_pods_are_locked_down(rendered: tuple[str, list[dict[str, Any]]]) -> None:
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


def test_deployments_are_highly_available(rendered: tuple[str, list[dict[str, Any]]]) -> None:
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


def test_controller_flags_match_its_command_line(rendered: tuple[str, list[dict[str, Any]]]) -> None:
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


# ---------------------------------------------------------------------- configuration
def test_base_config_file_loads() -> None:
    cfg = load_config_file(MANIFESTS / "base" / "config.yaml")
    assert cfg.schedulerName == "volcano"


def test_rendered_config_loads_and_is_mounted(rendered: tuple[str, list[dict[str, Any]]]) -> None:
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


def test_certgen_script_names_match_the_manifests() -> None:
    objs = render("base")
    job = named(objs, "Job", "volcano-elastic-certgen")
    assert job is not None
    env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["SECRET_NAME"] == "volcano-elastic-webhook-tls"
    assert named(objs, "Service", env["SERVICE_NAME"]) is not None
    hooks = {w["name"] for _, w in _webhooks(objs)}
    assert {env["MUTATING_WEBHOOKS"], env["VALIDATING_WEBHOOKS"]} == hooks
    assert named(objs, "MutatingWebhookConfiguration", env["WEBHOOK_CONFIGURATION"]) is not None
    dep = named(objs, "Deployment", "volcano-elastic-webhook")
    assert dep is not None
    tls = next(v for v in dep["spec"]["template"]["spec"]["volumes"] if v["name"] == "tls")
    assert tls["secret"]["secretName"] == env["SECRET_NAME"]
    assert {i["key"] for i in tls["secret"]["items"]} == {"tls.crt", "tls.key"}, "the CA key stays in the Secret"


def test_cert_manager_overlay_injects_the_ca() -> None:
    objs = render("overlays/cert-manager")
    cert = named(objs, "Certificate", "volcano-elastic-webhook")
    assert cert is not None and cert["spec"]["secretName"] == "volcano-elastic-webhook-tls"
    assert "volcano-elastic-webhook.volcano-elastic-system.svc" in cert["spec"]["dnsNames"]
    for o in of_kind(objs, "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert o["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == f"{NAMESPACE}/volcano-elastic-webhook"
    assert not of_kind(objs, "Job", "CronJob")


# ---------------------------------------------------------------------- examples
EXAMPLES = MANIFESTS / "examples"


def _example(name: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all((EXAMPLES / name).read_text()) if d]


def example_job(name: str) -> dict[str, Any]:
    """The one PyTorchJob of an example file (which may also hold its ServiceAccount and RBAC)."""
    (job,) = [d for d in _example(name) if d["kind"] == "PyTorchJob"]
    return job


def test_example_queues_and_namespaces() -> None:
    queues = {q["metadata"]["name"]: q["spec"] for q in _example("queues.yaml")}
    assert len(queues) == 3
    assert len({s["weight"] for s in queues.values()}) > 1, "departments should differ in weight"
    for spec in queues.values():
        assert spec["weight"] >= 1 and "nvidia.com/gpu" in spec["capability"]
    mapped = {n["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] for n in _example("namespaces.yaml")}
    assert mapped == set(queues)


def test_example_jobs_pass_our_validation() -> None:
    from elastic_controller.policy.parse import parse_job
    from elastic_controller.policy.podgroups import plan_podgroup
    from webhook.validate import validate_job

    cfg = load_config_file(MANIFESTS / "base" / "config.yaml")
    elastic = example_job("pytorchjob-elastic.yaml")
    static = example_job("pytorchjob-static.yaml")
    for job in (elastic, static):
        job["metadata"]["uid"] = "0000"
        verdict = validate_job(job, cfg)
        assert verdict.allowed and not verdict.warnings, (job["metadata"]["name"], verdict)
    specs = elastic["spec"]["pytorchReplicaSpecs"]
    policy = elastic["spec"]["elasticPolicy"]
    assert list(specs) == ["Worker"]
    assert specs["Worker"]["replicas"] == policy["maxReplicas"] > policy["minReplicas"]
    assert specs["Worker"]["restartPolicy"] == "OnFailure"
    plan = plan_podgroup(parse_job(elastic), cfg)
    assert plan.min_member == policy["minReplicas"] and plan.bounds.elastic
    plan = plan_podgroup(parse_job(static), cfg)
    assert not plan.bounds.elastic and plan.min_member == 4


def test_example_scheduler_conf_leaves_evictions_to_the_agent() -> None:
    conf = yaml.safe_load((EXAMPLES / "volcano-scheduler.conf").read_text())
    actions = [a.strip() for a in conf["actions"].split(",")]
    assert actions == ["enqueue", "allocate", "backfill"]
    plugins = {p["name"] for tier in conf["tiers"] for p in tier["plugins"]}
    assert {"gang", "priority", "predicates", "proportion"} <= plugins
    ours = yaml.safe_load((ROOT / "hack" / "volcano-scheduler-ours.conf").read_text())
    assert conf == ours, "the recommended conf and the one the box runs drifted apart"


def test_example_scheduler_conf_rbac_reads_one_configmap() -> None:
    """The optional Role for the agent's shares check: `get` on Volcano's scheduler ConfigMap only."""
    objs = _example("rbac-volcano-scheduler-conf.yaml")
    role = named(objs, "Role", "volcano-elastic-read-scheduler-conf")
    assert role is not None and role["metadata"]["namespace"] == "volcano-system"
    assert _granted(objs, "Role", "volcano-elastic-read-scheduler-conf") == {
        ("", "configmaps", "get", "volcano-scheduler-configmap")}
    assert _bound_to(objs, SA_CONTROLLER) == [("Role", "volcano-elastic-read-scheduler-conf")]
    from elastic_controller.volcanoconf import DEFAULT_CONFIGMAP

    assert DEFAULT_CONFIGMAP == "volcano-system/volcano-scheduler-configmap"


# ---------------------------------------------------------------------- image
def test_dockerfile_matches_the_manifests() -> None:
    """What the Dockerfile says, read (tests/real/test_image.py runs the image buildah builds from it)."""
    text = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^USER 65532:65532$", text, re.M)
    assert re.search(r'^ENTRYPOINT \["volcano-elastic"\]$', text, re.M)
    stages = re.findall(r"^FROM (\S+)", text, re.M)
    assert len(stages) == 2 and all(s.startswith("${PYTHON_IMAGE}") for s in stages)
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim", text, re.M)
    final = text.split("\nFROM ${PYTHON_IMAGE}\n", 1)[1]
    assert "pip install" not in final and "apt-get" not in final, "the final stage installs nothing"
    ignore = (ROOT / ".dockerignore").read_text().split()
    for src in re.findall(r"^COPY (?!--from)(\S+)", text, re.M):
        assert (ROOT / src).exists(), src
        assert f"!{src.rstrip('/')}/" in ignore or f"!{src}" in ignore, f".dockerignore excludes {src}"
    for _, spec in pod_specs(render("base")):
        assert spec["securityContext"]["runAsUser"] == 65532


def test_image_pins_cover_the_runtime_dependencies() -> None:
    import tomllib

    from packaging.requirements import Requirement

    pins = {}
    for line in (ROOT / "requirements-image.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            req = Requirement(line)
            spec = str(req.specifier)
            assert spec.startswith("=="), line
            pins[re.sub(r"[-_.]+", "-", req.name).lower()] = spec[2:]
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    for dep in deps:
        req = Requirement(dep)
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        assert name in pins, f"{name} is not pinned in requirements-image.txt"
        assert req.specifier.contains(pins[name]), f"{name}=={pins[name]} does not satisfy {dep}"


# ---------------------------------------------------------------------- docs
def test_configuration_doc_names_every_key_with_its_default() -> None:
    import dataclasses

    from elastic_controller.policy.settings import ElasticConfig

    doc = (ROOT / "docs" / "configuration.md").read_text()
    rows = {m.group(1): m.group(2) for m in re.finditer(r"^\| `([\w.]+)` \| `([^`]*)` \|", doc, re.M)}
    cfg = ElasticConfig()
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            prefix = "" if f.name == "defaults" else f"{f.name}."
            for sub in dataclasses.fields(value):
                default = getattr(value, sub.name)
                shown = str(default).lower() if isinstance(default, bool) else f"{default:g}" if isinstance(
                    default, float) else "null" if default is None else str(default)
                assert rows.get(prefix + sub.name) == shown, f"docs/configuration.md: {prefix + sub.name}"
        else:
            assert f.name in rows, f"docs/configuration.md: {f.name}"
    for block in re.findall(r"```yaml\n(.*?)```", doc, re.S):
        load_config(block, "docs/configuration.md example")


def test_operations_doc_lists_every_metric_and_event() -> None:
    doc = (ROOT / "docs" / "operations.md").read_text()
    main = (ROOT / "elastic_controller" / "cli" / "controller.py").read_text()
    metrics = [f"volcano_elastic_{m}" for m in re.findall(r'p \+ "(\w+)"', main)]
    webhook = (ROOT / "webhook" / "metrics.py").read_text()
    for m in re.findall(r'"(volcano_elastic_webhook_\w+)"', webhook):
        metrics.append(m if m.endswith("_seconds") else f"{m}_total")
    assert len(metrics) >= 10
    missing = [m for m in metrics if f"`{m}`" not in doc]
    files = [ROOT / "elastic_controller" / f for f in ("agent.py", "controller.py")]
    files += sorted((ROOT / "elastic_controller" / "execute").glob("*.py"))  # the agent's writes
    sources = "".join(f.read_text() for f in files)
    reasons = set(re.findall(r'emit\([^,]+, "(?:Normal|Warning)", "(\w+)"', sources))
    reasons |= set(re.findall(r'_warn\(raw, "(\w+)"', sources))
    assert len(reasons) >= 8
    missing += [r for r in sorted(reasons) if f"| `{r}` |" not in doc]
    assert not missing, f"docs/operations.md does not describe: {missing}"


# ---------------------------------------------------------------------- hack/kind-e2e.sh
def test_kind_e2e_script_is_consistent() -> None:
    """It cannot run here (no Docker): check its syntax, lint it when shellcheck is there, and
    that what it names exists."""
    script = ROOT / "hack" / "kind-e2e.sh"
    assert os.access(script, os.X_OK)
    subprocess.run(["bash", "-n", str(script)], check=True)
    text = script.read_text()
    assert "cannot run in the project's own" in text and "trap cleanup EXIT" in text
    image = re.search(r'^IMAGE="([^"]+)"', text, re.M)
    assert image is not None
    kind = render("overlays/kind")
    images = {c["image"] for _, spec in pod_specs(kind) for c in spec["containers"]}
    assert images == {image.group(1)}
    for rel in re.findall(r'"\$ROOT/([\w./-]+)"', text):
        assert rel.startswith("out/") or (ROOT / rel).exists(), rel
    versions = (ROOT / "hack" / "versions.env").read_text()
    for var in re.findall(r"\$(VOLCANO_VERSION|TRAINING_OPERATOR_VERSION)\b", text):
        assert re.search(rf"^{var}=v[\d.]+$", versions, re.M), var
    shellcheck = shutil.which("shellcheck")
    if shellcheck:
        proc = subprocess.run([shellcheck, "-x", str(script)], cwd=ROOT, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout


def test_every_kustomize_at_hand_renders_the_same() -> None:
    """Admins run older kubectls: kustomize v5.5 (kubectl 1.32) crashed on multi-document delete
    patches. Whatever other kubectl/kustomize is on PATH must render exactly what ours does."""
    argv, _ = kustomize_command()
    if argv is None:
        pytest.skip("no kustomize")
    others = [(p, ("kustomize",)) for p in [shutil.which("kubectl")] if p and p != argv[0]]
    others += [(p, ("build",)) for p in [shutil.which("kustomize")] if p and p != argv[0]]
    if not others:
        pytest.skip("no second kubectl or kustomize on PATH to compare with")
    for path, sub in others:
        for k in KUSTOMIZATIONS:
            proc = subprocess.run([path, *sub, str(MANIFESTS / k)], capture_output=True, text=True, timeout=120)
            assert proc.returncode == 0, f"{path} {' '.join(sub)} manifests/{k}:\n{proc.stderr[-1500:]}"
            assert [d for d in yaml.safe_load_all(proc.stdout) if d] == list(_render(k)), f"{path}: {k} differs"


def test_kind_e2e_scenario_is_what_the_planner_decides() -> None:
    """The scenario hack/kind-e2e.sh expects (2 workers x 4 GPUs, the example queues, the kind
    config), run through the planner: a 2-GPU gang of nlp gets two elastic workers of one vision job
    (one restart, not two: issue 19), while a 4-GPU one would have to wait (vision may not be taken
    below its deserved share)."""
    from tests.builders import elastic_job, gang, node, plan_of, queue

    cfg = load_config((MANIFESTS / "overlays" / "kind" / "config.yaml").read_text())
    weights = {q["metadata"]["name"]: q["spec"]["weight"] for q in _example("queues.yaml")}
    world = [[node("n1", gpus=4), node("n2", gpus=4)], [queue(n, w) for n, w in weights.items()],
             *(elastic_job("team-vision", j, min_r=2, max_r=4, nodes=["n1", "n2"], queue="vision")
               for j in ("vision-a", "vision-b"))]
    plan = plan_of(*world, gang("team-nlp", "nlp-fixed", members=2, gpus=1, queue="nlp"), cfg=cfg)
    assert sorted(e.pod for e in plan.evictions) == ["team-vision/vision-a-worker-2", "team-vision/vision-a-worker-3"]
    plan = plan_of(*world, gang("team-nlp", "nlp-fixed", members=4, gpus=1, queue="nlp"), cfg=cfg)
    assert not plan.evictions and [s.decision for s in plan.starving] == ["wait"]
    text = (ROOT / "hack" / "kind-e2e.sh").read_text()
    assert "job nlp-fixed team-nlp 1 1 master" in text and "job vision-a team-vision 2 4" in text


def test_network_policies_keep_pods_off_the_webhook(rendered: tuple[str, list[dict[str, Any]]]) -> None:
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


def test_viewer_role_grants_exactly_what_status_reads(rendered: tuple[str, list[dict[str, Any]]]) -> None:
    """`status`, `queues` and a dump for `plan` list every resource of the agent's snapshot,
    cluster-wide (decisions are planned on the whole cluster); the viewer role grants that and
    nothing else, and nobody of ours is bound to it (admins bind their researchers' group)."""
    from elastic_controller.kube.resources import SNAPSHOT_RESOURCES

    _, objs = rendered
    assert _granted(objs, "ClusterRole", "volcano-elastic-viewer") == {
        (r.group, r.plural, "list", None) for r in SNAPSHOT_RESOURCES}
    assert not [b for b in of_kind(objs, "RoleBinding", "ClusterRoleBinding")
                if b["roleRef"]["name"] == "volcano-elastic-viewer"]


def test_viewer_role_reads_exactly_the_controllers_config(rendered: tuple[str, list[dict[str, Any]]]) -> None:
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
