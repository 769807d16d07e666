"""The Helm chart (charts/volcano-elastic) against the Kustomize manifests.

1. ``helm lint`` passes for every certificate mode.
2. With default values the chart renders the same objects as ``kubectl kustomize manifests/base``
   (``certs.mode=cert-manager``: as ``manifests/overlays/cert-manager``): the same kinds and names,
   the same specs, the same RBAC rules, the same ElasticConfig, the same certgen script. Two
   documented differences: the chart creates no Namespace (Helm installs into one that exists),
   and it adds its post-delete hook (``release-gates --all``). The comparison is computed from
   whatever the kustomization renders, so an object added to manifests/base fails here until the
   chart renders it too.
3. Every check of tests/harness/manifests.py (``CHECKS``) (least privilege, locked-down
   pods, webhook scoping, HA, flags that exist, ...) runs on the chart's renderings as well:
   a check added there is applied to the chart automatically.

helm comes from the binary cache (``bash hack/build-binaries.sh helm``), else from PATH, else it
is built here with that same script; only when none of that works are these tests skipped,
loudly, with the reason.
"""

from __future__ import annotations

import base64
import copy
import difflib
import re
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml

from elastic_controller.config import load_config
from tests.harness import manifests
from tests.harness.chart import CHART, HOOK, RELEASE, helm, helm_command, split_hooks, template
from tests.harness.manifests import NAMESPACE, ROOT, ident, named, of_kind, pod_specs, render
from tests.harness.required import cannot_run

# What the chart adds to manifests/base: the post-delete hook lifting our gates on uninstall.
UNINSTALL_HOOK = {
    f"ServiceAccount {NAMESPACE}/volcano-elastic-release-gates",
    "ClusterRole volcano-elastic-release-gates",
    "ClusterRoleBinding volcano-elastic-release-gates",
    f"ConfigMap {NAMESPACE}/volcano-elastic-release-gates",
    f"Job {NAMESPACE}/volcano-elastic-release-gates",
}
# What the chart leaves out of manifests/base, and why.
NOT_IN_CHART = {
    f"Namespace {NAMESPACE}": "Helm installs into a namespace that exists (docs/install.md creates it "
                              "with its Pod Security labels); a chart owning its release namespace "
                              "cannot be installed into it",
}
# kustomize appends a content hash to generated ConfigMaps; the chart uses the plain names and
# rolls the Deployments with a checksum annotation instead.
HASHED = re.compile(r"^(?P<name>.+)-[a-z0-9]{10}$")


CERT_MANAGER = ("certs.mode=cert-manager",)
EXTERNAL = ("webhook.enabled=false", "controller.enabled=false", "certs.mode=external",
            "admission.url=https://127.0.0.1:8443")
# chart values -> the kustomization whose name the test_manifests checks know it by
RENDERINGS: dict[str, tuple[tuple[str, ...], str]] = {
    "defaults": ((), "base"),
    "cert-manager": (CERT_MANAGER, "overlays/cert-manager"),
    "external webhook": (EXTERNAL, "overlays/local"),
}


def test_helm_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    binary, source = helm_command()
    if binary is None:
        warnings.warn(f"no helm: {source}", stacklevel=1)
        cannot_run("chart", f"no helm: {source}")
    version = helm("version", "--short").stdout.strip()
    pinned = re.search(r"^HELM_VERSION=(\S+)$", (ROOT / "hack" / "versions.env").read_text(), re.M)
    assert pinned is not None and version.startswith(pinned.group(1)), (version, pinned)
    with capsys.disabled():
        print(f"\n[chart] rendering with {source} ({version})")


@pytest.mark.parametrize("name", list(RENDERINGS))
def test_helm_lint(name: str) -> None:
    args = ["lint", str(CHART), "--strict", "--namespace", NAMESPACE]
    for s in RENDERINGS[name][0]:
        args += ["--set", s]
    proc = helm(*args, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr


# ---------------------------------------------------------------------- same objects as kustomize
def _unhash(kustomized: list[dict[str, Any]], chart_names: set[str]) -> list[dict[str, Any]]:
    """kustomize's hashed ConfigMap names replaced, wherever they occur, by the chart's plain names."""
    renames = {}
    for cm in of_kind(kustomized, "ConfigMap"):
        m = HASHED.match(cm["metadata"]["name"])
        if m and m.group("name") in chart_names:
            renames[cm["metadata"]["name"]] = m.group("name")

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return renames.get(v, v) if isinstance(v, str) else v

    return [walk(o) for o in kustomized]


def _rules(role: dict[str, Any]) -> set[tuple[str, str, str, str | None]]:
    return {(g, r, v, n) for rule in role.get("rules") or [] for g in rule.get("apiGroups") or [""]
            for r in rule.get("resources") or [] for v in rule.get("verbs") or []
            for n in rule.get("resourceNames") or [None]}


def _strip_metadata(o: dict[str, Any], problems: list[str], who: str, where: str,
                    chart: dict[str, Any], base: dict[str, Any]) -> None:
    """Base labels and annotations must be on the chart's object too (it may add its own: Helm's
    labels, a config checksum); then both are dropped from the comparison."""
    for field in ("labels", "annotations"):
        want = base.pop(field, None) or {}
        have = chart.pop(field, None) or {}
        for k, v in want.items():
            if have.get(k) != v:
                problems.append(f"{who}: {where}{field}[{k}] is {have.get(k)!r}, manifests/base has {v!r}")


def _pod_template(o: dict[str, Any]) -> dict[str, Any] | None:
    spec = o.get("spec") or {}
    if o["kind"] == "CronJob":
        return spec["jobTemplate"]["spec"]["template"]  # type: ignore[no-any-return]
    return spec.get("template") if o["kind"] in ("Deployment", "Job", "StatefulSet", "DaemonSet") else None


def _squash_expressions(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: " ".join(x.split()) if k == "expression" and isinstance(x, str) else _squash_expressions(x)
                for k, x in v.items()}
    if isinstance(v, list):
        return [_squash_expressions(x) for x in v]
    return v


def compare(kustomized: list[dict[str, Any]], chart: list[dict[str, Any]]) -> list[str]:
    """Every difference between the kustomize rendering and the chart's (hooks left out)."""
    problems: list[str] = []
    chart_ids = {ident(o): o for o in chart}
    kustomized = _unhash(kustomized, {o["metadata"]["name"] for o in of_kind(chart, "ConfigMap")})
    base_ids = {ident(o): o for o in kustomized if ident(o) not in NOT_IN_CHART}
    for missing in sorted(set(base_ids) - set(chart_ids)):
        problems.append(f"{missing}: in manifests but not rendered by the chart")
    for extra in sorted(set(chart_ids) - set(base_ids)):
        problems.append(f"{extra}: rendered by the chart but not in manifests")
    for who in sorted(set(base_ids) & set(chart_ids)):
        want, have = copy.deepcopy(base_ids[who]), copy.deepcopy(chart_ids[who])
        _strip_metadata(have, problems, who, "metadata.", have["metadata"], want["metadata"])
        tw, th = _pod_template(want), _pod_template(have)
        if tw is not None and th is not None:
            _strip_metadata(have, problems, who, "pod template ", th.setdefault("metadata", {}),
                            tw.setdefault("metadata", {}))
        if want["kind"] in ("Role", "ClusterRole"):
            if _rules(want) != _rules(have):
                only_base = sorted(_rules(want) - _rules(have), key=str)
                only_chart = sorted(_rules(have) - _rules(want), key=str)
                problems.append(f"{who}: RBAC rules differ: only in manifests {only_base}, "
                                f"only in the chart {only_chart}")
            want.pop("rules", None)
            have.pop("rules", None)
        if want["kind"] == "ConfigMap" and "config.yaml" in (want.get("data") or {}):
            if yaml.safe_load(want["data"].pop("config.yaml")) != yaml.safe_load(have["data"].pop("config.yaml")):
                problems.append(f"{who}: the ElasticConfig differs from manifests/base/config.yaml")
        if want["kind"] == "ValidatingAdmissionPolicy":
            # CEL in folded YAML: kustomize's YAML library re-folds more-indented lines with an extra
            # blank line that a spec-following parser (and the API server's) does not produce; CEL
            # does not care about whitespace, so neither does the comparison
            want, have = _squash_expressions(want), _squash_expressions(have)
        if want != have:
            diff = difflib.unified_diff(yaml.safe_dump(want, sort_keys=True).splitlines(),
                                        yaml.safe_dump(have, sort_keys=True).splitlines(),
                                        "manifests", "chart", lineterm="", n=1)
            problems.append(f"{who} differs:\n" + "\n".join(diff))
    return problems


@pytest.mark.parametrize(("sets", "kustomization"), [((), "base"), (CERT_MANAGER, "overlays/cert-manager")],
                         ids=["defaults=base", "cert-manager=overlays/cert-manager"])
def test_chart_renders_what_kustomize_renders(sets: tuple[str, ...], kustomization: str) -> None:
    objs, hooks = split_hooks(template(*sets))
    problems = compare(render(kustomization), objs)
    assert not problems, f"chart ({' '.join(sets) or 'defaults'}) vs manifests/{kustomization}:\n" + "\n".join(problems)
    assert {ident(h) for h in hooks} == UNINSTALL_HOOK


def test_the_comparison_catches_drift() -> None:
    """compare() must fail on what a drift would look like (so a green test means something)."""
    base, chart = render("base"), split_hooks(template())[0]
    assert compare(base, chart) == []
    role = named(chart, "ClusterRole", "volcano-elastic-controller")
    assert role is not None
    role["rules"][0]["verbs"].append("deletecollection")
    dep = named(chart, "Deployment", "volcano-elastic-webhook")
    assert dep is not None
    dep["spec"]["template"]["spec"]["containers"][0]["args"].append("--extra")
    chart.append({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x", "namespace": NAMESPACE}})
    cm = named(chart, "ConfigMap", "volcano-elastic-config")
    assert cm is not None
    cm["data"]["config.yaml"] = "defaultQueue: other\n"
    base.append({"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
                 "metadata": {"name": "new-in-base", "namespace": NAMESPACE}})
    text = "\n".join(compare(base, chart))
    for needle in ("ClusterRole volcano-elastic-controller: RBAC rules differ",
                   "('', 'pods', 'deletecollection', None)",
                   f"Deployment {NAMESPACE}/volcano-elastic-webhook differs", "--extra",
                   f"Secret {NAMESPACE}/x: rendered by the chart but not in manifests",
                   f"NetworkPolicy {NAMESPACE}/new-in-base: in manifests but not rendered by the chart",
                   "the ElasticConfig differs"):
        assert needle in text, needle


def test_default_values_config_is_manifests_config() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["config"] == yaml.safe_load((ROOT / "manifests" / "base" / "config.yaml").read_text())


# ---------------------------------------------------------------------- the manifest checks, on the chart
def _rendering_checks() -> Iterator[tuple[str, Callable[[tuple[str, list[dict[str, Any]]]], None]]]:
    for fn in manifests.CHECKS:
        yield fn.__name__, fn


# The external-webhook rendering has no certgen (you bring the certificate); the local overlay
# keeps certgen's RBAC for the box's least-privilege tests.
NOT_FOR_EXTERNAL = {"check_certgen_touches_one_secret_and_our_webhook_configs"}
CHECKS = [(r, n, f) for r in RENDERINGS for n, f in _rendering_checks()
          if not (r == "external webhook" and n in NOT_FOR_EXTERNAL)]


def test_manifest_checks_are_found() -> None:
    assert len(list(_rendering_checks())) >= 10


@pytest.mark.parametrize(("rendering", "check"), [(r, f) for r, _, f in CHECKS],
                         ids=[f"{r}-{n}" for r, n, _ in CHECKS])
def test_chart_passes_every_manifest_check(rendering: str,
                                           check: Callable[[tuple[str, list[dict[str, Any]]]], None]) -> None:
    sets, known_as = RENDERINGS[rendering]
    objs, _ = split_hooks(template(*sets))
    check((known_as, objs))


def test_uninstall_hook_lifts_gates_with_least_privilege() -> None:
    from elastic_controller.cli import build_parser

    _, hooks = split_hooks(template())
    for h in hooks:
        ann = h["metadata"]["annotations"]
        assert ann[HOOK] == "post-delete", ident(h)
        assert "hook-succeeded" in ann["helm.sh/hook-delete-policy"], ident(h)
        assert h["metadata"]["labels"]["app.kubernetes.io/part-of"] == "volcano-elastic"
    role = named(hooks, "ClusterRole", "volcano-elastic-release-gates")
    assert role is not None
    assert _rules(role) == {("", "pods", "list", None), ("", "pods", "patch", None),
                            ("kubeflow.org", "pytorchjobs", "list", None)}
    manifests.check_no_role_grants_pod_delete_or_wildcards(("hooks", hooks))
    manifests.check_bindings_point_at_objects_that_exist(("hooks", hooks))
    # the pod checks without the Deployment-presence rule (the hooks are alone here)
    manifests.check_pods_are_locked_down(("overlays/local", hooks))
    job = named(hooks, "Job", "volcano-elastic-release-gates")
    assert job is not None
    (container,) = job["spec"]["template"]["spec"]["containers"]
    args = build_parser().parse_args(container["args"])
    assert container["args"][:2] == ["release-gates", "--all"] and args.config == "/etc/volcano-elastic/config.yaml"
    cm = named(hooks, "ConfigMap", "volcano-elastic-release-gates")
    assert cm is not None
    cfg = load_config(cm["data"]["config.yaml"], "release-gates hook ConfigMap")
    assert cfg.gating.gateName == "volcano-elastic.io/scale-up"
    assert not split_hooks(template("uninstall.releaseGates=false"))[1]


# ---------------------------------------------------------------------- values
def test_values_reach_the_objects() -> None:
    objs = template("image.repository=registry.example/ml/volcano-elastic", "image.tag=9.9.9",
                    "image.pullPolicy=Always", "webhook.replicas=3", "controller.replicas=4",
                    "commonLabels.team=platform", "config.defaultQueue=research",
                    "config.gating.gateName=example.com/hold", "controller.resources.limits.memory=4Gi",
                    "admission.excludedNamespaces={kube-system,monitoring}", "imagePullSecrets[0].name=regcred")
    for who, spec in pod_specs(objs):
        for c in spec["containers"]:
            assert c["image"] == "registry.example/ml/volcano-elastic:9.9.9", who
            assert c["imagePullPolicy"] == "Always", who
        assert spec["imagePullSecrets"] == [{"name": "regcred"}], who
    for o in objs:
        assert o["metadata"]["labels"]["team"] == "platform", ident(o)
    webhook = named(objs, "Deployment", "volcano-elastic-webhook")
    controller = named(objs, "Deployment", "volcano-elastic-controller")
    assert webhook is not None and controller is not None
    assert (webhook["spec"]["replicas"], controller["spec"]["replicas"]) == (3, 4)
    assert controller["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] == "4Gi"
    for name in ("volcano-elastic-config", "volcano-elastic-release-gates"):
        cm = named(objs, "ConfigMap", name)
        assert cm is not None
        cfg = load_config(cm["data"]["config.yaml"], name)
        assert (cfg.defaultQueue, cfg.gating.gateName) == ("research", "example.com/hold")
    pol = named(objs, "ValidatingAdmissionPolicy", "volcano-elastic-controller-writes")
    assert pol is not None
    assert {v["name"]: v["expression"] for v in pol["spec"]["variables"]}["gate"] == "'example.com/hold'"
    # a config change rolls both Deployments
    default = {ident(d): d["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
               for d in of_kind(template(), "Deployment")}
    changed = {ident(d): d["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
               for d in of_kind(objs, "Deployment")}
    assert default.keys() == changed.keys() and all(default[k] != changed[k] for k in default)
    for o in of_kind(objs, "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        values = o["webhooks"][0]["namespaceSelector"]["matchExpressions"][0]["values"]
        assert values == ["kube-system", "monitoring", NAMESPACE], "the release namespace is always excluded"


def test_another_release_namespace_is_used_everywhere() -> None:
    objs = template(namespace="ml-platform")
    text = yaml.safe_dump_all(objs)
    assert NAMESPACE not in text
    for o in objs:
        assert o["metadata"].get("namespace") in (None, "ml-platform"), ident(o)
    for o in of_kind(objs, "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        assert o["webhooks"][0]["clientConfig"]["service"]["namespace"] == "ml-platform"
    policies = of_kind(objs, "ValidatingAdmissionPolicy")
    assert len(policies) == 4  # pod/job writes, PodGroup deletes, pod deletes (T13), the tenant boundary
    for pol in policies:
        who = pol["spec"]["matchConditions"][0]["expression"]
        assert "system:serviceaccount:ml-platform:volcano-elastic-controller" in who


def test_the_tenant_policy_trusts_our_accounts_and_has_an_off_switch() -> None:
    """Issue 36: the tenant boundary's ValidatingAdmissionPolicy is on by default, names the
    release's own ServiceAccounts and the configured gate and tenant-writable annotations, and
    tenantPolicy.enabled=false removes it and its binding (and nothing else)."""
    objs = template("config.gating.gateName=example.com/hold", "tenantPolicy.trustedUsers={alice}",
                    "tenantPolicy.tenantAnnotations={volcano-elastic.io/last-checkpoint-time}",
                    namespace="ml-platform")
    pol = named(objs, "ValidatingAdmissionPolicy", "volcano-elastic-tenant-writes")
    binding = named(objs, "ValidatingAdmissionPolicyBinding", "volcano-elastic-tenant-writes")
    assert pol is not None and binding is not None
    assert binding["spec"]["validationActions"] == ["Deny"] and pol["spec"]["failurePolicy"] == "Fail"
    trusted = pol["spec"]["matchConditions"][0]["expression"]
    for who in ("system:serviceaccount:ml-platform:volcano-elastic-controller",
                "system:serviceaccount:ml-platform:volcano-elastic-release-gates", '"alice"', "system:masters"):
        assert who in trusted, who
    variables = {v["name"]: v["expression"] for v in pol["spec"]["variables"]}
    assert variables["gate"] == "'example.com/hold'"
    assert variables["open"] == '["volcano-elastic.io/last-checkpoint-time"]'
    rules = {(r["apiGroups"][0], r["resources"][0]): r["operations"]
             for r in pol["spec"]["matchConstraints"]["resourceRules"]}
    assert rules == {("", "pods"): ["CREATE", "UPDATE"], ("kubeflow.org", "pytorchjobs"): ["CREATE", "UPDATE"]}
    off = template("tenantPolicy.enabled=false")
    assert named(off, "ValidatingAdmissionPolicy", "volcano-elastic-tenant-writes") is None
    assert named(off, "ValidatingAdmissionPolicyBinding", "volcano-elastic-tenant-writes") is None
    assert len(off) == len(template()) - 2


def test_optional_servicemonitor_and_networkpolicies() -> None:
    assert not of_kind(template(), "ServiceMonitor")
    assert not of_kind(template(), "NetworkPolicy"), "off by default, as in manifests/base: no pod CIDR fits all"
    objs = template("serviceMonitor.enabled=true", "serviceMonitor.labels.release=prom", "networkPolicy.enabled=true",
                    "networkPolicy.podCIDRs.ipv4={10.42.0.0/16}", "networkPolicy.podCIDRs.ipv6={fd00:42::/56}")
    (sm,) = of_kind(objs, "ServiceMonitor")
    svc = named(objs, "Service", "volcano-elastic-controller-metrics")
    assert svc is not None
    assert manifests.selector_matches(sm["spec"]["selector"], svc["metadata"]["labels"])
    assert sm["spec"]["endpoints"][0]["port"] == svc["spec"]["ports"][0]["name"]
    assert sm["metadata"]["labels"]["release"] == "prom"
    policies = {p["metadata"]["name"]: p for p in of_kind(objs, "NetworkPolicy")}
    assert set(policies) == {"volcano-elastic-webhook", "volcano-elastic-controller"}
    for pol in policies.values():
        excepts = [peer["ipBlock"]["except"] for peer in pol["spec"]["ingress"][0]["from"] if "ipBlock" in peer]
        assert excepts == [["10.42.0.0/16"], ["fd00:42::/56"]]
    manifests.check_network_policies_keep_pods_off_the_webhook(("chart", objs))
    # one family given: the other is not admitted at all (no ::/0 without its pod network excepted)
    only4 = template("networkPolicy.enabled=true", "networkPolicy.podCIDRs.ipv4={10.42.0.0/16}")
    for pol in of_kind(only4, "NetworkPolicy"):
        blocks = [peer["ipBlock"] for peer in pol["spec"]["ingress"][0]["from"] if "ipBlock" in peer]
        assert blocks == [{"cidr": "0.0.0.0/0", "except": ["10.42.0.0/16"]}]


def test_external_webhook_carries_its_ca() -> None:
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    objs = template(*EXTERNAL, f"admission.caBundle={pem}")
    # nothing that would need a kubelet but the uninstall hook
    assert {ident(o) for o in of_kind(objs, "Deployment", "Job", "CronJob", "Service")} == \
        {f"Job {NAMESPACE}/volcano-elastic-release-gates"}
    for o in of_kind(objs, "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        cc = o["webhooks"][0]["clientConfig"]
        assert cc["url"] in ("https://127.0.0.1:8443/mutate-pods", "https://127.0.0.1:8443/validate-pytorchjobs")
        assert base64.b64decode(cc["caBundle"]).decode() == pem


@pytest.mark.parametrize(("sets", "needle"), [
    (("certs.mode=selfsigned",), "certs.mode must be one of certgen, cert-manager, external"),
    (("admission.url=https://10.0.0.1:8443",), "a webhook outside the cluster) needs certs.mode=external"),
    (("certs.mode=external", "admission.url=https://x:8443"), "set webhook.enabled=false"),
    (("certs.mode=certgen", "admission.caBundle=x"), "admission.caBundle is only used with certs.mode=external"),
    (("admission.failurePolicy=Sometimes",), "admission.failurePolicy must be Fail or Ignore"),
    (("networkPolicy.enabled=true",), "networkPolicy.enabled needs networkPolicy.podCIDRs"),
])
def test_bad_values_fail_with_a_reason(sets: tuple[str, ...], needle: str) -> None:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    for s in sets:
        args += ["--set", s]
    proc = helm(*args, check=False)
    assert proc.returncode != 0 and needle in proc.stderr, proc.stderr


def _deletes_pods(objs: list[dict[str, Any]]) -> bool:
    role = named(objs, "ClusterRole", "volcano-elastic-controller")
    assert role is not None
    return ("", "pods", "delete", None) in _rules(role)


def _passes_pdbs(objs: list[dict[str, Any]]) -> bool:
    cm = named(objs, "ConfigMap", "volcano-elastic-config")
    assert cm is not None
    return load_config(cm["data"]["config.yaml"]).agent.passPdb


@pytest.mark.parametrize("sets", [(), ("admissionPolicy.enabled=false",), ("config.agent.passPdb=false",),
                                  ("admissionPolicy.enabled=false", "config.agent.passPdb=true")],
                         ids=["defaults", "no-policy", "no-pass", "no-policy-pass-asked"])
def test_pod_deletes_only_with_their_bounding_policy(sets: tuple[str, ...]) -> None:
    """Issue 36, T13 (review B3): the controller's `delete pods` is granted only where the admission
    policy volcano-elastic-controller-pod-deletes bounds it, and the agent passes a PDB (config
    agent.passPdb) only where it holds the grant: without the policy, neither."""
    objs, _ = split_hooks(template(*sets))
    bounded = named(objs, "ValidatingAdmissionPolicy", "volcano-elastic-controller-pod-deletes") is not None
    policy_on = "admissionPolicy.enabled=false" not in sets
    asked = "config.agent.passPdb=false" not in sets
    assert bounded == policy_on
    assert _deletes_pods(objs) == (policy_on and asked)
    assert _passes_pdbs(objs) == _deletes_pods(objs)
    if _deletes_pods(objs):
        assert bounded
    manifests.check_no_role_grants_pod_delete_or_wildcards(("chart " + " ".join(sets), objs))
