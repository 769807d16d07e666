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
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from elastic_controller.config import load_config, load_config_file, parse_config
from tests.harness.manifests import (
    CHECKS,
    EXAMPLES,
    KUSTOMIZATIONS,
    MANIFESTS,
    NAMESPACE,
    ROOT,
    SA_CONTROLLER,
    Rendering,
    _bound_to,
    _example,
    _granted,
    _render,
    _webhooks,
    check_controller_policies_match_its_account,
    example_job,
    kustomize_command,
    named,
    of_kind,
    pod_specs,
    render,
)
from tests.harness.required import cannot_run


@pytest.fixture(scope="module", params=KUSTOMIZATIONS)
def rendered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]]]:
    return request.param, render(request.param)


@pytest.mark.parametrize("check", CHECKS, ids=[c.__name__.removeprefix("check_") for c in CHECKS])
def test_manifests_pass_every_check(rendered: Rendering, check: Callable[[Rendering], None]) -> None:
    check(rendered)



def render_yaml(kustomization: str) -> str:
    return yaml.safe_dump_all(render(kustomization), sort_keys=False)


def test_renderer_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    argv, source = kustomize_command()
    if argv is None:
        cannot_run("manifests", f"no kustomize: {source}")
    with capsys.disabled():
        print(f"\n[manifests] rendering with {source}")


def test_every_kustomization_is_tested() -> None:
    found = sorted(str(p.parent.relative_to(MANIFESTS)) for p in MANIFESTS.rglob("kustomization.yaml"))
    expected = sorted([*KUSTOMIZATIONS, "base/certgen", "monitoring"])  # monitoring: test_monitoring.py
    assert found == expected, "a kustomization was added or removed: update KUSTOMIZATIONS"


def test_local_overlay_has_only_what_the_api_server_needs() -> None:
    kinds = {o["kind"] for o in render("overlays/local")}
    assert kinds == {"Namespace", "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding",
                     "ConfigMap", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration",
                     "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


# ---------------------------------------------------------------------- configuration
def test_base_config_file_loads() -> None:
    cfg = load_config_file(MANIFESTS / "base" / "config.yaml")
    assert cfg.schedulerName == "volcano"


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
    # at most 4 workers: admitted whole under the default wholeGangUpTo (4); elastic from its min at 0
    assert plan.min_member == policy["maxReplicas"] and plan.whole and plan.bounds.elastic
    plan = plan_podgroup(parse_job(elastic), parse_config({"defaults": {"wholeGangUpTo": 0}}))
    assert plan.min_member == policy["minReplicas"] and not plan.whole
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
    from tests.harness.builders import elastic_job, gang, node, plan_of, queue

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




def test_a_namespace_change_that_leaves_a_policy_unmatched_fails() -> None:
    """Review B3: the admission policies bounding the controller's writes and `delete pods` match its
    ServiceAccount by username, namespace included; a namespace changed on the objects only
    (`kustomize edit set namespace`) leaves them matching nobody: the controller unbounded. The check
    sees it."""
    objs = render("base")
    check_controller_policies_match_its_account(("base", objs))
    moved = copy.deepcopy(objs)
    for o in moved:
        if o["metadata"].get("namespace") == NAMESPACE:
            o["metadata"]["namespace"] = "ml-platform"
    with pytest.raises(AssertionError, match="matches nobody"):
        check_controller_policies_match_its_account(("moved", moved))
