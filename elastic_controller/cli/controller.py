"""``volcano-elastic controller``: the PodGroup controller and the preemption agent in one process.

Leader-elected on a coordination.k8s.io Lease (every replica keeps its caches warm; only the
leader writes), /healthz /readyz /metrics on one port, JSON logs, graceful shutdown on SIGTERM.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from typing import Any

from ..execute.gauges import CycleState
from ..healthserver import HealthServer
from ..logs import json_handler
from .common import add_config_flag, add_kubeconfig_flag, load_config_or_exit

HELP = "run the PodGroup controller and the preemption agent (leader-elected)"

def setup_logging(level: str) -> None:
    handler = json_handler(sys.stderr)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    for noisy in ("urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_config_flag(parser)
    add_kubeconfig_flag(parser)
    parser.add_argument("--http-port", type=int, default=8080, help="/healthz /readyz /metrics (0: off)")
    parser.add_argument("--http-address", default="0.0.0.0")
    parser.add_argument("--lease-name", default="volcano-elastic-controller")
    parser.add_argument("--lease-namespace", default=os.environ.get("POD_NAMESPACE", "volcano-elastic-system"))
    parser.add_argument("--identity", default=None, help="leader-election identity (default: host_pid_rand)")
    parser.add_argument("--lease-duration", type=float, default=15.0)
    parser.add_argument("--renew-deadline", type=float, default=10.0)
    parser.add_argument("--retry-period", type=float, default=2.0)
    parser.add_argument("--no-leader-elect", action="store_true", help="act without a Lease (one replica only)")
    parser.add_argument("--workers", type=int, default=16, help="controller workers (API-bound: threads wait on I/O)")
    parser.add_argument("--no-agent", action="store_true", help="run the controller only")
    parser.add_argument("--volcano-scheduler-configmap", default="volcano-system/volcano-scheduler-configmap",
                        metavar="NAMESPACE/NAME",
                        help="the Volcano scheduler's ConfigMap: when the agent may read it, a scheduler running "
                             "another queue-share plugin than config `shares` is a loud warning and a Warning "
                             "Event ('' to skip the check)")
    parser.add_argument("--log-level", default="info")


class PrometheusMetrics:
    """Every metric on one registry of its own (no global state)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        p = "volcano_elastic_"
        self.evictions = Counter(p + "evictions_total", "Pods evicted by the agent (or counted Volcano preemptions)",
                                 ["queue", "reason"], registry=r)
        self.eviction_failures = Counter(p + "eviction_plans_failed_total",
                                         "Evictions of plans not executed, by why", ["queue", "reason"], registry=r)
        self.gate_releases = Counter(p + "gate_releases_total", "Scale-up gates lifted", ["queue", "reason"],
                                     registry=r)
        self.starving_gangs = Gauge(p + "starving_gangs", "Starving gangs in the last cycle", ["queue"], registry=r)
        self.cycle_seconds = Histogram(p + "agent_cycle_seconds", "Agent cycle duration", registry=r,
                                       buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10))
        self.watch_restarts = Counter(p + "watch_restarts_total", "Watch streams restarted", ["resource", "reason"],
                                      registry=r)
        self.controller_actions = Counter(p + "controller_actions_total", "PodGroup writes and job warnings",
                                          ["action"], registry=r)
        self.leader = Gauge(p + "leader", "1 while this replica holds the Lease", registry=r)
        self.skipped_objects = Gauge(p + "skipped_objects",
                                     "Objects the agent cannot use as they are (malformed, implausible), by kind",
                                     ["kind"], registry=r)
        self._skipped_kinds: set[str] = set()
        self.writes_refused = Counter(p + "writes_refused_total",
                                      "Agent cycles stopped before writing, by why (not-leader, stale-cache)",
                                      ["reason"], registry=r)
        self._queues: set[str] = set()
        # The agent's alarms (AgentMetrics.alarm): one gauge each.
        self.alarms = {
            "clock_skew_seconds": Gauge(p + "clock_skew_seconds", "This process's clock minus the API server's "
                                        "(measured from answers' Date headers)", registry=r),
            "other_writers": Gauge(p + "other_writers", "Other volcano-elastic agents seen writing scale stamps "
                                   "while this one acts (a second active controller)", registry=r),
            "scheduler_idle_seconds": Gauge(p + "scheduler_idle_seconds", "Seconds gangs have fit while no pod "
                                            "was placed (0: the scheduler places, or nothing waits)", registry=r),
        }
        # State, from the planner's view of the last cycle (execute/gauges.py), per queue.
        self.gated_pods = Gauge(p + "gated_pods", "Elastic pods held by a scale-up gate, last cycle", ["queue"],
                                registry=r)
        self.scale_up_held = Gauge(p + "scale_up_held_jobs",
                                   "Jobs whose growth is held back (a gated pod fits), by reason code, last cycle",
                                   ["queue", "reason"], registry=r)
        self.under_notice = Gauge(p + "pods_under_notice", "Elastic workers under an eviction notice, last cycle",
                                  ["queue"], registry=r)
        self.elastic_gpus = Gauge(p + "queue_elastic_gpus", "GPUs held by the queue's elastic workers (above min)",
                                  ["queue"], registry=r)
        self.deserved_gpus = Gauge(p + "queue_deserved_gpus",
                                   "The queue's deserved GPUs as the share model counts them", ["queue"], registry=r)
        self.allocated_gpus = Gauge(p + "queue_allocated_gpus",
                                    "The queue's allocated GPUs as the share model counts them", ["queue"], registry=r)
        self._held: set[tuple[str, str]] = set()
        self._state_queues: set[str] = set()

    # AgentMetrics
    def eviction(self, queue: str, reason: str) -> None:
        self.evictions.labels(queue, reason).inc()

    def eviction_failed(self, queue: str, reason: str) -> None:
        self.eviction_failures.labels(queue, reason).inc()

    def gate_release(self, queue: str, reason: str) -> None:
        self.gate_releases.labels(queue, reason).inc()

    def write_refused(self, reason: str) -> None:
        self.writes_refused.labels(reason).inc()

    def skipped(self, by_kind: dict[str, int]) -> None:
        for kind in self._skipped_kinds | set(by_kind):
            self.skipped_objects.labels(kind).set(by_kind.get(kind, 0))
        self._skipped_kinds |= set(by_kind)

    def starving(self, by_queue: dict[str, int]) -> None:
        for q in self._queues | set(by_queue):
            self.starving_gangs.labels(q).set(by_queue.get(q, 0))
        self._queues |= set(by_queue)

    def cycle(self, seconds: float) -> None:
        self.cycle_seconds.observe(seconds)

    def alarm(self, name: str, value: float) -> None:
        self.alarms[name].set(value)
    def state(self, state: CycleState) -> None:
        """Every gauge of the cycle's state; a queue or (queue, reason) seen before and gone now reads 0."""
        queues = self._state_queues | set(state.gated_pods) | set(state.deserved_gpus)
        for gauge, values in ((self.gated_pods, state.gated_pods), (self.under_notice, state.under_notice),
                              (self.elastic_gpus, state.elastic_gpus), (self.deserved_gpus, state.deserved_gpus),
                              (self.allocated_gpus, state.allocated_gpus)):
            for q in queues | set(values):
                gauge.labels(q).set(values.get(q, 0))
        self._state_queues = queues
        for key in self._held | set(state.held_jobs):
            self.scale_up_held.labels(*key).set(state.held_jobs.get(key, 0))
        self._held |= set(state.held_jobs)

    def clear_state(self) -> None:
        """Drop every state gauge's series (this replica stopped leading: its last values are stale)."""
        for gauge in (self.gated_pods, self.scale_up_held, self.under_notice, self.elastic_gpus,
                      self.deserved_gpus, self.allocated_gpus, self.starving_gangs):
            gauge.clear()
        self._held, self._state_queues, self._queues = set(), set(), set()

    # hooks
    def watch_restart(self, res: Any, reason: str) -> None:
        self.watch_restarts.labels(res.plural, reason.split(":")[0]).inc()

    def controller_action(self, action: str, namespace: str) -> None:
        self.controller_actions.labels(action).inc()

    def render(self) -> tuple[bytes, str]:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST


class Health:
    """What /healthz and /readyz answer."""

    def __init__(self, caches: Any, stale_after: float) -> None:
        self.caches = caches
        self.stale_after = stale_after
        self.leading = threading.Event()
        self.beats: dict[str, Any] = {}  # name -> object with a monotonic ``heartbeat``

    def healthz(self) -> tuple[int, str]:
        if self.leading.is_set():
            now = time.monotonic()
            for name, obj in self.beats.items():
                age = now - float(obj.heartbeat)
                if age > self.stale_after:
                    return 500, f"{name} stalled for {age:.0f}s"
        return 200, "ok"

    def readyz(self) -> tuple[int, str]:
        missing = self.caches.unsynced()
        if missing:
            return 503, "caches not synced: " + ", ".join(missing)
        stale = self.caches.stale()
        if stale:  # an API outage: the watches failed and no relist has succeeded yet
            return 503, "caches stale (API server unreachable?): " + ", ".join(stale)
        return 200, "ok"


def serve_http(address: str, port: int, health: Health, metrics: PrometheusMetrics) -> HealthServer:
    """/healthz (/livez), /readyz and /metrics on one asyncio thread (see ``healthserver``)."""

    def route(path: str) -> tuple[int, bytes, str]:
        if path == "/metrics":
            body, ctype = metrics.render()
            return 200, body, ctype
        if path in ("/healthz", "/livez"):
            code, text = health.healthz()
            return code, text.encode(), "text/plain"
        if path == "/readyz":
            code, text = health.readyz()
            return code, text.encode(), "text/plain"
        return 404, b"not found", "text/plain"

    return HealthServer(address, port, route)


def run(args: argparse.Namespace) -> int:
    from ..agent import Agent
    from ..controller import Controller
    from ..kube.caches import Caches
    from ..kube.client import ClientSettings, KubeClient
    from ..kube.errors import KubeError
    from ..kube.events import EventRecorder
    from ..kube.fence import FencedAPI
    from ..kube.leader import LeaderElector, LeaseSettings
    from ..kube.resources import NAMESPACES, PODGROUPS, PODS, PYTORCHJOBS, QUEUES
    from ..volcanoconf import check_scheduler, describe

    setup_logging(args.log_level)
    log = logging.getLogger("volcano-elastic")
    cfg = load_config_or_exit(args, "controller")
    try:
        # one connection per watch (7) plus one per worker and a few for the agent and events
        client = KubeClient.from_kubeconfig(args.kubeconfig, ClientSettings(pool_size=args.workers + 16))
    except KubeError as exc:
        print(f"volcano-elastic controller: {exc}", file=sys.stderr)
        return 2

    stop = threading.Event()
    lost = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        log.info("signal received, shutting down", extra={"signal": signal.Signals(signum).name})
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    metrics = PrometheusMetrics()
    caches = Caches(client, on_restart=metrics.watch_restart)
    # Events sent by a thread of their own: no write of the agent or the controller waits on one.
    recorder = EventRecorder(client, background=True)  # a dry-run agent never reaches the point of emitting
    identity = args.identity or f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:6]}"
    elector = None if args.no_leader_elect else LeaderElector(client, identity, LeaseSettings(
        args.lease_name, args.lease_namespace, args.lease_duration, args.renew_deadline, args.retry_period))
    # Every agent write checks the Lease first: held, and renewed within the renew deadline.
    may_write = (lambda: True) if elector is None else elector.leading_now
    lease_ref = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "name": args.lease_name,
                 "namespace": args.lease_namespace}
    # Ages and stamps against the API server's clock (every answer's Date header: kube/clock.py).
    agent = Agent(client, caches, cfg, recorder, metrics=metrics, may_write=may_write, identity=identity,
                  server_clock=client.clock, self_ref=lease_ref)
    # The controller's workers write through the same check (a refused write is retried later).
    controller = Controller(FencedAPI(client, may_write), caches, cfg, recorder, workers=args.workers,
                            observe=metrics.controller_action)
    caches.add_handler(controller.on_event, (PYTORCHJOBS, PODGROUPS, NAMESPACES, QUEUES, PODS))
    caches.add_handler(agent.on_event)

    def recovered(res: Any) -> None:
        # A cache relisted after an outage: reconcile every job now, not after each key's retry
        # backoff (PodGroups of jobs created during the outage appear within a second).
        if health.leading.is_set() and res in (PYTORCHJOBS, PODGROUPS):
            controller.enqueue_all()

    caches.on_recovered(recovered)
    health = Health(caches, stale_after=max(60.0, 6 * cfg.agent.intervalSeconds))
    server = serve_http(args.http_address, args.http_port, health, metrics) if args.http_port else None
    caches.start()
    log.info("starting", extra={"identity": identity, "lease": f"{args.lease_namespace}/{args.lease_name}",
                                "dry_run": cfg.agent.dryRun, "config": args.config or "(defaults)",
                                "shares": describe(cfg.shares)})
    agent_thread: list[threading.Thread] = []
    work_stop = threading.Event()

    def on_started() -> None:
        work_stop.clear()
        controller.start()
        health.beats["controller"] = controller
        if not args.no_agent:
            shares = check_scheduler(client, cfg.shares, args.volcano_scheduler_configmap,
                                     None if cfg.agent.dryRun else recorder)
            log.info("agent starting", extra={"shares": shares, "dry_run": cfg.agent.dryRun})
            t = threading.Thread(target=agent.run, args=(work_stop,), name="agent", daemon=True)
            t.start()
            agent_thread.append(t)
            health.beats["agent"] = agent
        health.leading.set()
        metrics.leader.set(1)
        log.info("leading: controller and agent running", extra={"identity": identity})

    def on_stopped() -> None:
        health.leading.clear()
        metrics.leader.set(0)
        work_stop.set()
        controller.stop()
        for t in agent_thread:
            t.join(10)
        agent_thread.clear()
        metrics.clear_state()  # a follower exports no state of its own

    code = 0
    # Campaign only with warm caches: a leader must act at once (and renew its Lease) after winning.
    while not caches.wait_synced(5.0) and not stop.is_set():
        log.warning("waiting for caches", extra={"unsynced": caches.unsynced()})
    try:
        if stop.is_set():
            pass
        elif elector is None:
            on_started()
            stop.wait()
            on_stopped()
        else:
            if elector.run(stop, on_started, on_stopped):
                lost.set()
                code = 1  # exit so that the Deployment restarts us as a clean follower
    finally:
        caches.stop()
        if server is not None:
            server.shutdown()
        client.close()
    log.info("stopped", extra={"identity": identity, "lost_lease": lost.is_set()})
    return code
