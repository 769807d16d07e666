"""Side by side on the whole box: our agent versus Volcano's own eviction, scenario by scenario.

    .venv/bin/python bench/agent_vs_native.py --modes ours,gang-native,native \\
        --scenarios a,b,c,d,e,f [--runs 2] --out bench-out/agent_vs_native.json

Modes (one fresh box, hack/localbox with 4 kwok nodes x 8 GPUs, per mode, scenario and run):

  ours         Volcano with hack/volcano-scheduler-ours.conf (no evicting action) + our webhook,
               controller and agent (scale-up gating on): the agent is the one evictor.
  gang-native  Volcano >= 1.15 with hack/volcano-scheduler-gang-native.conf (gangpreempt,
               gangreclaim, cdp) + our webhook and controller, no agent, gating off.
  native       Volcano with hack/volcano-scheduler-native.conf (legacy preempt, reclaim) + our
               webhook and controller, no agent, gating off.

Our agent runs the **shipped defaults** (elastic_controller/policy/settings.py, docs/configuration.md)
with only the time constants shortened for the box, each by 10 (``BOX_TIME``): cooldownSeconds 300
-> 30, minRuntimeSeconds 120 -> 12, starvationSeconds 30 -> 3, firstRendezvousSeconds 30 -> 3,
scaleUpAfterCheckpointSeconds 600 -> 60, and agent.intervalSeconds 5 -> 1. Everything else is the
default: minScaleUpGain 1 (grow only to at least double), scaleUpSnoozeSeconds = cooldownSeconds,
preemptDuringCooldown false, maxEvictionsPerCycle 16, maxScaleUpPerCycle 4, noticeSeconds 0.
(Until 2026-11-25 this bench used the e2e tests' config, minScaleUpGain 0.3, which regrows A
6 -> 8 between B and C in (d): not what an admin gets.) ``--agent-config FILE`` runs ours with
another ElasticConfig document instead (its ``gating`` is forced on), e.g. to measure a tuning.

In the two native modes our webhook still marks pods (priorities master > core > elastic,
``volcano.sh/preemptable`` true only on elastic workers) and our controller still writes the
PodGroups (minMember = the job's min): Volcano sees which pods are core, the best case for it.

Scenarios (job A: PyTorchJob, elastic 2..8 workers x 4 GPUs, queue dept-a, fills the 32 GPUs):

  a  B (2 workers x 4 GPUs, queue dept-b) arrives
  b  B needs one worker of 4 GPUs
  c  B in A's queue at equal priority
  d  churn: as (a); once B runs it finishes, C (as B) arrives 30 s later; A observed for
     --churn-seconds (300) from B's finish
  e  as (a) with a PodDisruptionBudget (maxUnavailable 0) on one elastic worker of A (the one the
     agent would pick first, the highest index)
  f  as (a), A with a Master replica (Master 1 + Worker elastic 2..7)

Each entry of the JSON list (one per mode, scenario and run):

  mode, scenario, run, volcanoConf, volcanoVersion, agentRunning
  waitingGangRunsAfterSeconds  B's pods all Running, seconds after B's creation (null if never
                               within --gang-timeout)
  evictions                    pods of A that went away (evicted or deleted by Volcano)
  needed                       A's pods that had to go: for each arriving gang,
                               ceil(max(0, its GPUs - free GPUs at its arrival) / 4)
  evictionsBeyondNeed          max(0, evictions - needed)
  masterOrCoreEvictions        evicted pods of A that were its master or inside its min
  restarts                     membership changes of A's running pods (each one makes torchrun
                               restart every worker of A from its checkpoint); changes closer
                               than 5 s together count once
  scaleEvents                  those changes in which the number of A's running pods changed
  pdbViolations                evicted pods a PDB with maxUnavailable 0 covered
  + cGangRunsAfterSeconds (d), aRunningMin, aRunningAtEnd, evicted (names), aLastDecision,
  aBursts ([seconds after B's creation, A's running pods before, after] per restart)
  (d) also, over the churn window (B's finish + --churn-seconds):
  idleGpuSecondsChurn          GPU-seconds no pod held (what a job kept small leaves unused)
  aWorkersMeanChurn            A's mean number of Running pods

At the end a table of medians per (mode, scenario) is printed and written next to --out (.md).
The box drifts: compare modes within one invocation only.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from elastic_controller.config import ConfigError, load_config  # noqa: E402
from elastic_controller.kube.client import KubeClient  # noqa: E402
from elastic_controller.kube.errors import KubeError  # noqa: E402
from elastic_controller.kube.resources import NAMESPACES, PDBS, PODGROUPS, PODS, PYTORCHJOBS, QUEUES  # noqa: E402
from elastic_controller.policy.contract import sentence_of  # noqa: E402
from elastic_controller.policy.settings import ElasticConfig  # noqa: E402
from hack.localbox import Box, BoxOptions  # noqa: E402
from hack.localbox import paths as box_paths  # noqa: E402
from hack.localbox.box import version_tuple  # noqa: E402
from tests.harness.stack import GPUS_PER_WORKER, pytorchjob, start_stack  # noqa: E402

MODES = {  # mode -> (Volcano scheduler conf, agent and gating on)
    "ours": ("ours", True),
    "gang-native": ("gang-native", False),
    "native": ("native", False),
}
SCENARIOS = "abcdef"
TOTAL_GPUS = 4 * 8
COALESCE = 5.0  # seconds: changes of A's running set this close are one restart
JOB_LABEL = "training.kubeflow.org/job-name"
# The shipped defaults' time constants, each divided by 10 for the box (nothing else changed).
BOX_TIME = {"cooldownSeconds": 30, "minRuntimeSeconds": 12, "starvationSeconds": 3,
            "firstRendezvousSeconds": 3, "scaleUpAfterCheckpointSeconds": 60}
AGENT_INTERVAL = 1


def bench_config_text(gating: bool) -> str:
    """The shipped defaults (unset keys) with BOX_TIME's shortened time constants."""
    defaults = ", ".join(f"{k}: {v}" for k, v in BOX_TIME.items())
    return (f"agent: {{intervalSeconds: {AGENT_INTERVAL}}}\n"
            f"gating: {{enabled: {'true' if gating else 'false'}}}\n"
            f"defaults: {{{defaults}}}\n")


def agent_config(path: str | None, gating: bool) -> tuple[str, ElasticConfig]:
    """The config the stack runs, as text and parsed: the file at ``path`` (its ``gating`` forced
    to ``gating``; every problem in it listed now, not in the controller's log) or
    bench_config_text."""
    if path is None:
        text = bench_config_text(gating)
        return text, load_config(text, "bench_config_text")
    doc = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
    if not isinstance(doc, dict):
        raise ConfigError(["(root): must be a mapping"], path)
    doc["gating"] = {**(doc.get("gating") or {}), "enabled": gating}
    text = yaml.safe_dump(doc)
    return text, load_config(text, path)


def is_master_or_core(labels: dict[str, str], min_workers: int) -> bool:
    """The rule of elastic_controller.policy.roles: the Master replica, worker-0 when there is no
    Master (job-role=master), and workers inside the min."""
    rtype = labels.get("training.kubeflow.org/replica-type", "").lower()
    if rtype == "master" or labels.get("training.kubeflow.org/job-role") == "master":
        return True
    try:
        return int(labels.get("training.kubeflow.org/replica-index", "-1")) < min_workers
    except ValueError:
        return True


def live(p: dict[str, Any]) -> bool:
    return not p["metadata"].get("deletionTimestamp")


def running(p: dict[str, Any]) -> bool:
    return live(p) and (p.get("status") or {}).get("phase") == "Running"


@dataclass
class Watch:
    """Samples A's pods every 0.3 s: which went away, when the running set changed, and when
    each waiting gang first had all its pods Running."""

    kc: KubeClient
    ns: str
    min_workers: int
    protected: set[str] = field(default_factory=set)  # pod names under a maxUnavailable-0 PDB
    deleted: list[dict[str, Any]] = field(default_factory=list)  # {name, coreOrMaster, protected, at}
    changes: list[tuple[float, int, int]] = field(default_factory=list)  # (t, before, after) running
    running_min: int = 1 << 30
    gangs: dict[str, tuple[int, float | None]] = field(default_factory=dict)  # name -> (size, runs at)
    samples: list[tuple[float, int, int]] = field(default_factory=list)  # (t, free GPUs, A running)
    _seen: dict[str, dict[str, Any]] = field(default_factory=dict)
    _running: frozenset[str] | None = None
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._sample()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(5)

    def expect_gang(self, name: str, size: int) -> None:
        self.gangs[name] = (size, None)

    def gang_runs_at(self, name: str) -> float | None:
        return self.gangs[name][1]

    def _loop(self) -> None:
        while not self._stop.wait(0.3):
            try:
                self._sample()
            except Exception as exc:  # a hiccup of the API server must not end the observation
                log(f"sample failed: {exc}")

    def _sample(self) -> None:
        pods = self.kc.list(PODS, self.ns)[0]
        now = time.monotonic()
        a = [p for p in pods if (p["metadata"].get("labels") or {}).get(JOB_LABEL) == "a"]
        current = {p["metadata"]["uid"]: p for p in a if live(p)}
        for uid, p in self._seen.items():
            if uid not in current:
                labels = p["metadata"].get("labels") or {}
                self.deleted.append({"name": p["metadata"]["name"], "at": now,
                                     "coreOrMaster": is_master_or_core(labels, self.min_workers),
                                     "protected": p["metadata"]["name"] in self.protected})
        self._seen = current
        run = frozenset(uid for uid, p in current.items() if running(p))
        if self._running is not None and run != self._running:
            self.changes.append((now, len(self._running), len(run)))
        self._running = run
        self.running_min = min(self.running_min, len(run))
        self.samples.append((now, TOTAL_GPUS - used_gpus(pods), len(run)))
        for name, (size, at) in list(self.gangs.items()):
            if at is None:
                n = sum(1 for p in pods if (p["metadata"].get("labels") or {}).get(JOB_LABEL) == name and running(p))
                if n >= size:
                    self.gangs[name] = (size, now)

    def integral(self, t0: float, t1: float) -> tuple[float, float]:
        """(free GPU-seconds, A's running-pod-seconds) over [t0, t1], each sample held until the next."""
        free = pods = 0.0
        pts = self.samples
        for i, (t, f, n) in enumerate(pts):
            start = max(t, t0)
            end = min(pts[i + 1][0] if i + 1 < len(pts) else t1, t1)
            if end > start:
                free += f * (end - start)
                pods += n * (end - start)
        return free, pods

    def bursts(self) -> list[list[tuple[float, int, int]]]:
        out: list[list[tuple[float, int, int]]] = []
        for c in self.changes:
            if out and c[0] - out[-1][-1][0] < COALESCE:
                out[-1].append(c)
            else:
                out.append([c])
        return out


def used_gpus(pods: list[dict[str, Any]]) -> int:
    used = 0
    for p in pods:
        if live(p) and (p.get("spec") or {}).get("nodeName") and \
                (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"):
            for c in p["spec"].get("containers") or []:
                used += int(((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu", 0))
    return used


def free_gpus(kc: KubeClient, ns: str) -> int:
    return TOTAL_GPUS - used_gpus(kc.list(PODS, ns)[0])


def finish(kc: KubeClient, ns: str, job: str) -> None:
    for p in kc.list(PODS, ns, label_selector=f"{JOB_LABEL}={job}")[0]:
        status = {"phase": "Succeeded", "containerStatuses": [{
            "name": "pytorch", "ready": False, "restartCount": 0, "image": "pytorch", "imageID": "",
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}
        kc.patch(PODS, p["metadata"]["name"], {"status": status}, ns, subresource="status")


def create_when_webhooks_answer(kc: KubeClient, job: dict[str, Any], ns: str, timeout: float = 90) -> None:
    """Create the PyTorchJob, retrying while an admission webhook of the fresh box does not answer
    yet (the training operator's validator answers 404 for a few seconds after its Service is up:
    "failed calling webhook ... could not find the requested resource"). Setup, not measured."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            kc.create(PYTORCHJOBS, job, ns)
            return
        except KubeError as exc:
            if exc.status != 500 or "failed calling webhook" not in str(exc) or time.monotonic() > deadline:
                raise
            log(f"creating {job['metadata']['name']}: {exc}; retrying")
            time.sleep(1)


def wait_for(what: str, fn: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if fn():
                return
        except KubeError:
            pass
        time.sleep(0.3)
    raise TimeoutError(f"{what}: not within {timeout:.0f}s")


def log(msg: str) -> None:
    print(f"[agent_vs_native {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def one_run(mode: str, scenario: str, run: int, a: argparse.Namespace) -> dict[str, Any]:
    conf, agent = MODES[mode]
    name = f"bench-{mode}-{scenario}-{run}"
    stale = Box(name=name)
    if stale.load():  # left by an interrupted bench: never reuse its state
        stale.opts.quiet = True
        stale.down(quiet=True)
    box = Box(BoxOptions(name=name, profile="full", volcano_conf=conf, quiet=True))
    box.up()
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-{mode}-{scenario}-"))
    kc = KubeClient.from_kubeconfig(str(box.kubeconfig))
    watch: Watch | None = None
    try:
        ns = "bench"
        kc.create(NAMESPACES, {"metadata": {"name": ns}})
        cfg = tmp / "config.yaml"
        text, conf_parsed = agent_config(a.agent_config if agent else None, gating=agent)
        cfg.write_text(text)
        cooldown = conf_parsed.queue_policy("dept-a").cooldownSeconds
        start_stack(kc, box, box.spawn, str(box.kubeconfig), cfg, box.issue_serving_cert(tmp), ns, agent=agent)
        qa, qb = "dept-a", "dept-b"
        for q in (qa, qb):
            kc.create(QUEUES, {"metadata": {"name": q}, "spec": {"weight": 1, "reclaimable": True}})
        for q in (qa, qb):
            wait_for(f"queue {q} Open", lambda q=q: (kc.get(QUEUES, q).get("status") or {}).get("state") == "Open", 60)

        master = scenario == "f"
        workers, elastic = (7, (2, 7)) if master else (8, (2, 8))
        protected: set[str] = set()
        if scenario == "e":  # the elastic worker the agent would pick first
            victim = f"a-worker-{workers - 1}"
            kc.create(PDBS, {"metadata": {"name": "a-protected"}, "spec": {
                "maxUnavailable": 0, "selector": {"matchLabels": {
                    JOB_LABEL: "a", "training.kubeflow.org/replica-type": "worker",
                    "training.kubeflow.org/replica-index": str(workers - 1)}}}}, ns)
            protected.add(victim)
        create_when_webhooks_answer(kc, pytorchjob("a", qa, workers, elastic, master=master), ns)
        total_a = workers + (1 if master else 0)
        wait_for(f"A runs {total_a} pods", lambda: sum(
            1 for p in kc.list(PODS, ns, label_selector=f"{JOB_LABEL}=a")[0] if running(p)) >= total_a, 300)
        if agent:  # A was just scaled up by lifting gates: let its cooldown pass, as in steady state
            wait_for("A's cooldown over", lambda: cooldown_left(kc, ns, cooldown) <= 0, cooldown + 60)

        watch = Watch(kc, ns, min_workers=elastic[0], protected=protected)
        watch.start()
        b_workers = 1 if scenario == "b" else 2
        needed = math.ceil(max(0, b_workers * GPUS_PER_WORKER - free_gpus(kc, ns)) / GPUS_PER_WORKER)
        watch.expect_gang("b", b_workers)
        t_b = time.monotonic()
        kc.create(PYTORCHJOBS, pytorchjob("b", qa if scenario == "c" else qb, b_workers, None), ns)
        log(f"{mode}/{scenario}#{run}: B ({b_workers} x {GPUS_PER_WORKER} GPUs) created, {needed} of A must go")
        try:
            wait_for("B runs", lambda: watch.gang_runs_at("b") is not None, a.gang_timeout)
        except TimeoutError:
            log(f"{mode}/{scenario}#{run}: B did not run within {a.gang_timeout:.0f}s")
        b_at = watch.gang_runs_at("b")
        extra: dict[str, Any] = {}
        if scenario == "d" and b_at is not None:
            finish(kc, ns, "b")
            t_fin = time.monotonic()
            time.sleep(30)
            free = free_gpus(kc, ns)
            needed += math.ceil(max(0, 2 * GPUS_PER_WORKER - free) / GPUS_PER_WORKER)
            watch.expect_gang("c", 2)
            t_c = time.monotonic()
            kc.create(PYTORCHJOBS, pytorchjob("c", qb, 2, None), ns)
            log(f"{mode}/{scenario}#{run}: B finished, C created 30 s later ({free} GPUs free)")
            time.sleep(max(0.0, t_fin + a.churn_seconds - time.monotonic()))
            c_at = watch.gang_runs_at("c")
            idle, a_pod_seconds = watch.integral(t_fin, t_fin + a.churn_seconds)
            extra["idleGpuSecondsChurn"] = round(idle)
            extra["aWorkersMeanChurn"] = round(a_pod_seconds / a.churn_seconds, 2)
            extra["cGangRunsAfterSeconds"] = None if c_at is None else round(c_at - t_c, 1)
            extra["churnSeconds"] = a.churn_seconds
        else:
            time.sleep(a.window)
        watch.stop()
        deleted = watch.deleted
        bursts = watch.bursts()
        a_now = [p for p in kc.list(PODS, ns, label_selector=f"{JOB_LABEL}=a")[0] if running(p)]
        pg = (kc.get(PODGROUPS, "a", ns)["metadata"].get("annotations") or {}) if agent else {}
        return {
            "mode": mode, "scenario": scenario, "run": run, "volcanoConf": conf,
            "volcanoVersion": box_paths.versions().get("VOLCANO_VERSION"), "agentRunning": agent,
            "agentConfig": text if agent else None,
            "waitingGangRunsAfterSeconds": None if b_at is None else round(b_at - t_b, 1),
            "evictions": len(deleted), "needed": needed,
            "evictionsBeyondNeed": max(0, len(deleted) - needed),
            "masterOrCoreEvictions": sum(1 for d in deleted if d["coreOrMaster"]),
            "restarts": len(bursts),
            "scaleEvents": sum(1 for b in bursts if b[0][1] != b[-1][2]),
            "pdbViolations": sum(1 for d in deleted if d["protected"]),
            **extra,
            "aRunningMin": watch.running_min, "aRunningAtEnd": len(a_now),
            "evicted": sorted(d["name"] for d in deleted),
            "aBursts": [[round(b[0][0] - t_b, 1), b[0][1], b[-1][2]] for b in bursts],
            "aLastDecision": sentence_of(pg.get("volcano-elastic.io/last-decision", "")),
        }
    finally:
        if watch is not None:
            watch.stop()
        kc.close()
        box.down(quiet=True)


def cooldown_left(kc: KubeClient, ns: str, cooldown: float) -> float:
    from elastic_controller.policy.parse import parse_time

    ann = kc.get(PODGROUPS, "a", ns)["metadata"].get("annotations") or {}
    last = parse_time(ann.get("volcano-elastic.io/last-scale-time"))
    if last is None:
        return 0.0
    return cooldown - (time.time() - last.timestamp())


FIELDS = ("waitingGangRunsAfterSeconds", "evictions", "evictionsBeyondNeed", "masterOrCoreEvictions",
          "restarts", "scaleEvents", "pdbViolations")


CHURN_FIELDS = ("cGangRunsAfterSeconds", "idleGpuSecondsChurn", "aWorkersMeanChurn")


def _table(results: list[dict[str, Any]], fields: tuple[str, ...], scenarios: str) -> list[str]:
    head = ["scenario", "mode", "runs", *fields]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    keys = sorted({(r["scenario"], r["mode"]) for r in results if r["scenario"] in scenarios},
                  key=lambda k: (k[0], list(MODES).index(k[1])))
    for sc, mode in keys:
        rs = [r for r in results if r["scenario"] == sc and r["mode"] == mode]
        cells = [sc, mode, str(len(rs))]
        for f in fields:
            got = [float(r[f]) for r in rs if r.get(f) is not None]
            never = len(rs) - len(got)
            if not got:
                cells.append("never")
            else:
                cells.append(f"{statistics.median(got):g}" + (f" ({never} never)" if never else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def medians(results: list[dict[str, Any]]) -> str:
    """Markdown table: the median of each field per (scenario, mode); 'never' for null; then, when
    (d) ran, its churn fields."""
    lines = _table(results, FIELDS, SCENARIOS)
    if any(r["scenario"] == "d" for r in results):
        lines += ["", *_table(results, CHURN_FIELDS, "d")]
    return "\n".join(lines) + "\n"


def csv_list(allowed: list[str] | str) -> Any:
    def parse(text: str) -> list[str]:
        items = [x.strip() for x in text.split(",") if x.strip()]
        bad = [x for x in items if x not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"{', '.join(bad) or 'nothing'}: choose from {','.join(allowed)}")
        return items
    return parse


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--modes", type=csv_list(list(MODES)), default=list(MODES),
                    help="comma-separated: ours,gang-native,native (default: all)")
    ap.add_argument("--scenarios", type=csv_list(list(SCENARIOS)), default=list(SCENARIOS),
                    help="comma-separated: a,b,c,d,e,f (default: all)")
    ap.add_argument("--runs", type=int, default=2, help="runs per (mode, scenario); medians reported (default 2)")
    ap.add_argument("--out", default="bench-out/agent_vs_native.json", help="JSON list written after every run")
    ap.add_argument("--window", type=float, default=30.0, help="seconds observed after B runs (or gives up)")
    ap.add_argument("--gang-timeout", type=float, default=120.0, help="seconds to wait for B before 'never'")
    ap.add_argument("--churn-seconds", type=float, default=300.0, help="(d) seconds observed from B's finish")
    ap.add_argument("--agent-config", metavar="FILE", default=None,
                    help="ElasticConfig document for mode ours (gating forced on) instead of the shipped defaults "
                         "with the box's shortened time constants")
    a = ap.parse_args()
    if a.runs < 1:
        ap.error("--runs must be >= 1")
    if a.agent_config is not None:
        try:
            agent_config(a.agent_config, gating=True)
        except (OSError, yaml.YAMLError, ConfigError) as exc:
            ap.error(f"--agent-config: {exc}")
    volcano = box_paths.versions().get("VOLCANO_VERSION", "")
    if "gang-native" in a.modes and version_tuple(volcano) < (1, 15, 0):
        ap.error(f"gang-native needs Volcano >= v1.15 (VOLCANO_VERSION={volcano})")
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    todo = [(r, s, m) for r in range(1, a.runs + 1) for s in a.scenarios for m in a.modes]
    for i, (run, sc, mode) in enumerate(todo, 1):
        log(f"[{i}/{len(todo)}] mode {mode}, scenario {sc}, run {run}")
        t0 = time.monotonic()
        try:
            results.append(one_run(mode, sc, run, a))
        except Exception as exc:  # one broken run must not lose the others
            log(f"{mode}/{sc}#{run} FAILED: {exc}")
            results.append({"mode": mode, "scenario": sc, "run": run, "error": str(exc)})
        log(f"[{i}/{len(todo)}] done in {time.monotonic() - t0:.0f}s: {json.dumps(results[-1])}")
        out.write_text(json.dumps(results, indent=2))
    ok = [r for r in results if "error" not in r]
    table = medians(ok)
    out.with_suffix(".md").write_text(table)
    print(table)
    return 1 if len(ok) < len(results) else 0


if __name__ == "__main__":
    sys.exit(main())
