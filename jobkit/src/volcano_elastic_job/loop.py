"""When the training loop should checkpoint because of an eviction notice.

Only the victim's pod carries the notice, but a checkpoint is collective: every rank must decide
the same at the same step. :class:`NoticeWatch` looks at the notice every ``every`` steps and
agrees on it with one tiny all-reduce (max) at those steps only: the one it is given, else
torch.distributed's on the default group when a process group of more than one rank is up. It
refuses to guess (:class:`NoticeWatchError`) when ``WORLD_SIZE`` says there are several ranks but
no process group is up: each rank deciding alone makes only the victim's ranks save, and a
collective save then hangs. :meth:`NoticeWatch.checkpoint` does the whole answer in one call:
save, agree that every rank saved, record (global rank 0), hold (the victim).
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from .checkpoint import record_checkpoint
from .devices import collective_device
from .podinfo import checkpoint_notice

AllReduceMax = Callable[[int], int]
log = logging.getLogger("volcano_elastic_job")


class NoticeWatchError(RuntimeError):
    """The ranks have no way to agree on a notice, and deciding alone would hang a collective save."""


def _torch_group() -> tuple[Any, int, int, str] | None:
    """``(torch.distributed, world size, rank, backend)`` of the default process group when one is
    up; None otherwise. Never imports torch: a process that has no group has not imported it."""
    dist: Any = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    return dist, int(dist.get_world_size()), int(dist.get_rank()), str(dist.get_backend())


def _env_world() -> int:
    try:
        return int(os.environ.get("WORLD_SIZE") or 1)
    except ValueError:
        return 1


def global_rank() -> int:
    """This process's rank in the default process group when one is up, else ``RANK`` (0 alone)."""
    group = _torch_group()
    if group is not None:
        return group[2]
    try:
        return int(os.environ.get("RANK") or 0)
    except ValueError:
        return 0


class NoticeWatch:
    """``watch.checkpoint(step, save)`` at every step on every rank (or the parts:
    ``if watch.checkpoint_now(step): save(); record_checkpoint() on rank 0; watch.hold()``).

    ``every``: look every that many steps (the notice is answered at most ``every`` steps late, so
    keep ``every * step time`` well below the queue's ``noticeSeconds``). ``all_reduce_max``: a
    function every rank calls with its flag (0 or 1) that returns the maximum over the ranks, e.g.
    :func:`torch_all_reduce_max`; None: torch.distributed's all-reduce on the default group when
    a group of more than one rank is up at that step, nothing for a single process, and
    :class:`NoticeWatchError` when ``WORLD_SIZE`` > 1 but no group is up. ``alone=True``: each
    rank decides alone (only for a job whose checkpoint is not collective: every rank saves its
    own full copy). ``read``: where the notice comes from (tests; by default the pod's notice, none
    while the pod leaves in place: :func:`~volcano_elastic_job.podinfo.checkpoint_notice`)."""

    def __init__(self, every: int = 10, all_reduce_max: AllReduceMax | None = None, *, alone: bool = False,
                 read: Callable[[], datetime | None] = checkpoint_notice) -> None:
        if every < 1:
            raise ValueError(f"every must be at least 1, got {every}")
        if alone and all_reduce_max is not None:
            raise ValueError("alone=True and an all_reduce_max contradict each other: pass one of them")
        self.every = every
        self.all_reduce_max = all_reduce_max
        self.alone = alone
        self.read = read
        self._torch_reduce: tuple[str, AllReduceMax] | None = None  # (backend, reduce) built once
        self.answered: datetime | None = None  # the notice a checkpoint was already made for
        self.collectives = 0  # how many all-reduces this watch made (one per `every` steps)
        self.held = 0.0  # the seconds the last hold() waited
        self._hold_for: datetime | None = None  # this pod's notice that the last True answered

    def pending(self) -> datetime | None:
        """This pod's notice if it is new (no checkpoint answered it yet), else None."""
        notice = self.read()
        return notice if notice is not None and notice != self.answered else None

    def checkpoint_now(self, step: int) -> bool:
        """True on every rank, at the same step, when some rank's pod has a notice not yet answered.

        Call it at every step on every rank (it does nothing between the ``every``-th steps). A True
        marks this rank's notice as answered: checkpoint (and :func:`record_checkpoint`) when it
        says so, and it stays False until a new notice comes."""
        if step % self.every != 0:
            return False
        reduce = self.reducer()
        notice = self.pending()
        flag = 1 if notice is not None else 0
        if reduce is not None:
            flag = int(reduce(flag))
            self.collectives += 1
        self._hold_for = None
        if flag:
            if notice is not None:
                self.answered = notice
                self._hold_for = notice
            return True
        return False

    def reducer(self) -> AllReduceMax | None:
        """The all-reduce (max) the ranks agree with now; None when this process decides alone.
        Raises :class:`NoticeWatchError` rather than guess (see the class)."""
        if self.all_reduce_max is not None:
            return self.all_reduce_max
        if self.alone:
            return None
        group = _torch_group()
        if group is not None:
            _, world, _, backend = group
            if world <= 1:
                return None
            if self._torch_reduce is None or self._torch_reduce[0] != backend:
                nccl = backend.lower() == "nccl"  # NCCL reduces CUDA tensors only: this rank's (devices.py)
                device = collective_device(importlib.import_module("torch"), backend) if nccl else None
                self._torch_reduce = (backend, torch_all_reduce_max(device))
                log.info("volcano-elastic: NoticeWatch agrees through torch.distributed (%s, %d ranks)",
                         backend, world)
            return self._torch_reduce[1]
        world = _env_world()
        if world > 1:
            raise NoticeWatchError(
                f"NoticeWatch: WORLD_SIZE={world} but no torch.distributed process group is up, so the ranks "
                "cannot agree on an eviction notice: only the victim's ranks would checkpoint and a collective "
                "save would hang. Call torch.distributed.init_process_group() before the first checkpoint_now(), "
                "or pass all_reduce_max= (an int -> int maximum over the ranks), or alone=True when every rank "
                "saves its own full checkpoint")
        return None

    def checkpoint(self, step: int, save: Callable[[], object], *, also: bool = False, record: bool = True,
                   grace: float = 60.0) -> bool:
        """The whole answer to a notice, in order, at ``step`` on every rank: when
        :meth:`checkpoint_now` says so (or ``also``, e.g. ``step % 500 == 0``: the same on every
        rank), call ``save()`` (collective or per rank, to shared storage), wait until every rank
        has returned from it (one all-reduce), record it on this pod from global rank 0 only
        (:func:`record_checkpoint`; ``record=False`` to skip: the agent evicts the victim at once
        once a checkpoint is recorded, so never before every rank saved), then :meth:`hold` on the
        victim's rank. Returns whether it saved."""
        noticed = self.checkpoint_now(step)
        if not (noticed or also):
            return False
        save()
        reduce = self.reducer()
        if reduce is not None:
            reduce(0)  # a barrier: every rank's part of the checkpoint is written
            self.collectives += 1
        if record and global_rank() == 0:
            record_checkpoint()
        if not noticed and self._hold_for is None:
            # A checkpoint that no look at the notice asked for (``also`` between two looks) answers
            # this pod's notice all the same: the recorded checkpoint ends it, so hold here too
            # instead of training steps that the restart would do again.
            mine = self.pending()
            if mine is not None:
                self.answered = self._hold_for = mine
        self.hold(grace)
        return True

    @property
    def victim(self) -> bool:
        """Whether this rank's pod had the notice that the last True of :meth:`checkpoint_now`
        answered (so :meth:`hold` will wait)."""
        return self._hold_for is not None

    def hold(self, grace: float = 60.0, *, poll: float = 0.5, sleep: Callable[[float], None] = time.sleep,
             now: Callable[[], datetime] = lambda: datetime.now(timezone.utc)) -> float:
        """Call right after the checkpoint that :meth:`checkpoint_now` asked for: on the rank whose pod
        has the notice, wait for the eviction instead of training on (every step after the checkpoint
        would be done again after the restart). The eviction follows the recorded checkpoint within
        one agent cycle, or comes at the notice's time at the latest; its SIGTERM ends the wait. It
        returns (and training goes on) when the notice is withdrawn, or ``grace`` seconds after the
        notice's time if no eviction came. The other ranks return at once and wait in their next
        collective. Returns the seconds waited."""
        notice, self._hold_for = self._hold_for, None
        self.held = 0.0
        if notice is None:
            return 0.0
        while True:
            current = self.read()
            if current is None or current != notice:  # withdrawn (or replaced by a new notice)
                return self.held
            if (now() - notice).total_seconds() > grace:
                return self.held
            sleep(poll)
            self.held += poll


def torch_all_reduce_max(device: Any = None) -> AllReduceMax:
    """An ``all_reduce_max`` for :class:`NoticeWatch` on torch.distributed's default group (one
    int tensor; on ``device``, e.g. ``"cuda"`` for NCCL, CPU for gloo). Imports torch when called."""
    torch: Any = importlib.import_module("torch")
    dist: Any = importlib.import_module("torch.distributed")

    def reduce(flag: int) -> int:
        t = torch.tensor([flag], dtype=torch.int32, device=device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return int(t.item())

    return reduce
