"""volcano-elastic's job kit: what training code does for volcano-elastic, in two calls.

- :func:`record_checkpoint` after each durable checkpoint (writes this pod's
  ``volcano-elastic.io/last-checkpoint-time``; logs, never raises, when it cannot);
- :class:`NoticeWatch` in the training loop: ``watch.checkpoint(step, save)`` on every rank -- when
  any rank's pod got an eviction notice, every rank saves at the same step, global rank 0 records
  it, the victim waits for its eviction (one collective every ``every`` steps, through
  torch.distributed when a process group is up; :class:`NoticeWatchError` rather than a guess);

- :class:`InPlace` (opt-in, ``volcano-elastic.io/resize: in-place``): the processes survive a
  planned scale event; the group re-forms at a step boundary and newcomers get the state;

plus :func:`eviction_notice` (the pending ``evict-after``), :func:`target_workers` (the size the
agent announced), the world size for learning-rate and batch scaling, and a torchrun rendezvous
that completes as soon as the announced size has joined (``python -m volcano_elastic_job.run``).

Standard library only: it imports torch only inside :func:`torch_all_reduce_max` and the
rendezvous, which run where torch is installed anyway.
"""

from __future__ import annotations

from .checkpoint import record_checkpoint
from .inplace import InPlace, ResizeError, announce_left
from .loop import NoticeWatch, NoticeWatchError, torch_all_reduce_max
from .podinfo import (
    ANNOTATIONS_FILE,
    EVICT_AFTER,
    LAST_CHECKPOINT_TIME,
    LEAVING,
    LEFT,
    RESIZE,
    RESIZE_GENERATION,
    TARGET_WORKERS,
    eviction_notice,
    read_annotations,
    resize_request,
    target_workers,
)
from .world import local_rank, rank, restart_count, scale_lr, split_batch, world_size

__version__ = "0.1.0"

__all__ = [
    "ANNOTATIONS_FILE",
    "EVICT_AFTER",
    "LAST_CHECKPOINT_TIME",
    "LEAVING",
    "LEFT",
    "RESIZE",
    "RESIZE_GENERATION",
    "TARGET_WORKERS",
    "InPlace",
    "NoticeWatch",
    "NoticeWatchError",
    "ResizeError",
    "announce_left",
    "eviction_notice",
    "local_rank",
    "rank",
    "read_annotations",
    "record_checkpoint",
    "resize_request",
    "restart_count",
    "scale_lr",
    "split_batch",
    "target_workers",
    "torch_all_reduce_max",
    "world_size",
]
