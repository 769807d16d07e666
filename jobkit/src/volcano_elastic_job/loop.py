"""When the training loop should checkpoint because of an eviction notice.

Only the victim's pod carries the notice, but a checkpoint is collective: every rank must decide
the same at the same step. :class:`NoticeWatch` looks at the notice every ``every`` steps and, when
given an all-reduce (max), agrees on it with one tiny collective at those steps only.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from .podinfo import eviction_notice

AllReduceMax = Callable[[int], int]


class NoticeWatch:
    """``if watch.checkpoint_now(step): save_checkpoint(); record_checkpoint()``.

    ``every``: look every that many steps (the notice is answered at most ``every`` steps late, so
    keep ``every * step time`` well below the queue's ``noticeSeconds``). ``all_reduce_max``: a
    function every rank calls with its flag (0 or 1) that returns the maximum over the ranks, e.g.
    :func:`torch_all_reduce_max`; None for a single process, or when each rank decides alone.
    ``read``: where the notice comes from (tests)."""

    def __init__(self, every: int = 10, all_reduce_max: AllReduceMax | None = None, *,
                 read: Callable[[], datetime | None] = eviction_notice) -> None:
        if every < 1:
            raise ValueError(f"every must be at least 1, got {every}")
        self.every = every
        self.all_reduce_max = all_reduce_max
        self.read = read
        self.answered: datetime | None = None  # the notice a checkpoint was already made for
        self.collectives = 0  # how many all-reduces this watch made (one per `every` steps)
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
        notice = self.pending()
        flag = 1 if notice is not None else 0
        if self.all_reduce_max is not None:
            flag = int(self.all_reduce_max(flag))
            self.collectives += 1
        self._hold_for = None
        if flag:
            if notice is not None:
                self.answered = notice
                self._hold_for = notice
            return True
        return False

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
        if notice is None:
            return 0.0
        waited = 0.0
        while True:
            current = self.read()
            if current is None or current != notice:  # withdrawn (or replaced by a new notice)
                return waited
            if (now() - notice).total_seconds() > grace:
                return waited
            sleep(poll)
            waited += poll


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
