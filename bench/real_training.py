"""A real elastic training job through volcano-elastic, on the box's real nodes, measured.

    python bench/real_training.py --out FILE [--baseline] [--gangs K] [--steps N] [--max-restarts R]
                                  [--notice-seconds S] [--evict-directly] [--box NAME] [--keep-box]
                                  [--in-place [--kill-at STEP]] [--torch2 [--launcher kit|torchrun]]

Brings up what it needs (a box with two real nodes x 4 fake GPUs, our image and the training image
built here, our chart installed in the cluster by Helm with the e2e tier's short time constants),
then runs examples/training/elastic_train.py (torch on CPU, gloo, a tiny model, synthetic data,
checkpoints on a shared host directory) as a PyTorchJob with 2..4 workers of 2 GPUs under the
job kit's launcher. It starts at min and takes its elastic workers in its first rendezvous; K
gangs (2 workers x 2 GPUs, another queue, 15 s of work) arrive one after another, each is given
room by our agent (real evictions: SIGTERM, the grace period), and the job grows back after each;
a gang for which the job may not be shrunk (its restart budget spent) waits until the job ends.
`--notice-seconds S` gives the job's victims an eviction notice (the job checkpoints on it and its
victim waits for the eviction: no step redone); `--evict-directly` evicts a worker without our
agent (with `--max-restarts 0`: what restartPolicy OnFailure does when torchrun has no restart left).
`--baseline` runs the same with the job's torchrun as it is today (no kit: plain torchrun's
rendezvous, VOLCANO_ELASTIC_RDZV=off).
`--in-place` runs the job resized in place (`volcano-elastic.io/resize: in-place` on the PyTorchJob,
the example's `--in-place`: the kit's InPlace, one process per pod, no torchrun), then the same job
on the restart path (the kit's launcher) on the same box: the JSON is the in-place run's, with
`restartPath` (the restart run, less its log) and `compare` (per event kind, both stalls and their
ratio). `--kill-at STEP` (with `--in-place`): no gang; this script SIGKILLs the highest worker's
training process at STEP, from the host (the job must recover through the restart path).
`--torch2` gives the pods torch 2.x from PyPI (hack/install-torch2.sh's directory on this host,
mounted read-only and first on PYTHONPATH) instead of the image's Debian torch 1.13; with
`--launcher torchrun`, the pods run `torchrun --rdzv-backend=volcano-c10d` (the kit's rendezvous
found by its entry point) instead of the kit's launcher.

FILE gets JSON: succeeded, stepsTarget, stepsDone, torch (what the job imported), launcher,
events[] with kind (grow | shrink | restart), fromWorkers, toWorkers, inPlace (true: the group
re-formed with rank 0's process going on; false: the training processes restarted), stallSeconds
(last step at the old size to the first at the new),
stepsRedone (steps done again after resuming from the checkpoint), restartBudgetUsed (the
surviving agents' TORCHELASTIC_RESTART_COUNT after the event), restartSeconds (rank 0's new process
start to its first step: spawn, `import torch`, init, checkpoint load) and waitSeconds (the rest:
detection and rendezvous); restartsCounted (the restarts our agent counted against the job's
restart budget: its PodGroup's volcano-elastic.io/restarts-used at the end; none for an event done
in place); gangRuns[] (each gang's wait, whether
it ran only after the job ended, and its PodGroup's last-decision while it waited); held[] (a
victim's rank waiting for its eviction after the notice's checkpoint, instead of training on);
plus the progress log itself.
tests/real/test_training.py (a notice, maxRestarts 2 and three gangs) and
tests/real/test_training_inplace.py (in place beside the restart path, one gang, on torch 1.13
and 2.x; a SIGKILL in place; torch 2.x through torchrun) run it and check the targets. Each worker's log is kept in
the run's shared directory, `pods/`.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from kubernetes import client, config  # noqa: E402

from elastic_controller.policy.budget import BUDGET_SPENT  # noqa: E402
from elastic_controller.policy.contract import sentence_of  # noqa: E402
from elastic_controller.policy.keys import LAST_DECISION, RESIZE, RESIZE_IN_PLACE, RESTARTS_USED  # noqa: E402
from hack import training_log  # noqa: E402
from hack.localbox import Box, BoxOptions, dockerfile, image, realnode  # noqa: E402
from tests.harness import realstack  # noqa: E402
from tests.harness.helmbox import helm  # noqa: E402
from tests.harness.realstack import (  # noqa: E402
    GATE,
    KF,
    NAMESPACE,
    RELEASE,
    VC,
    create_queues,
    delete_queues,
    running,
    worker_pods,
)
from tests.harness.waiting import wait_until  # noqa: E402

GPUS_PER_WORKER = 2
SCRIPT = ROOT / "examples" / "training" / "elastic_train.py"


def say(msg: str) -> None:
    print(f"[real-training {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------- the box and our stack
def bring_up(name: str | None) -> tuple[Box, bool]:
    """A running box NAME, or a new one with two real nodes; (box, started_here)."""
    if name:
        b = Box(name=name)
        if not b.load():
            raise SystemExit(f"no box named {name!r}")
        return b, False
    problems = realnode.host_problems()
    if problems:
        raise SystemExit("this host cannot run real nodes: " + "; ".join(problems))
    images = [str(dockerfile.dockerfile_image(say)), str(image.train_image(say))]
    b = Box(BoxOptions(name=f"real-training-{os.getpid()}", nodes=0, real_nodes=2, real_node_images=images,
                       timeout=180))
    b.up()
    return b, True


NOTICE_QUEUE = "train-notice"  # the queue whose victims get a notice (noticeSeconds from notice_queue())
NOTICE_SECONDS = 30
STEP_SECONDS = 0.25  # the training script's simulated compute per step (was 0.1: a fast run ended before it grew)


def notice_queue(seconds: int = NOTICE_SECONDS) -> list[str]:
    """The chart's `--set-json` for queue NOTICE_QUEUE, whose victims get a notice of SECONDS:
    realstack.install(box, notice_queue()) is our chart as this script installs it."""
    return [f'config.queues.{NOTICE_QUEUE}={{"noticeSeconds": {seconds}}}']


# ---------------------------------------------------------------------------- the job
IN_PLACE_MOMENTUM = 0.9  # in place: SGD with momentum, so a newcomer must get the optimizer state


TORCH_MOUNT = "/opt/torch"  # where a host's torch directory (hack/install-torch2.sh) is mounted in the pods
KIT_META_MOUNT = "/opt/volcano-elastic-kit-meta"  # the kit's dist-info (its torchrun.handlers entry point)
LAUNCHERS = ("kit", "torchrun")


def training_job(name: str, queue: str, steps: int, max_restarts: int, shared: Path, baseline: bool,
                 step_seconds: float, in_place: bool = False, torch_dir: Path | None = None,
                 launcher: str = "kit") -> dict[str, Any]:
    """The PyTorchJob: the kit's launcher (torchrun with the kit's rendezvous), plain torchrun
    (`baseline`), or, `in_place`, one process per pod with the kit's InPlace and the job's
    `volcano-elastic.io/resize: in-place` (no torchrun: the store is PET_RDZV_ENDPOINT's, worker 0).
    `torch_dir`: a host directory with another torch (hack/install-torch2.sh: torch 2.x from PyPI),
    mounted read-only and put first on PYTHONPATH over the image's Debian torch 1.13. `launcher`
    "torchrun": `torchrun --rdzv-backend=volcano-c10d` (torch >= 2.4 finds the kit's rendezvous by
    its entry point: the kit's dist-info comes from the ConfigMap `kit_meta_config_map` makes)."""
    if baseline and in_place:
        raise ValueError("--baseline and --in-place are two different jobs: pick one")
    if launcher not in LAUNCHERS:
        raise ValueError(f"launcher {launcher!r}: one of {', '.join(LAUNCHERS)}")
    if launcher == "torchrun" and (baseline or in_place or torch_dir is None):
        raise ValueError("the torchrun launcher is the kit's rendezvous through torch 2.x's entry points: "
                         "not with --baseline or --in-place, and only with a torch 2.x directory")
    env = [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    script = ["/scripts/elastic_train.py", "--steps", str(steps), "--dir", f"/shared/{name}",
              "--step-seconds", str(step_seconds)]
    command = ["python3", "-m", "volcano_elastic_job.run", *script]
    if in_place:
        command = ["python3", *script, "--in-place", "--momentum", str(IN_PLACE_MOMENTUM)]
    if launcher == "torchrun":
        command = ["python3", "-m", "torch.distributed.run", "--rdzv-backend=volcano-c10d", *script]
    if baseline:  # torchrun itself; Debian's torch 1.13 torchrun fails at --redirects/--tee 0 on Python 3.11
        env += [{"name": "VOLCANO_ELASTIC_RDZV", "value": "off"}, {"name": "PET_REDIRECTS", "value": "1"},
                {"name": "PET_TEE", "value": "1"}]
    mounts: list[dict[str, Any]] = [{"name": "scripts", "mountPath": "/scripts"},
                                    {"name": "shared", "mountPath": "/shared"},
                                    {"name": "podinfo", "mountPath": "/etc/podinfo", "readOnly": True}]
    volumes: list[dict[str, Any]] = [
        {"name": "scripts", "configMap": {"name": f"{name}-script"}},
        {"name": "shared", "hostPath": {"path": str(shared), "type": "Directory"}},
        {"name": "podinfo", "downwardAPI": {"items": [
            {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}]}}]
    memory = "2Gi"
    if torch_dir is not None:
        paths = [TORCH_MOUNT]
        mounts.append({"name": "torch", "mountPath": TORCH_MOUNT, "readOnly": True})
        volumes.append({"name": "torch", "hostPath": {"path": str(torch_dir), "type": "Directory"}})
        if launcher == "torchrun":
            paths.append(KIT_META_MOUNT)
            mounts.append({"name": "kit-meta", "mountPath": KIT_META_MOUNT, "readOnly": True})
            volumes.append({"name": "kit-meta", "configMap": {"name": f"{name}-kit-meta", "items": [
                {"key": key, "path": f"{KIT_DIST_INFO}/{key}"} for key in ("METADATA", "entry_points.txt")]}})
        env.append({"name": "PYTHONPATH", "value": ":".join(paths)})
        memory = "3Gi"  # torch 2.x maps its CUDA libraries even on a CPU
    template = {"spec": {
        "serviceAccountName": name,
        "terminationGracePeriodSeconds": 15,
        "containers": [{
            "name": "pytorch", "image": image.TRAIN_IMAGE, "imagePullPolicy": "Never",
            "command": command,
            "env": env,
            "resources": {"requests": {"cpu": "100m", "memory": "256Mi"},
                          "limits": {"nvidia.com/gpu": str(GPUS_PER_WORKER), "memory": memory}},
            "volumeMounts": mounts}],
        "volumes": volumes,
    }}
    metadata: dict[str, Any] = {"name": name}
    if in_place:
        metadata["annotations"] = {RESIZE: RESIZE_IN_PLACE}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata, "spec": {
        "elasticPolicy": {"minReplicas": 2, "maxReplicas": 4, "rdzvBackend": "c10d", "maxRestarts": max_restarts},
        "nprocPerNode": "1",
        "runPolicy": {"schedulingPolicy": {"queue": queue}, "cleanPodPolicy": "None"},
        "pytorchReplicaSpecs": {"Worker": {"replicas": 4, "restartPolicy": "OnFailure", "template": template}},
    }}


KIT_DIST_INFO = "volcano_elastic_job-0.dist-info"


def kit_meta_config_map(name: str) -> dict[str, Any]:
    """The kit's dist-info as a ConfigMap (METADATA, entry_points.txt from jobkit/pyproject.toml):
    on PYTHONPATH, torch's registry finds `volcano-c10d` through the `torchrun.handlers` entry point,
    as it would for the kit installed by pip (the training image copies the package only)."""
    project = tomllib.loads((ROOT / "jobkit" / "pyproject.toml").read_text())["project"]
    groups = project.get("entry-points", {})
    entry_points = "".join(f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in items.items()) + "\n"
                           for group, items in groups.items())
    metadata = f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: 0\n"
    return {"metadata": {"name": f"{name}-kit-meta"}, "data": {"METADATA": metadata, "entry_points.txt": entry_points}}


def gang_job(name: str, queue: str) -> dict[str, Any]:
    template = {"spec": {"containers": [{
        "name": "pytorch", "image": image.IMAGE, "imagePullPolicy": "Never",
        "command": ["python3", "-c", "import time; time.sleep(15)"],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"},
                      "limits": {"nvidia.com/gpu": str(GPUS_PER_WORKER), "memory": "128Mi"}}}]}}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name}, "spec": {
        "runPolicy": {"schedulingPolicy": {"queue": queue}},
        "pytorchReplicaSpecs": {"Worker": {"replicas": 2, "restartPolicy": "OnFailure", "template": template}}}}


def job_state(objs: Any, ns: str, name: str) -> str:
    conds = (objs.get_namespaced_custom_object(*KF, ns, "pytorchjobs", name).get("status") or {}).get("conditions")
    return next((c["type"] for c in reversed(conds or []) if c.get("status") == "True"), "")


# ---------------------------------------------------------------------------- the log
def progress(shared: Path, job: str) -> list[dict[str, Any]]:
    f = shared / job / "progress.jsonl"
    if not f.exists():
        return []
    out = []
    for line in f.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # a line being written
    return out


def current_world(log: list[dict[str, Any]]) -> int:
    steps = [r for r in log if "step" in r and "event" not in r]
    return int(steps[-1]["world"]) if steps else 0


def scale_events(log: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every scale event of the log, in order, each with `inPlace`.

    A restart of the training processes after the first start (torchrun restarts every worker at each
    membership change; an in-place job restarts on an unplanned loss) is an event as
    `hack/training_log.parse` measures it: the world size before and after, the stall (the last
    training step before it to the first step after it: None when another restart came first), the
    steps done again after resuming from the checkpoint, the restart count torchelastic reports after
    it, and the stall split into restart (the new processes' start to their first step) and wait. A
    shrink and a regrow with no step between (plain torchrun still in its rendezvous when the evicted
    workers come back) are two events, the first with no step at its size. `inPlace: false`.

    A change of the world size between two consecutive steps with no start between them is an event
    done in place (the kit's InPlace re-formed the group: rank 0's process went on): its stall is the
    time between those two steps, its redone steps those the first step at the new size repeats.
    `inPlace: true`, no restart part. No event before the log's first training step."""
    try:
        run = training_log.parse(log, {})
    except training_log.LogError:
        return []
    events: list[tuple[float, dict[str, Any]]] = []
    for e in run.events:
        out: dict[str, Any] = {"kind": e.kind, "fromWorkers": e.from_workers, "toWorkers": e.to_workers,
                               "inPlace": False, "stallSeconds": e.stall_seconds, "stepsRedone": e.steps_redone,
                               "restartBudgetUsed": e.restart_budget_used}
        if e.stall_seconds is not None and e.restart_seconds is not None:
            out["restartSeconds"] = e.restart_seconds
            out["waitSeconds"] = round(e.stall_seconds - e.restart_seconds, 2)
        events.append((e.t_start, out))
    events += [(run.steps[i].t, out) for i, out in in_place_events(log, run.t0_epoch)]
    events.sort(key=lambda pair: pair[0])
    return [out for _, out in events]


def in_place_events(log: list[dict[str, Any]], t0: float) -> list[tuple[int, dict[str, Any]]]:
    """(index of the last step before it among the log's steps, event) for each world change
    between two consecutive steps with no `start` record between them (see `scale_events`)."""
    out: list[tuple[int, dict[str, Any]]] = []
    prev: dict[str, Any] | None = None
    index = -1
    for r in log:
        if not isinstance(r, dict) or not isinstance(r.get("t"), int | float):
            continue
        if r.get("event") == "start":
            prev = None  # a restart: training_log's event, not an in-place one
        elif "step" in r and "event" not in r and "world" in r:
            index += 1
            if prev is not None and int(r["world"]) != int(prev["world"]):
                old, new = int(prev["world"]), int(r["world"])
                out.append((index - 1, {
                    "kind": "grow" if new > old else "shrink", "fromWorkers": old, "toWorkers": new,
                    "inPlace": True, "stallSeconds": round(float(r["t"]) - float(prev["t"]), 2),
                    "stepsRedone": max(0, int(prev["step"]) - (int(r["step"]) - 1)),
                    "restartBudgetUsed": int(r.get("restart", 0)), "generation": r.get("generation"),
                    "atSeconds": round(float(prev["t"]) - t0, 2)}))
            prev = r
    return out


def compare_paths(in_place: list[dict[str, Any]], restart: list[dict[str, Any]]) -> dict[str, Any]:
    """For the first shrink and the first grow: the in-place job's stall beside the restart path's
    for the same event (same from/to sizes), and their ratio. An event missing on either side, or
    not done in place on the in-place job, is reported as such (`ratio` None)."""
    out: dict[str, Any] = {}
    for kind in ("shrink", "grow"):
        a = next((e for e in in_place if e["kind"] == kind), None)
        b = next((e for e in restart if e["kind"] == kind and e["stallSeconds"] is not None), None)
        entry: dict[str, Any] = {"inPlace": a["inPlace"] if a else None,
                                 "inPlaceStallSeconds": a["stallSeconds"] if a else None,
                                 "restartStallSeconds": b["stallSeconds"] if b else None,
                                 "restartSeconds": b.get("restartSeconds") if b else None, "ratio": None}
        if a and b and a["stallSeconds"] is not None and b["stallSeconds"]:
            entry["ratio"] = round(a["stallSeconds"] / b["stallSeconds"], 4)
        out[kind] = entry
    return out


# ---------------------------------------------------------------------------- the story
def pod_group_annotations(objs: Any, ns: str, job: str) -> dict[str, str]:
    """The job's PodGroup's annotations ({} when it has none or cannot be read)."""
    try:
        pgs = objs.list_namespaced_custom_object(*VC, ns, "podgroups").get("items", [])
    except client.ApiException:
        return {}
    for pg in pgs:
        owners = pg["metadata"].get("ownerReferences") or []
        if any(o.get("name") == job for o in owners) or pg["metadata"]["name"] == job:
            return dict(pg["metadata"].get("annotations") or {})
    return {}


def pod_decision(objs: Any, ns: str, job: str) -> str:
    """The job's PodGroup's last-decision as a person reads it (`contract.sentence_of`), or ""."""
    return sentence_of(pod_group_annotations(objs, ns, job).get(LAST_DECISION, ""))


def restarts_counted(objs: Any, ns: str, job: str) -> int:
    """The restarts our agent counted against the job's budget: its PodGroup's restarts-used, else
    the PyTorchJob's copy (the PodGroup may be gone once the job ended); 0 when absent, -1 unreadable."""
    raw = pod_group_annotations(objs, ns, job).get(RESTARTS_USED)
    if raw is None:
        meta = objs.get_namespaced_custom_object(*KF, ns, "pytorchjobs", job)["metadata"]
        raw = (meta.get("annotations") or {}).get(RESTARTS_USED, "0")
    return int(raw) if raw.strip().isdigit() else -1


def evict(core: Any, ns: str, pod: str) -> None:
    core.create_namespaced_pod_eviction(pod, ns, {"apiVersion": "policy/v1", "kind": "Eviction",
                                                  "metadata": {"name": pod, "namespace": ns}})


def save_logs(core: Any, ns: str, job: str, out: Path) -> None:
    """Each worker's log (and its previous container's, after a restart) under OUT, best effort."""
    out.mkdir(parents=True, exist_ok=True)
    for p in worker_pods(core, ns, job):
        for previous in (False, True):
            try:
                text = core.read_namespaced_pod_log(p.metadata.name, ns, previous=previous, timestamps=True)
            except client.ApiException:
                continue
            (out / f"{p.metadata.name}{'.previous' if previous else ''}.log").write_text(text)


def training_pids(pod_uid: str) -> list[int]:
    """The host's pids of the training script's processes in the pod with this uid (the real nodes
    run their containers on this host: the kubelet's cgroupfs paths carry `pod<uid>`)."""
    marks = (f"pod{pod_uid}", f"pod{pod_uid.replace('-', '_')}")
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cgroups = (proc / "cgroup").read_text()
            cmdline = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(m in cgroups for m in marks) and any(a.endswith(b"elastic_train.py") for a in cmdline):
            found.append(int(proc.name))
    return found


def kill_training(core: Any, ns: str, job: str, shared: Path) -> dict[str, Any]:
    """SIGKILL the training process of the job's highest running worker, from the host (nobody
    planned it: no notice, no eviction; the container restarts by its restartPolicy)."""
    pods = sorted(running(core, ns, job), key=lambda p: p.metadata.name)
    victim = pods[-1]
    pids = training_pids(victim.metadata.uid)
    if not pids:
        raise RuntimeError(f"no training process of {victim.metadata.name} found on this host")
    at = _last_step(progress(shared, job))
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    return {"pod": victim.metadata.name, "pids": pids, "t": time.time(), "atStep": at}


def _last_step(log: list[dict[str, Any]]) -> int:
    return max((int(r["step"]) for r in log if "step" in r and "event" not in r), default=0)


def container_restarts(core: Any, ns: str, job: str) -> dict[str, int]:
    return {p.metadata.name: sum(c.restart_count for c in p.status.container_statuses or [])
            for p in worker_pods(core, ns, job)}


def run(b: Box, *, steps: int, gangs: int, max_restarts: int, notice_seconds: int, baseline: bool,
        shared_root: Path, evict_directly: bool = False, step_seconds: float = STEP_SECONDS,
        in_place: bool = False, kill_at: int = 0, torch_dir: Path | None = None,
        launcher: str = "kit") -> dict[str, Any]:
    """The scenario: the job starts at min and takes its elastic workers, then `gangs` gangs come one
    after another (each waits until it runs, or until the job ends when the job may not be shrunk:
    its restart budget spent); the job grows back after each gang it gave way to. `notice_seconds`:
    the job runs in NOTICE_QUEUE, whose victims get an eviction notice (the install's notice_queue() set
    this many seconds; 0: another queue, no notice). `evict_directly`: no gang; the
    job's highest worker is evicted through the Eviction API by this script (not our agent), the
    way a node drain or another scheduler would: with `max_restarts` 0 the survivors' torchrun has no
    restart left, and the container's restartPolicy decides. `step_seconds`: the simulated compute of a
    step: the run's length is then mostly that sleep, not this machine's speed,
    and must outlast two cooldowns and a gang for the job to grow back (CI once ended it first).
    `in_place`: the job resizes in place (`training_job`). `kill_at`: once the job trains at 4
    and has done this many steps, this script SIGKILLs the training process of its highest worker
    (nobody planned it: the job must recover through the restart path), before any gang.
    `torch_dir`, `launcher`: see `training_job` (the result's `torch` is what the job imported)."""
    api = config.new_client_from_config(config_file=str(b.kubeconfig))
    core, objs = client.CoreV1Api(api), client.CustomObjectsApi(api)
    tag = uuid.uuid4().hex[:5]
    ns, qa, qb = f"train-{tag}", NOTICE_QUEUE if notice_seconds else f"train-a-{tag}", f"train-b-{tag}"
    shared = shared_root / tag
    shared.mkdir(parents=True)
    shared.chmod(0o777)
    core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    create_queues(objs, qa, qb)  # NOTICE_QUEUE may be left by an earlier run
    job = "train"
    core.create_namespaced_service_account(ns, {"metadata": {"name": job}})
    core.create_namespaced_config_map(ns, {"metadata": {"name": f"{job}-script"},
                                           "data": {"elastic_train.py": SCRIPT.read_text()}})
    if launcher == "torchrun":
        core.create_namespaced_config_map(ns, kit_meta_config_map(job))
    try:
        t0 = time.monotonic()
        objs.create_namespaced_custom_object(*KF, ns, "pytorchjobs",
                                             training_job(job, qa, steps, max_restarts, shared, baseline, step_seconds,
                                                          in_place, torch_dir, launcher))
        mode = "plain torchrun (baseline)" if baseline else "the kit, in place" if in_place else \
            "torchrun --rdzv-backend=volcano-c10d" if launcher == "torchrun" else "the kit's launcher"
        say(f"job {ns}/{job}: {steps} steps, 2..4 workers, maxRestarts {max_restarts}, queue {qa}, {mode}")
        wait_until("the job trains at 4 workers", lambda: current_world(progress(shared, job)) == 4, 300, interval=1)
        say(f"4 workers training after {time.monotonic() - t0:.0f}s")

        def finished() -> str:
            state = job_state(objs, ns, job)
            return state if state in ("Succeeded", "Failed") else ""

        gang_log: list[dict[str, Any]] = []
        direct: dict[str, Any] = {}
        killed: dict[str, Any] = {}
        if kill_at:
            wait_until(f"step {kill_at}", lambda: _last_step(progress(shared, job)) >= kill_at, steps * 2, interval=1)
            killed = kill_training(core, ns, job, shared)
            say(f"SIGKILLed the training process of {killed['pod']} at step {killed['atStep']}")
            wait_until("the job trains at 4 workers again", lambda: bool(finished()) or (
                bool(scale_events(progress(shared, job))) and current_world(progress(shared, job)) == 4
                and scale_events(progress(shared, job))[-1]["stallSeconds"] is not None), 600, interval=1)
        if evict_directly:
            victim = sorted(p.metadata.name for p in running(core, ns, job))[-1]
            before = container_restarts(core, ns, job)
            evict(core, ns, victim)
            say(f"evicted {victim} through the Eviction API (not our agent)")

            def trains_again() -> bool:  # the restart's first step is in the log (one read per poll)
                events = scale_events(progress(shared, job))
                return bool(events) and events[-1]["stallSeconds"] is not None

            wait_until("the job trains again", lambda: bool(finished()) or trains_again(), 900, interval=1)
            direct = {"evicted": victim, "containerRestartsBefore": before}
        waiting: dict[str, dict[str, Any]] = {}  # gang -> its entry, while it waits

        def submit(g: str) -> None:
            objs.create_namespaced_custom_object(*KF, ns, "pytorchjobs", gang_job(g, qb))
            waiting[g] = {"gang": g, "t": time.monotonic(), "decisionWhileWaiting": "", "decisionsWhileWaiting": []}

        def poll_gangs() -> bool:
            """Record each waiting gang's decision; move those that run to gang_log. True once none waits."""
            for g, entry in list(waiting.items()):
                if len(running(core, ns, g)) >= 2 or job_state(objs, ns, g) == "Succeeded":
                    job_ended = bool(finished())
                    gang_log.append({"gang": g, "waitSeconds": round(time.monotonic() - entry.pop("t"), 1),
                                     "afterTheJobEnded": job_ended, **entry})
                    now_at = "the job had ended" if job_ended else \
                        f"the job trains at {current_world(progress(shared, job))}"
                    say(f"{g} runs after {gang_log[-1]['waitSeconds']}s; {now_at}")
                    del waiting[g]
                else:  # every distinct decision, in order: the last one may be about the job's end
                    decision = pod_decision(objs, ns, g)
                    if decision and decision not in entry["decisionsWhileWaiting"]:
                        entry["decisionsWhileWaiting"].append(decision)
                    entry["decisionWhileWaiting"] = decision or entry["decisionWhileWaiting"]
            return not waiting

        def budget_spent(g: str) -> bool:
            return g in waiting and any(BUDGET_SPENT in d for d in waiting[g]["decisionsWhileWaiting"])

        counted = 0  # the most restarts our agent counted on the job (its PodGroup may go when the job ends)
        for k in range(gangs):
            g = f"gang-{k}"
            submit(g)
            wait_until(f"{g} runs (or waits for the job's restart budget)", lambda g=g: poll_gangs() or budget_spent(g),
                       steps * 2 + 300, interval=1)
            if g in waiting:  # the job may not be shrunk again: every gang left comes now, and waits for the job
                say(f"{g} waits: {waiting[g]['decisionWhileWaiting']}")
                for rest in range(k + 1, gangs):
                    submit(f"gang-{rest}")
                wait_until("every gang runs", poll_gangs, steps * 2 + 300, interval=1)
                break
            wait_until(f"{g} succeeded", lambda g=g: job_state(objs, ns, g) == "Succeeded", 120, interval=1)
            counted = max(counted, restarts_counted(objs, ns, job))
            if finished():
                continue
            wait_until("the job back at 4 workers", lambda: current_world(progress(shared, job)) == 4
                       or bool(finished()), 300, interval=1)
            say(f"back at {current_world(progress(shared, job))} workers")
        state = wait_until("the job finished", finished, steps * 2 + 300, interval=2)
        counted = max(counted, restarts_counted(objs, ns, job))
        if direct:
            direct["containerRestartsAfter"] = container_restarts(core, ns, job)
        log = progress(shared, job)
        done = max((int(r["step"]) for r in log if "step" in r and "event" not in r), default=0)
        gated_left = [p.metadata.name for p in worker_pods(core, ns, job)
                      if GATE in [g.name for g in p.spec.scheduling_gates or []]]
        result = {
            "succeeded": state == "Succeeded", "state": state, "stepsTarget": steps, "stepsDone": done,
            "baseline": baseline, "inPlace": in_place, "gangs": gangs, "maxRestarts": max_restarts,
            "stepSeconds": step_seconds,
            "noticeSeconds": notice_seconds, "queue": qa,
            "torch": torch_of(log, torch_dir), "launcher": "in place" if in_place else launcher,
            "seconds": round(time.monotonic() - t0, 1),
            "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
            "machine": f"{os.cpu_count()} CPUs, {_mem_gib()} GiB, two real nodes x 4 fake GPUs on one host",
            "events": scale_events(log), "restartsCounted": counted,
            "gangRuns": gang_log, "gatedLeft": gated_left,
            "held": [r for r in log if r.get("event") == "hold"], **({"evictedDirectly": direct} if direct else {}),
            **({"killed": killed, "containerRestarts": container_restarts(core, ns, job)} if killed else {}),
            "log": log,
        }
    finally:  # a failed run must not keep the GPUs; the workers' logs stay for a look afterwards
        save_logs(core, ns, job, shared / "pods")
        delete_queues(objs, qa, qb)
        core.delete_namespace(ns)
        api.close()
    return result


def torch2_dir() -> Path:
    """hack/install-torch2.sh's directory (torch 2.x from PyPI), installed: else SystemExit, saying how."""
    script = ROOT / "hack" / "install-torch2.sh"
    where = subprocess.run(["bash", str(script), "--print-dir"], capture_output=True, text=True, check=True)
    path = Path(where.stdout.strip())
    if not (path / ".complete").exists():
        raise SystemExit(f"no torch 2.x in {path}: run bash hack/install-torch2.sh (make node-packages does)")
    return path


def run_in_place(b: Box, **kw: Any) -> dict[str, Any]:
    """The in-place job (`run(..., in_place=True)`), then the restart path: the same job without
    in-place resizing (the kit's launcher and rendezvous), on the same box in the same invocation.
    The in-place result, with `restartPath` (the restart run's result less its log) and `compare`
    (`compare_paths`: each event's stall on both paths and the ratio)."""
    result = run(b, in_place=True, **kw)
    restart = run(b, in_place=False, **kw)
    result["restartPath"] = {k: v for k, v in restart.items() if k != "log"}
    result["compare"] = compare_paths(result["events"], restart["events"])
    return result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0], epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="JSON result file")
    ap.add_argument("--baseline", action="store_true", help="plain torchrun (no kit rendezvous)")
    ap.add_argument("--gangs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=500, help="training steps")
    ap.add_argument("--step-seconds", type=float, default=STEP_SECONDS,
                    help="simulated compute per step (a step takes this plus about 0.03-0.14 s here); the run "
                         "must outlast two cooldowns and a gang to grow back")
    ap.add_argument("--max-restarts", type=int, default=10)
    ap.add_argument("--notice-seconds", type=int, default=0,
                    help=f"run the job in queue {NOTICE_QUEUE}, whose victims get this notice (0: no notice; "
                         "with --box, the installed release's notice applies)")
    ap.add_argument("--evict-directly", action="store_true",
                    help="no gangs: evict the job's highest worker through the Eviction API ourselves "
                         "(with --max-restarts 0: what restartPolicy OnFailure does when torchrun has no restart left)")
    ap.add_argument("--in-place", action="store_true",
                    help="the job resizes in place (volcano-elastic.io/resize: in-place, the kit's InPlace), then "
                         "the same job on the restart path (the kit's launcher) for comparison: JSON `compare`")
    ap.add_argument("--kill-at", type=int, default=0, metavar="STEP",
                    help="with --in-place: no gang and no restart path; SIGKILL the highest worker's training "
                         "process at this step (the job must recover through the restart path)")
    ap.add_argument("--torch2", action="store_true",
                    help="torch 2.x from PyPI for the training pods (hack/install-torch2.sh's directory, mounted "
                         "from this host) instead of the image's Debian torch 1.13")
    ap.add_argument("--launcher", choices=LAUNCHERS, default="kit",
                    help="kit: python -m volcano_elastic_job.run; torchrun (needs --torch2): torchrun "
                         "--rdzv-backend=volcano-c10d, the kit's rendezvous found by its entry point")
    ap.add_argument("--box", help="use this running box (with real nodes and our chart installed)")
    ap.add_argument("--keep-box", action="store_true")
    a = ap.parse_args(argv)
    if a.in_place and (a.baseline or a.evict_directly):
        ap.error("--in-place runs the kit's in-place job and its restart path: not with --baseline or --evict-directly")
    if a.kill_at and not a.in_place:
        ap.error("--kill-at needs --in-place")
    if a.kill_at and not 0 < a.kill_at < a.steps:
        ap.error(f"--kill-at must be a step between 1 and --steps ({a.steps})")
    if a.launcher == "torchrun" and (not a.torch2 or a.in_place or a.baseline):
        ap.error("--launcher torchrun needs --torch2 (entry points: torch >= 2.4), not --in-place or --baseline")
    torch_dir = torch2_dir() if a.torch2 else None
    b, started = bring_up(a.box)
    try:
        if started or helm(b, "status", RELEASE, "-n", NAMESPACE).returncode != 0:
            realstack.install(b, notice_queue(a.notice_seconds or NOTICE_SECONDS))
        kw: dict[str, Any] = {"steps": a.steps, "gangs": 0 if a.evict_directly or a.kill_at else a.gangs,
                              "max_restarts": a.max_restarts, "notice_seconds": a.notice_seconds,
                              "baseline": a.baseline, "shared_root": b.dir / "shared",
                              "evict_directly": a.evict_directly, "step_seconds": a.step_seconds,
                              "torch_dir": torch_dir}
        if a.launcher != "kit":
            kw["launcher"] = a.launcher
        if a.kill_at:
            result = run(b, in_place=True, kill_at=a.kill_at, **kw)
        elif a.in_place:
            result = run_in_place(b, **kw)
        else:
            result = run(b, **kw)
    finally:
        if started and not a.keep_box:
            b.down(quiet=True)
    Path(a.out).write_text(json.dumps(result, indent=2))
    summary = {k: v for k, v in result.items() if k != "log"}
    print(json.dumps(summary, indent=2))
    ok = result["succeeded"] and result["stepsDone"] == result["stepsTarget"]
    if "restartPath" in result:
        ok = ok and result["restartPath"]["succeeded"] and result["restartPath"]["stepsDone"] == a.steps
    return 0 if ok else 1


def torch_of(log: list[dict[str, Any]], torch_dir: Path | None) -> str:
    """The torch the job ran: the version its start records name, and where it came from."""
    versions = sorted({str(r["torch"]) for r in log if r.get("event") == "start" and r.get("torch")})
    where = f"PyPI, mounted from {torch_dir}" if torch_dir else "Debian bookworm python3-torch"
    return f"{', '.join(versions) or 'unknown'} ({where}; CPU)"


def _mem_gib() -> int:
    try:
        kib = int(next(line for line in Path("/proc/meminfo").read_text().splitlines()
                       if line.startswith("MemTotal:")).split()[1])
    except (OSError, StopIteration, ValueError):
        return 0
    return round(kib / 2**20)


if __name__ == "__main__":
    raise SystemExit(main())
