"""The world this process trains in, from the environment torchrun sets, and the scaling rules
that keep training the same when volcano-elastic changes the worker count."""

from __future__ import annotations

import os


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{name}={value!r} is not a whole number") from None


def world_size() -> int:
    """How many processes train now (``WORLD_SIZE``; 1 when not under torchrun). It changes at
    every scale event: read it at each (re)start, never cache it across one."""
    return _env_int("WORLD_SIZE", 1)


def rank() -> int:
    """This process's global rank (``RANK``; 0 when not under torchrun)."""
    return _env_int("RANK", 0)


def local_rank() -> int:
    """This process's rank on its node (``LOCAL_RANK``), e.g. its GPU index."""
    return _env_int("LOCAL_RANK", 0)


def restart_count() -> int:
    """How many times torchrun restarted this worker group (``TORCHELASTIC_RESTART_COUNT``):
    each scale event is one, and a failed peer uses up one of ``--max-restarts``."""
    return _env_int("TORCHELASTIC_RESTART_COUNT", 0)


def scale_lr(base_lr: float, base_world_size: int, world: int | None = None) -> float:
    """The learning rate for ``world`` processes (default: now) when ``base_lr`` was tuned for
    ``base_world_size`` with a fixed per-process batch: the linear scaling rule."""
    if base_world_size < 1:
        raise ValueError(f"base_world_size must be at least 1, got {base_world_size}")
    return base_lr * (world if world is not None else world_size()) / base_world_size


def split_batch(global_batch: int, world: int | None = None) -> int:
    """Each process's batch for a fixed ``global_batch`` (the learning rate then stays as tuned).
    Raises ValueError when ``global_batch`` does not split evenly: declare the counts that divide it
    with the ``volcano-elastic.io/worker-counts`` annotation."""
    n = world if world is not None else world_size()
    if n < 1:
        raise ValueError(f"world size must be at least 1, got {n}")
    if global_batch % n:
        raise ValueError(f"a global batch of {global_batch} does not split over {n} processes; allow only "
                         "worker counts that divide it (volcano-elastic.io/worker-counts)")
    return global_batch // n
