"""The CUDA device a rank's own collectives run on (NCCL reduces CUDA tensors only).

``"cuda"`` alone means the *current* device, and a program that placed its model with
``.to(f"cuda:{local_rank}")`` without ``torch.cuda.set_device`` leaves every rank of a node on
cuda:0: NCCL then fails ("Duplicate GPU detected") or hangs in the kit's first collective. The
current device is used when the program chose one; otherwise ``LOCAL_RANK``, as torchrun numbers
a node's ranks, when that device exists (one visible GPU per process keeps cuda:0)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any


def cuda_index(current: int, device_count: int, environ: Mapping[str, str]) -> int:
    """The device index for this rank's collectives (pure: see the module)."""
    local = environ.get("LOCAL_RANK", "").strip()
    if current == 0 and local.isdigit() and 0 < int(local) < device_count:
        return int(local)
    return current


def collective_device(torch: Any, backend: str) -> Any:
    """``torch.device`` for ``backend``'s collectives: a CUDA device for NCCL, None (CPU) otherwise."""
    if backend.lower() != "nccl":
        return None
    return torch.device("cuda", cuda_index(torch.cuda.current_device(), torch.cuda.device_count(), os.environ))
