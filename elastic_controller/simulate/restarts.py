"""What a restart costs: the restart penalty and the work lost since the last checkpoint.

A job checkpoints after every ``interval`` seconds of progress (time in which it advanced, not
time spent restarting). Every restart (an eviction or an added worker, whatever the policy; all
changes at the same instant count once) resumes from the last checkpoint: the work done since
then is done again. Between two restarts a job runs at one rate (its rate only changes when its
workers change, which is a restart), so the work since the last checkpoint is that rate times the
progress time since it. ``interval`` 0 turns checkpoints off (nothing is lost).
"""

from __future__ import annotations

import math

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
