"""Our chart installed on the real-node box (helm, our image imported into both nodes) and what the
real tier's jobs are made of: the PROBE program a pod runs to record its signals and exits, the
records it leaves, PyTorchJobs of it, Volcano queues, and the install's readiness and diagnosis.
`install` (`uninstall`, `installed`) is the one in-cluster install, for tests/real and the bench."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from hack.localbox import image
from tests.harness.chart import CHART
from tests.harness.helmbox import helm
from tests.harness.kubeflow import pytorchjob_manifest
from tests.harness.legacy import LEGACY_SETS
from tests.harness.waiting import wait_until

# The probe: records start, SIGTERM, exit and the first eviction notice it sees in its
# downward-API annotations file, one JSON line each, in /out/<pod name> (a hostPath). It exits 143
# after SIGTERM: the training operator (v1.9) marks an elastic PyTorchJob Succeeded as soon as one
# worker Succeeded, so a worker that exits 0 when evicted ends its whole job (seen on this tier;
# torchrun's agent exits 1 there).
PROBE = r"""
import json, os, signal, sys, time
out = open("/out/" + os.environ["POD_NAME"], "a", buffering=1)
def rec(kind, **kw):
    out.write(json.dumps({"kind": kind, "t": time.time(), **kw}) + "\n")
def term(signum, frame):
    rec("term")
    time.sleep(float(os.environ.get("WORK_AFTER_TERM", "0")))
    rec("exit")
    sys.exit(143)  # as a process killed by SIGTERM: an elastic worker that exits 0 ends its PyTorchJob
signal.signal(signal.SIGTERM, term)
rec("start", node=os.environ.get("NODE_NAME"))
seen = False
while True:
    try:
        ann = open("/podinfo/annotations").read()
    except OSError:
        ann = ""
    if not seen and "volcano-elastic.io/evict-after" in ann:
        seen = True
        rec("notice")
    time.sleep(0.1)
"""


def records(out_dir: Path, pod: str) -> dict[str, dict[str, Any]]:
    f = out_dir / pod
    if not f.exists():
        return {}
    recs: dict[str, dict[str, Any]] = {}
    for line in f.read_text().splitlines():
        r = json.loads(line)
        recs.setdefault(r["kind"], r)
    return recs


@pytest.fixture
def out_dir(tmp_path: Path) -> Path:
    d = tmp_path / "out"
    d.mkdir()
    d.chmod(0o777)  # the image runs as 65532
    return d


NAMESPACE = "volcano-elastic-system"
RELEASE = "volcano-elastic"
GATE = "volcano-elastic.io/scale-up"
VC = ("scheduling.volcano.sh", "v1beta1")
KF = ("kubeflow.org", "v1")
GPUS_PER_WORKER = 2
COOLDOWN = 30


# the e2e tier's shortened time constants (tests/harness/stack.py)
CONFIG_SETS = [  # --set-json: `helm --set` would make 0.3 a string, which the config refuses
    "config.agent.intervalSeconds=1", f"config.defaults.cooldownSeconds={COOLDOWN}",
    "config.defaults.minRuntimeSeconds=5", "config.defaults.starvationSeconds=3",
    "config.defaults.maxScaleUpPerCycle=8", "config.defaults.minScaleUpGain=0.3",
    "config.defaults.minWorkersToShrink=2",
    # the three keys of issue 38 as before: the tiers' jobs (1..4, 2..4 workers) are shrunk and their
    # victims evicted at once, which a job admitted whole (wholeGangUpTo: 4) never is
    *LEGACY_SETS,
]
# our image as the box's nodes have it (imported, never pulled), the NetworkPolicy for the box's pod CIDR
CHART_SETS = ("image.repository=volcano-elastic", "image.tag=dev", "image.pullPolicy=Never",
              "networkPolicy.enabled=true", "networkPolicy.podCIDRs.ipv4={10.88.0.0/16}")


def create_namespace(box: Any) -> None:
    """Our namespace, as an admin makes it: Pod Security `restricted` enforced (left from before: fine)."""
    box.kubectl("create", "namespace", NAMESPACE, check=False)
    box.kubectl("label", "--overwrite", "namespace", NAMESPACE, "pod-security.kubernetes.io/enforce=restricted")


def install(box: Any, json_sets: Sequence[str] = ()) -> float:
    """Our chart on BOX: `helm install` of our image (CHART_SETS), the e2e tier's time constants
    (CONFIG_SETS) and JSON_SETS (more `--set-json`), then wait_installed; the seconds to ready. A
    failure raises AssertionError with the namespace's pods, Jobs and events."""
    create_namespace(box)
    sets = [f"--set={s}" for s in CHART_SETS] + [f"--set-json={s}" for s in (*CONFIG_SETS, *json_sets)]
    t0 = time.monotonic()
    r = helm(box, "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--wait", "--timeout", "240s", *sets)
    if r.returncode != 0:
        raise AssertionError(f"helm install failed: {r.stderr}\n{diagnose(box)}")
    api = config.new_client_from_config(config_file=str(box.kubeconfig))
    try:
        wait_installed(box, client.CoreV1Api(api))
    finally:
        api.close()
    return time.monotonic() - t0


def uninstall(box: Any, check: bool = True) -> None:
    """`helm uninstall --wait` of our release; `check`: a failure (no release included) raises."""
    r = helm(box, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "180s")
    if check and r.returncode != 0:
        raise AssertionError(f"helm uninstall failed: {r.stderr}")


@contextmanager
def installed(box: Any, json_sets: Sequence[str] = ()) -> Iterator[float]:
    """install() (a kept box's release removed first) for a with block, uninstalled after it."""
    uninstall(box, check=False)
    try:
        yield install(box, json_sets)
    finally:
        uninstall(box, check=False)


def diagnose(box: Any) -> str:
    out = box.kubectl("get", "pods,jobs,events", "-n", NAMESPACE, "-o", "wide", check=False)
    return out.stdout[-4000:] + out.stderr[-2000:]


def failure_report(box: Any, since_seconds: int, pod_log_lines: int = 40, controller_lines: int = 200) -> str:
    """What a failed real test leaves for a reader of the CI log, which keeps nothing else: our
    controller's log of the last SINCE_SECONDS (its last CONTROLLER_LINES lines) and the end of each
    training pod's log that `bench/real_training.py` saved in that time (under the box's shared/)."""
    parts = []
    out = box.kubectl("logs", "-n", NAMESPACE, "deployment/volcano-elastic-controller", "--all-containers",
                      f"--since={max(1, since_seconds)}s", f"--tail={controller_lines}", check=False)
    parts.append(f"--- our controller, the last {since_seconds} s ---\n{out.stdout}{out.stderr[-2000:]}")
    cutoff = time.time() - since_seconds
    logs = sorted((f for f in (Path(box.dir) / "shared").glob("*/pods/*.log") if f.stat().st_mtime >= cutoff),
                  key=lambda f: f.stat().st_mtime)
    for f in logs:
        lines = f.read_text(errors="replace").splitlines()[-pod_log_lines:]
        parts.append(f"--- {f.parent.parent.name}/{f.name} (last {len(lines)} lines) ---\n" + "\n".join(lines))
    return "\n".join(parts)


def wait_installed(box: Any, core: Any) -> None:
    apps = client.AppsV1Api(core.api_client)

    def ready() -> bool:
        def available(name: str) -> int:
            try:
                return int(apps.read_namespaced_deployment(name, NAMESPACE).status.available_replicas or 0)
            except client.ApiException:
                return 0
        return available("volcano-elastic-webhook") >= 2 and available("volcano-elastic-controller") >= 1

    try:
        wait_until("two webhook replicas and a controller available", ready, 240, interval=1)
        lease = wait_until("the controller's Lease held", lambda: client.CoordinationV1Api(core.api_client)
                           .read_namespaced_lease("volcano-elastic-controller", NAMESPACE).spec.holder_identity, 90)
    except AssertionError as e:
        raise AssertionError(f"{e}\n{diagnose(box)}") from None
    assert lease
    # the certgen Job writes caBundle into both webhook configurations after they are applied: until
    # then the API server cannot verify our webhook ("certificate signed by unknown authority")
    adm = client.AdmissionregistrationV1Api(core.api_client)
    wait_until("caBundle in both webhook configurations", lambda: all(
        w.client_config.ca_bundle for cfg in (adm.list_mutating_webhook_configuration().items
                                              + adm.list_validating_webhook_configuration().items)
        if cfg.metadata.name.startswith("volcano-elastic") for w in cfg.webhooks or []), 120, interval=1)
    eps = core.read_namespaced_endpoints("volcano-elastic-webhook", NAMESPACE)
    assert sum(len(s.addresses or []) for s in eps.subsets or []) == 2  # the Service has both replicas


def worker_pods(core: Any, ns: str, job: str) -> list[Any]:
    return [p for p in core.list_namespaced_pod(ns, label_selector=f"training.kubeflow.org/job-name={job}").items
            if not p.metadata.deletion_timestamp]


def running(core: Any, ns: str, job: str) -> list[Any]:
    return [p for p in worker_pods(core, ns, job) if p.status.phase == "Running"]


def pytorchjob(name: str, queue: str, workers: int, elastic: tuple[int, int] | None, out_dir: Path,
               command: list[str]) -> dict[str, Any]:
    template = {"spec": {
        "terminationGracePeriodSeconds": 8,
        "containers": [{
            "name": "pytorch", "image": image.IMAGE, "imagePullPolicy": "Never", "command": command,
            "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                    {"name": "WORK_AFTER_TERM", "value": "2"}],
            "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                          "limits": {"nvidia.com/gpu": str(GPUS_PER_WORKER), "memory": "128Mi"}},
            "volumeMounts": [{"name": "out", "mountPath": "/out"}]}],
        "volumes": [{"name": "out", "hostPath": {"path": str(out_dir), "type": "Directory"}}],
    }}
    return pytorchjob_manifest(name, queue, workers, elastic, template)


def create_queues(objs: Any, *names: str) -> None:
    """Volcano queues NAMES (weight 1, reclaimable; one left by an earlier run is fine), once Open."""
    for q in names:
        try:
            objs.create_cluster_custom_object(*VC, "queues", {"apiVersion": "scheduling.volcano.sh/v1beta1",
                                                              "kind": "Queue", "metadata": {"name": q},
                                                              "spec": {"weight": 1, "reclaimable": True}})
        except client.ApiException as exc:
            if exc.status != 409:
                raise
    for q in names:
        wait_until(f"queue {q} Open", lambda q=q: (objs.get_cluster_custom_object(*VC, "queues", q)
                                                   .get("status") or {}).get("state") == "Open", 60)


def delete_queues(objs: Any, *names: str) -> None:
    """Best effort: the queues of a run, after it (a queue with jobs left is refused by Volcano)."""
    for q in names:
        try:
            objs.delete_cluster_custom_object(*VC, "queues", q)
        except client.ApiException:
            pass
