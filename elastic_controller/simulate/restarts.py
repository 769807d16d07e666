"""What a restart costs: the stall of the scale event (``RestartCost``) and the work lost since the
last checkpoint.

A job checkpoints after every ``interval`` seconds of progress (time in which it advanced, not
time spent restarting). Every restart (an eviction or an added worker, whatever the policy; all
changes at the same instant count once) resumes from the last checkpoint: the work done since
then is done again. Between two restarts a job runs at one rate (its rate only changes when its
workers change, which is a restart), so the work since the last checkpoint is that rate times the
progress time since it. ``interval`` 0 turns checkpoints off (nothing is lost).
"""

from __future__ import annotations

import math
import zlib
from dataclasses import dataclass

from .state import SimJob


def advance(job: SimJob, seconds: float, interval: float) -> None:
    """``job`` made ``seconds`` of progress: checkpoints every ``interval`` seconds of it."""
    if interval <= 0 or seconds <= 0:
        return
    job.since_checkpoint = math.fmod(job.since_checkpoint + seconds, interval)


def checkpoint_now(job: SimJob) -> None:
    """``job`` saved a checkpoint just now (under an eviction notice, before its victims leave): a
    restart from here loses nothing. Call after settling its progress."""
    job.since_checkpoint = 0.0


def lose_since_checkpoint(job: SimJob, interval: float) -> float:
    """The job restarts from its last checkpoint: its work since then is to be done again.

    Returns the GPU-seconds of worker time that did the lost work (called before the job's rate
    and busy GPUs change to the new workers).
    """
    if interval <= 0 or job.since_checkpoint <= 0 or job.rate <= 0:
        job.since_checkpoint = 0.0
        return 0.0
    lost = min(job.work_done, job.rate * job.since_checkpoint)
    gpu_seconds = job.busy_gpus * lost / job.rate
    job.work_done -= lost
    job.work_left += lost
    job.lost_work += lost
    job.since_checkpoint = 0.0
    return gpu_seconds


# --- what one scale event stalls a job -------------------------------------------------------------

RESTART_COST_MODELS = ("torchrun", "kit", "fixed")
# The fixed restart part (process start, imports, model build, checkpoint load) by default: a GPU job
# of about a billion parameters (measured on one H200: 85 M parameters 11.8-13.7 s, 1.2 B 22.9-23.4 s,
# 6.4 B 63.7-64.7 s; torch on CPU 2.3-7.4 s). docs/simulate.md, "What a scale event costs".
DEFAULT_RESTART_SECONDS = 25.0


@dataclass(frozen=True, slots=True)
class RestartCost:
    """Seconds without progress after a scale event, by what the event is (every worker restarts).

    ``torchrun`` (torchrun's own c10d rendezvous): detection, plus the removed node's keep-alive
    expiry after a removal, plus ``last_call`` when the new size stays below the job's max (the
    rendezvous waits for more nodes) or ``at_max`` when it reaches max, plus ``restart`` (spawn,
    imports, model build, checkpoint load). ``kit`` (the job kit's launcher, which completes a round
    as soon as the size the agent announced has joined, and whose SIGTERMed agent leaves the
    rendezvous): detection, plus ``kit_removal`` after a removal (the survivors notice their failed
    peer), plus ``at_max``, plus ``restart``. ``fixed``: ``restart`` after every event (the old
    ``--restart-penalty``). The work since the last checkpoint is lost on top of it (``lose_since_
    checkpoint``). The constants are the medians measured with bench/rendezvous_stall.py (torch
    1.13.1, CPU) and agree with torch 2.15's (issue 29).
    """

    model: str = "torchrun"
    restart: float = DEFAULT_RESTART_SECONDS
    detection: float = 1.5
    keepalive: float = 12.5  # torchrun: the dead node's keep-alive expires (3 x 5 s at most)
    last_call: float = 30.0  # torchrun: c10d last_call_timeout, waited below max
    at_max: float = 0.5  # the rendezvous round itself when nothing more is waited for
    kit_removal: float = 5.0  # kit: the survivors' agents notice the failed peer (monitor interval)
    # Issue 39: this fraction of the jobs resizes in place (the job kit's InPlace: a planned scale event
    # re-forms the process group, no process restarts, nothing is reloaded, no work is lost) and
    # stalls ``in_place`` seconds per event instead (the real tier: 0.15-0.22 s on CPU, torch 1.13;
    # the agent's wait for the leaving ranks and a grow's new pods' warm-up overlap training). Which
    # jobs: a hash of the job's id, so every policy and every run resizes the same jobs in place.
    in_place_fraction: float = 0.0
    in_place: float = 2.0

    def __post_init__(self) -> None:
        if self.model not in RESTART_COST_MODELS:
            raise ValueError(f"restart cost model {self.model!r}: one of {', '.join(RESTART_COST_MODELS)}")
        for name in ("restart", "detection", "keepalive", "last_call", "at_max", "kit_removal", "in_place"):
            if not getattr(self, name) >= 0:
                raise ValueError(f"restart cost {name} must not be negative")
        if not 0 <= self.in_place_fraction <= 1:
            raise ValueError("the fraction of jobs resized in place is between 0 and 1")

    def resizes_in_place(self, job_id: int | str) -> bool:
        """Whether the job ``job_id`` is one of the ``in_place_fraction`` resized in place."""
        if self.in_place_fraction <= 0:
            return False
        return zlib.crc32(str(job_id).encode()) % 10_000 < self.in_place_fraction * 10_000

    def seconds(self, removed: bool, size: int, max_size: int) -> float:
        """The stall of a scale event to ``size`` workers of at most ``max_size``; ``removed``: a
        worker left (a scale-down, an eviction)."""
        if self.model == "fixed":
            return self.restart
        wait = self.detection
        if self.model == "torchrun":
            if removed:
                wait += self.keepalive
            wait += self.last_call if size < max_size else self.at_max
        else:
            if removed:
                wait += self.kit_removal
            wait += self.at_max
        return wait + self.restart


def fixed_cost(seconds: float) -> RestartCost:
    """The same stall after every scale event (``--restart-penalty``)."""
    return RestartCost(model="fixed", restart=seconds)


def describe(cost: RestartCost) -> str:
    """One line for a run's header: the model and what an event of each kind stalls a job."""
    if cost.model == "fixed" and cost.in_place_fraction <= 0:
        return f"restart penalty {cost.restart:g}s per scale event (fixed)"
    grow_below, grow_max = cost.seconds(False, 1, 2), cost.seconds(False, 2, 2)
    shrink = cost.seconds(True, 1, 2)
    in_place = (f"; {cost.in_place_fraction:.0%} of jobs resize in place ({cost.in_place:g}s per event, "
                "no work lost)") if cost.in_place_fraction > 0 else ""
    return (f"restart cost {cost.model} (restart {cost.restart:g}s): grow below max {grow_below:g}s, "
            f"grow to max {grow_max:g}s, shrink {shrink:g}s{in_place}")
