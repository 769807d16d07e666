"""What goes into a simulation and what comes out of it: ``SimSettings``, the per-job and per-run
results, the planner's signature, and the per-cycle config of a batched cycle grid. The engine
(``engine.Simulator``) re-exports every name here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from ..policy.decisions import CyclePlan
from ..policy.model import Snapshot
from ..policy.settings import ElasticConfig, QueuePolicy
from .restarts import RestartCost
from .scaling import ScalingCurve
from .state import SimPod

Planner = Callable[[Snapshot, ElasticConfig, datetime], CyclePlan]
Progress = Callable[[int, int], None]

EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


class SimulationError(RuntimeError):
    pass


def batched_config(cfg: ElasticConfig, cycle_seconds: float) -> ElasticConfig:
    """The config one simulated cycle plans with when it stands for several agent cycles.

    With a cycle grid N times the agent's interval, the per-cycle caps (maxScaleUpPerCycle,
    maxEvictionsPerCycle) are multiplied by N so that batching does not throttle the agent.
    """
    factor = int(cycle_seconds // cfg.agent.intervalSeconds)
    if factor <= 1:
        return cfg

    def scaled(q: QueuePolicy) -> QueuePolicy:
        return replace(q, maxScaleUpPerCycle=q.maxScaleUpPerCycle * factor,
                       maxEvictionsPerCycle=q.maxEvictionsPerCycle * factor)

    return replace(cfg, defaults=scaled(cfg.defaults), queues={k: scaled(v) for k, v in cfg.queues.items()})


def default_planner() -> Planner:
    """The agent's own planner, with a ``PlanCache`` of its own (one per simulation)."""
    from ..policy.cycle import PlanCache, plan_cycle

    cache = PlanCache()

    def plan(snapshot: Snapshot, cfg: ElasticConfig, now: datetime) -> CyclePlan:
        return plan_cycle(snapshot, cfg, now, cache=cache)

    return plan


@dataclass(frozen=True, slots=True)
class SimSettings:
    # seconds without progress after a scale event, by the event (restarts.RestartCost: torchrun's
    # rendezvous, the job kit's, or a fixed penalty)
    restart_cost: RestartCost = field(default_factory=RestartCost)
    grace_period: float = 30.0  # an evicted worker holds its GPUs this long
    curve: ScalingCurve = field(default_factory=lambda: ScalingCurve(per_doubling=0.95))
    start: datetime = EPOCH
    prefilter: bool = True  # skip agent cycles that provably cannot act (tests turn it off)
    cycle_seconds: float = 0.0  # agent cycle grid (0: the config's agent.intervalSeconds)
    timeline: bool = True
    # Plan at every agent interval while jobs are active, as the real agent does, not only when
    # something could change the plan (slow: for the test that the event-driven wake-ups miss none)
    every_cycle: bool = False
    # Workers that join within this many seconds of the job's start, before any other scale event,
    # join its first rendezvous (torchrun's c10d ``last_call_timeout``, 30 s by default): no restart.
    rendezvous_last_call: float = 30.0
    checkpoint_interval: float = 1800.0  # seconds of progress between checkpoints (0: none)
    # volcano-gang: gangpreempt/gangreclaim may take whole bundles (Volcano's allowWholeBundle)
    allow_whole_bundle: bool = True
    # volcano-gang: a pod placed less than this long ago is not a victim (cdp's cooldown; 0: off)
    pod_cooldown: float = 0.0
    enqueue: bool = True  # model Volcano's enqueue admission (tests turn it off)
    overcommit_factor: float = 1.2  # the overcommit plugin's overcommit-factor
    # volcano-gang under shares capacity: the capacity plugin sits in the scheduler's first tier, so its
    # UnifiedEvictableFn filters gangreclaim's victims (in the second tier, its usual place, the first
    # tier's priority/gang/conformance decide and it is not consulted: framework/session_plugins.go:325)
    capacity_first_tier: bool = False
    # elastic: jobs publish volcano-elastic.io/last-checkpoint-time on their PodGroup (the contract's
    # annotation, as training code writes it), so the planner sees what a restart would lose
    publish_checkpoints: bool = True
    # elastic, a queue with noticeSeconds > 0: a job under notice records its checkpoint (writes
    # last-checkpoint-time) this many seconds after the notice began, which ends the notice at the
    # next cycle; < 0: it checkpoints only as its notice ends (its victims' GPUs are held for all of it)
    notice_checkpoint: float = -1.0
    # elastic: every job's PyTorchJob says elasticPolicy.maxRestarts this (None: no PyTorchJob in the
    # planner's snapshot, so the restart budget does not apply, as for a dump of pods and PodGroups);
    # each shrink spends one (decide's SpendRestart, counted in restarts-used as the agent writes it)
    max_restarts: int | None = None


@dataclass(slots=True)
class SimNotice:
    """A victim under notice: since when, and its ``evict-after`` (seconds and as written)."""

    pod: SimPod
    gang: str
    since: float
    until: float
    deadline: datetime


@dataclass(frozen=True, slots=True)
class JobResult:
    name: str
    queue: str
    submit: float
    start: float
    finish: float
    restarts: int
    evictions: int
    min_workers: int
    max_workers: int
    min_seen: int
    max_seen: int
    work: float
    work_done: float
    held_gpu_seconds: float
    scale_events: tuple[tuple[float, str], ...]
    trace_min: int = 0  # the trace's bounds (min_workers/max_workers are the policy's)
    trace_max: int = 0
    lost_work: float = 0.0  # GPU-seconds of work done again after restarts (checkpoints)
    restart_seconds: float = 0.0  # seconds it made no progress after scale events (SimSettings.restart_cost)

    @property
    def finished(self) -> bool:
        return self.finish >= 0

    @property
    def jct(self) -> float:
        return self.finish - self.submit

    @property
    def queueing(self) -> float:
        return self.start - self.submit


@dataclass(frozen=True, slots=True)
class SimResult:
    policy: str
    jobs: tuple[JobResult, ...]
    total_gpus: int
    span: tuple[float, float]
    gpu_seconds_allocated: float
    timeline: tuple[tuple[float, int], ...]
    evictions: int
    restarts: int
    cooldown_violations: int
    rejected_decisions: tuple[str, ...]
    bound_violations: int
    plan_calls: int
    plan_seconds: float
    cycles_skipped: int
    wall_seconds: float
    # GPU-seconds of workers that advanced their job (not restarting after a scale event, not
    # terminating): what ``gpu_seconds_allocated`` counts, less the time that did no work.
    gpu_seconds_busy: float = 0.0
    # GPU-seconds allocated from the first to the last submission (the drain after it left out).
    gpu_seconds_while_arriving: float = 0.0
    last_submit: float = 0.0
    # eviction notices (queues with noticeSeconds > 0): given, ended early by a checkpoint, withdrawn
    # (the gang no longer needed the victim), and the victims' GPU-seconds from notice to its end
    notices: int = 0
    notices_ended_by_checkpoint: int = 0
    notices_withdrawn: int = 0
    notice_gpu_seconds: float = 0.0
    # times a job with workerCounts came to run at another count (the peers ignore the counts)
    count_violations: int = 0

    @property
    def gpu_allocation(self) -> float:
        length = self.span[1] - self.span[0]
        return self.gpu_seconds_allocated / (self.total_gpus * length) if length > 0 else 0.0

    @property
    def gpu_busy(self) -> float:
        """The part of all GPU time over the span that advanced a job (allocation without the time
        workers held GPUs restarting after a scale event or terminating after an eviction)."""
        length = self.span[1] - self.span[0]
        return self.gpu_seconds_busy / (self.total_gpus * length) if length > 0 else 0.0

    @property
    def gpu_allocation_while_arriving(self) -> float:
        """Allocation from the first to the last submission: the same window for every policy (the
        span of ``gpu_allocation`` ends at each policy's own last completion)."""
        length = self.last_submit - self.span[0]
        return self.gpu_seconds_while_arriving / (self.total_gpus * length) if length > 0 else self.gpu_allocation
