"""The whole system at cluster size: kwok nodes x 8 GPUs, PyTorchJobs arriving and finishing.

    .venv/bin/python bench/scale_box.py --nodes N --jobs M --out FILE [--duration 240] [--queues 4]
        [--modes ours,without] [--seed 1] [--no-plan-check]

One fresh box (hack/localbox, kwok, Volcano with hack/volcano-scheduler-ours.conf) per mode, the
same seeded workload in each, modes one after the other in one invocation (this machine drifts:
compare the modes of one run, not numbers of different runs):

  ours     our webhook (``failurePolicy: Fail``, 2 workers), controller and agent (gating on; the
           shipped defaults with agent_vs_native's box time constants, agent interval 5 s).
  without  no webhook, controller or agent: the bench creates each job's PodGroup itself (what the
           training operator does with ``--gang-scheduler-name=volcano``), pods ask for Volcano and
           name their group in the template. Volcano alone, for its scheduling latency.

Workload (``workload()``): M jobs in ``--queues`` queues (namespace team-<q>, queue dept-<q>),
half elastic (2..8 workers x 2 GPUs), half rigid (1 x 8 or 2 x 4 GPUs); arrivals uniform over the
first 60 % of ``--duration``, each job deleted by the bench after a lifetime of 25-50 % of it (its
completion: the garbage collector removes its pods). Measured (JSON ``modes.<mode>``):

  admission          our webhook as the API server saw it: apiserver_admission_webhook_admission_
                     duration_seconds (p50/p99 interpolated in its buckets) and its request counts by
                     code and rejections; and the webhook's own histogram.
  podGroupSeconds    job POST -> its PodGroup seen by a watch (p50/p99/max; ours only);
                     podGroupAfterJobCreatedSeconds: the same from the POST's answer (the API
                     server's time for the POST itself left out)
  heldByMinShare     jobs the controller held by elasticMinShare (their HeldByMinShare Events: their
                     PodGroup withheld on purpose) and podGroupSecondsOfJobsNeverHeld (ours only)
  agent              cycles, cycle seconds p50/p99 (volcano_elastic_agent_cycle_seconds, bucket-
                     interpolated) and mean, the controller process's peak RSS (VmHWM), API requests
                     per cycle (requestsPerCycle: every request of the controller process, counted in
                     it by a wrapper of KubeClient._send, the controller's PodGroup writes included;
                     agentRequestsPerCycle: those of the agent's threads only, its loop and writers;
                     the Events of the agent and the controller are sent by a thread of their own
                     since 0f97d6c: "events POST" in controllerRequests)
  volcano            per pod: schedulable (created ungated, or its gate lifted) -> bound, seen by a
                     watch; per job: POST -> min workers bound; vc-scheduler's own
                     volcano_e2e_scheduling_latency_milliseconds
  planCheck          (ours) at the end of the arrivals: arrivals and deletions paused and settled (no
                     pod terminating, every job with all its pods), vc-scheduler, the training operator
                     and kube-controller-manager SIGSTOPped (kwok still runs); right after an agent
                     cycle ends the controller is SIGSTOPped; the box is dumped (kubectl get nodes,
                     pods,podgroups,queues,priorityclasses,pytorchjobs -A -o json);
                     the controller is continued and the decisions its next 3 whole cycles log
                     (gang decisions, evictions, gate releases; a cycle is the log lines up to its
                     ``agent cycle`` line, read from the end of the last whole cycle before the
                     stop) compared, set against set, with ``volcano-elastic plan --from dump --now
                     T -o json``, T the ``now`` the cycle decided at (its ``agent cycle`` line).
                     ``startedAfterDump``: the cycle decided after the dump was taken (a cycle the
                     stop cut in two decided on the world just before it). A cycle that started
                     before its informers had applied what changed while it was stopped plans on
                     the older world (or, its watches broken by the pause, refuses to plan on stale
                     caches: ``staleCaches``): the first cycles may differ for that reason alone;
                     ``firstSameCycle`` says which one agreed.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter as Tally
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from _scale_parts import (  # noqa: E402
    JobSpec,
    compare,
    cycle_log,
    hist_delta,
    hist_summary,
    histogram,
    last_cycle_end,
    log_decisions,
    manifest,
    minus_pauses,
    parse_prom,
    plan_decisions,
    run_histogram,
    select,
    split_cycles,
    summary,
    vm_hwm_mib,
    workload,
)

from hack.localbox.polling import poll_until  # noqa: E402

JOB_LABEL = "training.kubeflow.org/job-name"
WEBHOOK_NAME = "pods.volcano-elastic.io"
BOX_TIME = {"cooldownSeconds": 30, "minRuntimeSeconds": 12, "starvationSeconds": 3,
            "firstRendezvousSeconds": 3, "scaleUpAfterCheckpointSeconds": 60}
AGENT_INTERVAL = 5
DUMP_KINDS = "nodes,pods,podgroups,queues,priorityclasses,pytorchjobs"
# stopped during the plan check: nothing but kwok and us changes the world
FROZEN = ("vc-scheduler", "training-operator", "kube-controller-manager")


# ----------------------------------------------------------------------------- the controller, counted
def serve_controller(counts_file: str, argv: list[str]) -> int:
    """``volcano-elastic controller ARGV`` in this process, every KubeClient request counted by verb
    and written to ``counts_file`` each second."""
    from elastic_controller.cli import main as cli_main
    from elastic_controller.kube.client import KubeClient

    tally: Tally[str] = Tally()
    lock = threading.Lock()
    send = KubeClient._send

    def counted(self: Any, method: str, path: str, **kw: Any) -> Any:
        kind = "WATCH" if (kw.get("query") or {}).get("watch") else method
        thread = threading.current_thread().name  # whose request: the agent's (its loop and writers) or not
        who = "agent" if thread == "agent" or thread.startswith("agent-writer") else \
            "controller" if thread.startswith("controller") else \
            "events" if thread == "event-sender" else "other"  # (Events of both, sent in the background)
        with lock:
            tally[kind] += 1
            tally[f"{who} {kind}"] += 1
        return send(self, method, path, **kw)

    KubeClient._send = counted  # type: ignore[method-assign]

    def dump() -> None:
        while True:
            time.sleep(1)
            with lock:
                text = json.dumps(dict(tally))
            Path(counts_file + ".tmp").write_text(text)
            os.replace(counts_file + ".tmp", counts_file)

    threading.Thread(target=dump, daemon=True).start()
    return int(cli_main(["controller", *argv]) or 0)


# ----------------------------------------------------------------------------- observation
@dataclass
class Observer:
    """Watches pods and PodGroups: when each job's PodGroup appeared, each pod became schedulable
    and was bound, and when each job had its min bound."""

    min_workers: dict[str, int]  # ns/job -> min
    posted: dict[str, float] = field(default_factory=dict)  # ns/job -> POST sent (monotonic)
    created: dict[str, float] = field(default_factory=dict)  # ns/job -> the POST's answer received
    pg_seen: dict[str, float] = field(default_factory=dict)
    schedulable: dict[str, float] = field(default_factory=dict)  # pod uid
    bound: dict[str, float] = field(default_factory=dict)
    job_bound: dict[str, set[str]] = field(default_factory=dict)
    job_min_at: dict[str, float] = field(default_factory=dict)
    pauses: list[tuple[float, float]] = field(default_factory=list)  # vc-scheduler stopped (plan check)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_pg(self, _res: Any, kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            return
        m = obj["metadata"]
        with self.lock:
            self.pg_seen.setdefault(f"{m['namespace']}/{m['name']}", time.monotonic())

    def on_pod(self, _res: Any, kind: str, obj: dict[str, Any]) -> None:
        if kind == "DELETED":
            return
        now = time.monotonic()
        m, spec = obj["metadata"], obj.get("spec") or {}
        uid = m["uid"]
        job = f"{m['namespace']}/{(m.get('labels') or {}).get(JOB_LABEL, '')}"
        with self.lock:
            if spec.get("nodeName"):
                if uid in self.schedulable and uid not in self.bound:
                    self.bound[uid] = now
                got = self.job_bound.setdefault(job, set())
                got.add(uid)
                if job not in self.job_min_at and len(got) >= self.min_workers.get(job, 1 << 30):
                    self.job_min_at[job] = now
            elif not spec.get("schedulingGates") and not m.get("deletionTimestamp"):
                self.schedulable.setdefault(uid, now)


class InFlight:
    """The bench's creations and deletions submitted and not yet done."""

    def __init__(self) -> None:
        self.n = 0
        self.cond = threading.Condition()

    def add(self) -> None:
        with self.cond:
            self.n += 1

    def done_after(self, fn: Any, *args: Any) -> None:
        try:
            fn(*args)
        finally:
            with self.cond:
                self.n -= 1
                self.cond.notify_all()

    def wait_idle(self, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: self.n == 0, timeout)


class Metrics:
    """/metrics of the API server (kubectl get --raw), vc-scheduler and our controller."""

    def __init__(self, box: Any, controller_port: int | None) -> None:
        self.box = box
        self.controller_port = controller_port

    def apiserver(self) -> list[tuple[str, dict[str, str], float]]:
        return parse_prom(self.box.kubectl("get", "--raw", "/metrics", timeout=120).stdout)

    def http(self, port: int) -> list[tuple[str, dict[str, str], float]]:
        import urllib.request

        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
            return parse_prom(resp.read().decode())

    def volcano(self) -> list[tuple[str, dict[str, str], float]]:
        try:
            return self.http(self.box.ports["vc_scheduler_metrics"])
        except OSError as exc:  # a box without --enable-metrics: the watch's numbers still stand
            log(f"vc-scheduler /metrics: {exc}")
            return []

    def controller(self) -> list[tuple[str, dict[str, str], float]]:
        return self.http(self.controller_port) if self.controller_port else []


def wait_until(what: str, fn: Any, timeout: float) -> Any:
    """``fn()``'s first truthy answer; exceptions (an object not there yet) count as not yet."""
    return poll_until(what, fn, timeout, 0.3, retry=(Exception,))


def log(msg: str) -> None:
    print(f"[scale_box {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------- one mode
def run_mode(mode: str, a: argparse.Namespace, jobs: list[JobSpec]) -> dict[str, Any]:
    from elastic_controller.kube.client import KubeClient
    from elastic_controller.kube.errors import KubeError
    from elastic_controller.kube.informer import Informer
    from elastic_controller.kube.resources import LEASES, NAMESPACES, PODGROUPS, PODS, PYTORCHJOBS, QUEUES
    from hack.localbox import Box, BoxOptions
    from hack.localbox.ours import webhook_argv
    from hack.localbox.procs import free_port
    from tests.harness.stack import register_webhook

    ours = mode == "ours"
    name = f"scale-{mode}"
    stale = Box(name=name)
    if stale.load():
        stale.opts.quiet = True
        stale.down(quiet=True)
    t_box = time.monotonic()
    box = Box(BoxOptions(name=name, profile="full", nodes=a.nodes, gpus_per_node=8, volcano_conf="ours",
                         operator_threads=a.operator_threads, quiet=True, timeout=max(90.0, a.nodes * 0.5)))
    box.up()
    box_seconds = time.monotonic() - t_box
    log(f"{mode}: box with {a.nodes} nodes up in {box_seconds:.0f}s")
    tmp = Path(tempfile.mkdtemp(prefix=f"scale-{mode}-"))
    kc = KubeClient.from_kubeconfig(str(box.kubeconfig))
    informers: list[Any] = []
    pool = ThreadPoolExecutor(a.threads)
    result: dict[str, Any] = {"mode": mode, "boxUpSeconds": round(box_seconds, 1)}
    try:
        queues = sorted({j.queue for j in jobs})
        for ns in [*sorted({j.namespace for j in jobs}), "ve-bench"]:
            kc.create(NAMESPACES, {"metadata": {"name": ns}})
        for q in queues:
            kc.create(QUEUES, {"metadata": {"name": q}, "spec": {"weight": 1, "reclaimable": True}})
        for q in queues:
            wait_until(f"queue {q} Open", lambda q=q: (kc.get(QUEUES, q).get("status") or {}).get("state") == "Open",
                       120)
        cfg = tmp / "config.yaml"
        cfg.write_text(f"agent: {{intervalSeconds: {AGENT_INTERVAL}}}\ngating: {{enabled: true}}\n"
                       f"defaults: {{{', '.join(f'{k}: {v}' for k, v in BOX_TIME.items())}}}\n")
        counts_file = tmp / "requests.json"
        ctl_port = free_port() if ours else None
        ctl = None
        if ours:
            cert = box.issue_serving_cert(tmp)
            port = free_port()
            box.spawn("webhook", webhook_argv(cert[0], cert[1], port, cfg, workers=2))
            wait_until("webhook /healthz", lambda: _https_ok(port, box.ca_file), 60)
            register_webhook(kc, box, port, "volcano-elastic-scale")
            ctl = box.spawn("controller", [sys.executable, str(Path(__file__).resolve()), "--serve-controller",
                                           str(counts_file), "--kubeconfig", str(box.kubeconfig), "--config", str(cfg),
                                           "--lease-namespace", "ve-bench", "--http-port", str(ctl_port),
                                           "--http-address", "127.0.0.1"])
            wait_until("controller leads", lambda: kc.get(LEASES, "volcano-elastic-controller", "ve-bench"), 120)
        metrics = Metrics(box, ctl_port)
        mins = {f"{j.namespace}/{j.name}": j.min_workers for j in jobs}
        obs = Observer(mins)
        for res, handler in ((PODGROUPS, obs.on_pg), (PODS, obs.on_pod)):
            inf = Informer(kc, res)
            inf.add_handler(handler)
            inf.start()
            inf.wait_synced(60)
            informers.append(inf)
        api0 = metrics.apiserver()
        vc0 = metrics.volcano()
        ctl0 = metrics.controller()
        time.sleep(2)
        errors: Tally[str] = Tally()
        post_seconds: list[float] = []
        uids: dict[str, str] = {}
        inflight = InFlight()
        vc_a = vc_b = ctl_a = ctl_b = []  # around the plan check: its stopped processes not measured

        def create(job: JobSpec) -> None:
            key = f"{job.namespace}/{job.name}"
            t = time.monotonic()
            obs.posted[key] = t
            for attempt in range(5):
                try:
                    made = kc.create(PYTORCHJOBS, manifest(job, not ours), job.namespace)
                    break
                except KubeError as exc:
                    errors[f"create {exc.status}"] += 1
                    if attempt == 4:
                        return
                    time.sleep(1)
            post_seconds.append(time.monotonic() - t)
            obs.created[key] = time.monotonic()
            uids[key] = made["metadata"]["uid"]
            if not ours:
                pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
                      "metadata": {"name": job.name, "ownerReferences": [{
                          "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": job.name,
                          "uid": made["metadata"]["uid"], "controller": True}]},
                      "spec": {"minMember": job.min_workers, "queue": job.queue,
                               "minResources": {"nvidia.com/gpu": str(job.min_workers * job.gpus)}}}
                try:
                    kc.create(PODGROUPS, pg, job.namespace)
                except KubeError as exc:
                    errors[f"podgroup {exc.status}"] += 1

        def finish(job: JobSpec) -> None:
            try:
                kc.delete(PYTORCHJOBS, job.name, job.namespace)
            except KubeError as exc:
                errors[f"delete {exc.status}"] += 1

        events = sorted([(j.arrive, 0, j) for j in jobs] + [(j.arrive + j.lifetime, 1, j) for j in jobs],
                        key=lambda e: (e[0], e[1], e[2].name))
        plan_at = 0.6 * a.duration
        plan_check: dict[str, Any] | None = None
        t0 = time.monotonic()
        shift = 0.0  # seconds the schedule was paused
        for at, kind, job in events:
            if ours and a.plan_check and plan_check is None and at >= plan_at:
                p0 = time.monotonic()
                vc_a, ctl_a = metrics.volcano(), metrics.controller()
                try:
                    plan_check = check_plan(box, kc, ctl, cfg, tmp, metrics, inflight.wait_idle)
                except Exception as exc:  # the rest of the run still measures
                    plan_check = {"error": f"{type(exc).__name__}: {exc}"}
                vc_b, ctl_b = metrics.volcano(), metrics.controller()
                obs.pauses.append((p0, time.monotonic()))
                shift += time.monotonic() - p0
                log(f"plan check: {json.dumps(plan_check)[:400]}")
            delay = t0 + shift + at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            inflight.add()
            pool.submit(inflight.done_after, create if kind == 0 else finish, job)
        pool.shutdown(wait=True)
        time.sleep(a.settle)
        elapsed = time.monotonic() - t0
        api1, vc1, ctl1 = metrics.apiserver(), metrics.volcano(), metrics.controller()
        result.update(measure(mode, jobs, obs, api0, api1, (vc0, vc_a, vc_b, vc1), (ctl0, ctl_a, ctl_b, ctl1)))
        if ours:
            # issue 38: a job held by elasticMinShare has its PodGroup withheld on purpose; its wait is
            # the hold's, not the controller's latency (the Events say which jobs were ever held)
            held = held_jobs(kc)
            pg = [obs.pg_seen[k] - obs.posted[k] for k in obs.posted if k in obs.pg_seen and k not in held]
            result["heldByMinShare"] = {"jobs": len(held), "podGroupSecondsOfJobsNeverHeld": summary(pg)}
        result["clientErrors"] = dict(errors)
        result["jobPostSeconds"] = summary(post_seconds)
        result["wallSeconds"] = round(elapsed, 1)
        if ours and ctl is not None:
            result["agent"]["peakRssMiB"] = vm_hwm_mib(ctl.pid)
            # every cycle's own line (exact percentiles, and what the longest ones did), the plan
            # check's cycles (the controller stopped under them) left out
            window = (plan_check or {}).get("window") or []
            result["agent"].update(cycle_log(Path(ctl.log).read_text(errors="replace"), window))
            try:
                reqs = json.loads(counts_file.read_text())
            except (OSError, ValueError):
                reqs = {}
            cycles = result["agent"]["cycleSeconds"]["n"]
            total = sum(v for k, v in reqs.items() if " " not in k and k != "WATCH")
            agent = sum(v for k, v in reqs.items() if k.startswith("agent ") and not k.endswith("WATCH"))
            result["agent"]["controllerRequests"] = reqs
            # the whole process's (the controller's PodGroup writes included), and the agent's own
            result["agent"]["requestsPerCycle"] = round(total / cycles, 1) if cycles else None
            result["agent"]["agentRequestsPerCycle"] = round(agent / cycles, 1) if cycles else None
            result["webhookSelf"] = webhook_self(box, port)
        result["planCheck"] = plan_check
        result["pods"] = len(obs.schedulable)
        return result
    finally:
        for inf in informers:
            inf.stop(0)
        pool.shutdown(wait=False, cancel_futures=True)
        kc.close()
        if not a.keep_box:
            box.down(quiet=True)


def _https_ok(port: int, ca: Path) -> bool:
    import ssl
    import urllib.request

    try:
        ctx = ssl.create_default_context(cafile=str(ca))
        ctx.check_hostname = False
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", timeout=2, context=ctx) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def webhook_self(box: Any, port: int) -> dict[str, Any]:
    import ssl
    import urllib.request

    ctx = ssl.create_default_context(cafile=str(box.ca_file))
    ctx.check_hostname = False
    try:
        with urllib.request.urlopen(f"https://127.0.0.1:{port}/metrics", timeout=30, context=ctx) as r:
            s = parse_prom(r.read().decode())
    except OSError as exc:
        return {"error": str(exc)}
    return {"seconds": hist_summary(histogram(s, "volcano_elastic_webhook_request_duration_seconds")),
            "results": {lab.get("result", ""): v for lab, v in select(s, "volcano_elastic_webhook_requests_total")}}


def held_jobs(kc: Any) -> set[str]:
    """``ns/name`` of every PyTorchJob the controller held by ``elasticMinShare`` (its Events)."""
    from elastic_controller.kube.errors import KubeError
    from elastic_controller.kube.resources import EVENTS
    try:
        events, _ = kc.list(EVENTS, field_selector="reason=HeldByMinShare")
    except KubeError as exc:
        log(f"held jobs not listed: {exc}")
        return set()
    return {f"{(e.get('involvedObject') or {}).get('namespace')}/{(e.get('involvedObject') or {}).get('name')}"
            for e in events}


def measure(mode: str, jobs: list[JobSpec], obs: Observer, api0: Any, api1: Any, vc: tuple[Any, Any, Any, Any],
            ctl: tuple[Any, Any, Any, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    adm = hist_delta(histogram(api1, "apiserver_admission_webhook_admission_duration_seconds", name=WEBHOOK_NAME),
                     histogram(api0, "apiserver_admission_webhook_admission_duration_seconds", name=WEBHOOK_NAME))
    codes: dict[str, float] = {}
    for sign, snap in ((1.0, api1), (-1.0, api0)):
        for lab, v in select(snap, "apiserver_admission_webhook_request_total", name=WEBHOOK_NAME):
            codes[lab.get("code", "?")] = codes.get(lab.get("code", "?"), 0.0) + sign * v
    rejected = sum(v for _, v in select(api1, "apiserver_admission_webhook_rejection_count", name=WEBHOOK_NAME)) - \
        sum(v for _, v in select(api0, "apiserver_admission_webhook_rejection_count", name=WEBHOOK_NAME))
    if mode == "ours":
        out["admission"] = {"seconds": hist_summary(adm), "byCode": {k: int(v) for k, v in codes.items() if v},
                            "errors": int(sum(v for k, v in codes.items() if k != "200") + rejected)}
        pg = [obs.pg_seen[k] - obs.posted[k] for k in obs.posted if k in obs.pg_seen]
        out["podGroupSeconds"] = {**summary(pg), "missing": len(obs.posted) - len(pg)}
        # the same from the job's POST answered (the API server's own time for the POST left out;
        # negative: the PodGroup was seen before the bench had the answer)
        after = [obs.pg_seen[k] - obs.created[k] for k in obs.created if k in obs.pg_seen]
        out["podGroupAfterJobCreatedSeconds"] = summary(after)
        cyc = run_histogram(ctl, "volcano_elastic_agent_cycle_seconds")
        out["agent"] = {"cycleSeconds": hist_summary(cyc)}
    pod_lat = [minus_pauses(obs.schedulable[u], obs.bound[u], obs.pauses) for u in obs.bound]
    job_lat = [minus_pauses(obs.posted[k], obs.job_min_at[k], obs.pauses) for k in obs.posted if k in obs.job_min_at]
    e2e = run_histogram(vc, "volcano_e2e_scheduling_latency_milliseconds")
    out["volcano"] = {"podSchedulableToBoundSeconds": {**summary(pod_lat),
                                                       "neverBound": len(obs.schedulable) - len(pod_lat)},
                      "jobPostToMinBoundSeconds": {**summary(job_lat), "neverMin": len(obs.posted) - len(job_lat)},
                      "e2eSchedulingMs": hist_summary(e2e, 1)}
    return out


# ----------------------------------------------------------------------------- the plan check
def settled(kc: Any) -> bool:
    """Nothing under way but scheduling: every PodGroup's and pod's job still exists, no pod terminating,
    every job has all its pods (the training operator creates them some seconds after the job)."""
    from elastic_controller.kube.resources import PODGROUPS, PODS, PYTORCHJOBS

    jobs = {(j["metadata"]["namespace"], j["metadata"]["name"]): sum(
        int(r.get("replicas") or 0) for r in (j["spec"].get("pytorchReplicaSpecs") or {}).values())
        for j in kc.list(PYTORCHJOBS)[0]}
    if any((g["metadata"]["namespace"], g["metadata"]["name"]) not in jobs for g in kc.list(PODGROUPS)[0]):
        return False
    pods: Tally[tuple[str, str]] = Tally()
    for p in kc.list(PODS)[0]:
        m = p["metadata"]
        key = (m["namespace"], (m.get("labels") or {}).get(JOB_LABEL, ""))
        if m.get("deletionTimestamp") or key not in jobs:
            return False
        pods[key] += 1
    return all(pods[k] >= n for k, n in jobs.items())  # the training operator has made every pod


def check_plan(box: Any, kc: Any, ctl: Any, cfg: Path, tmp: Path, metrics: Metrics,
               idle: Any) -> dict[str, Any]:
    """See the module doc: the plan of a dump against the agent's next cycles, the scheduler stopped,
    no job being created or deleted. Each live cycle is compared with the dump's plan at that cycle's
    time (the ``now`` of its ``agent cycle`` log line), so that ages (starvation, cooldowns) agree."""
    from datetime import UTC, datetime

    t = time.monotonic()
    idle(120)  # the bench's own creations and deletions done
    try:
        wait_until("deletions settled", lambda: settled(kc), 120)
        quiet = True
    except TimeoutError:
        quiet = False
    result: dict[str, Any] = {"settled": quiet, "settleSeconds": round(time.monotonic() - t, 1)}
    frozen = [box.procs[n].pid for n in FROZEN]
    window = [datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")]
    logf = Path(ctl.log)
    for pid in frozen:
        os.kill(pid, signal.SIGSTOP)
    try:
        time.sleep(3)  # binds in flight land; kwok starts what was bound
        c0 = cycles_safe(metrics)
        deadline = time.monotonic() + 120
        while cycles_safe(metrics) == c0 and time.monotonic() < deadline:
            time.sleep(0.02)
        os.kill(ctl.pid, signal.SIGSTOP)  # right after a cycle: none of its writes in flight
        try:
            time.sleep(3)  # what its last cycle wrote settles (kwok removes evicted pods)
            # the log from the end of the last whole cycle: a cycle stopped midway is read whole
            offset = last_cycle_end(logf.read_bytes())
            dump = tmp / "dump.json"
            t = time.monotonic()
            dumped_at = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
            dump.write_text(box.kubectl("get", DUMP_KINDS, "-A", "-o", "json", timeout=300).stdout)
            result.update(dumpBytes=dump.stat().st_size, dumpSeconds=round(time.monotonic() - t, 1),
                          dumpedAt=dumped_at)
        finally:
            os.kill(ctl.pid, signal.SIGCONT)
        cycles: list[tuple[str, list[str]]] = []
        deadline = time.monotonic() + 180
        while len(cycles) < 3 and time.monotonic() < deadline:
            time.sleep(0.2)
            with logf.open("rb") as fh:
                fh.seek(offset)
                data = fh.read()
            cycles, _ = split_cycles(data.decode(errors="replace"))
    finally:
        for pid in frozen:
            os.kill(pid, signal.SIGCONT)
        result["window"] = [*window, datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")]
    for i, (now, lines) in enumerate(cycles[:3], 1):
        t = time.monotonic()
        out = subprocess.run([sys.executable, "-m", "elastic_controller", "plan", "--from", str(dump), "--config",
                              str(cfg), "--now", now, "-o", "json"], capture_output=True, text=True, cwd=ROOT,
                             timeout=300)
        if out.returncode != 0:
            result[f"cycle{i}"] = {"error": f"plan exited {out.returncode}: {out.stderr[-500:]}"}
            continue
        result[f"cycle{i}"] = {"now": now, "startedAfterDump": now > dumped_at,
                               "planSeconds": round(time.monotonic() - t, 1),
                               "staleCaches": any("caches stale" in x for x in lines),
                               **compare(plan_decisions(json.loads(out.stdout)), log_decisions(lines))}
    result["firstSameCycle"] = next((i for i in range(1, len(cycles[:3]) + 1)
                                     if result[f"cycle{i}"].get("same")), None)
    return result


def cycles_safe(metrics: Metrics) -> float:
    try:
        return sum(v for _, v in select(metrics.controller(), "volcano_elastic_agent_cycle_seconds_count"))
    except OSError:
        return -1.0


# ----------------------------------------------------------------------------- main
def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--serve-controller"]:
        return serve_controller(argv[1], argv[2:])
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--nodes", type=int, required=True, help="kwok nodes of 8 GPUs each")
    ap.add_argument("--jobs", type=int, required=True, help="PyTorchJobs over the run")
    ap.add_argument("--out", required=True, help="JSON written here")
    ap.add_argument("--duration", type=float, default=240.0, help="seconds of arrivals (first 60 %%) and lifetimes")
    ap.add_argument("--settle", type=float, default=20.0, help="seconds after the last event before measuring")
    ap.add_argument("--queues", type=int, default=4)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=8, help="client threads creating and deleting jobs")
    ap.add_argument("--operator-threads", type=int, default=8,
                    help="the training operator's reconcile threads (its default, 1, creates about a pod a "
                         "second here: 1,000 jobs never get their pods)")
    ap.add_argument("--modes", default="ours,without", help="comma-separated: ours,without (default both)")
    ap.add_argument("--no-plan-check", dest="plan_check", action="store_false")
    ap.add_argument("--keep-box", action="store_true", help="leave each box running (debugging)")
    a = ap.parse_args(argv)
    modes = [m.strip() for m in a.modes.split(",") if m.strip()]
    if not modes or any(m not in ("ours", "without") for m in modes):
        ap.error("--modes: comma-separated ours,without")
    if a.nodes < 1 or a.jobs < 1 or a.queues < 1 or a.duration <= 0:
        ap.error("--nodes, --jobs, --queues must be >= 1 and --duration > 0")
    jobs = workload(a.jobs, a.queues, a.duration, a.seed)
    doc: dict[str, Any] = {
        "nodes": a.nodes, "gpusPerNode": 8, "jobs": a.jobs, "queues": a.queues, "duration": a.duration,
        "seed": a.seed, "operatorThreads": a.operator_threads, "cores": os.cpu_count(),
        "load1AtStart": round(os.getloadavg()[0], 1),
        "commit": subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                 text=True).stdout.strip(),
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "workload": {"elastic": sum(1 for j in jobs if j.elastic), "rigid": sum(1 for j in jobs if not j.elastic),
                     "maxGpusAsked": sum(j.workers * j.gpus for j in jobs)},
        "modes": {},
    }
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    for mode in modes:
        log(f"mode {mode}: {a.nodes} nodes, {a.jobs} jobs over {a.duration:.0f}s")
        try:
            doc["modes"][mode] = run_mode(mode, a, jobs)
        except Exception as exc:  # one broken mode must not lose the other
            log(f"mode {mode} FAILED: {type(exc).__name__}: {exc}")
            doc["modes"][mode] = {"error": f"{type(exc).__name__}: {exc}"}
        doc["load1AtEnd"] = round(os.getloadavg()[0], 1)
        out.write_text(json.dumps(doc, indent=2))
    ours, without = (doc["modes"].get(m, {}) for m in ("ours", "without"))
    try:
        r = {k: ours["volcano"][k]["p50"] / without["volcano"][k]["p50"]
             for k in ("podSchedulableToBoundSeconds", "jobPostToMinBoundSeconds")}
        doc["oursOverWithoutP50"] = {k: round(v, 2) for k, v in r.items()}
    except (KeyError, TypeError, ZeroDivisionError):
        pass
    out.write_text(json.dumps(doc, indent=2))
    print(json.dumps(doc, indent=2))
    return 0 if all("error" not in m for m in doc["modes"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
