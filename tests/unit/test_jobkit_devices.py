"""The kit's collectives on NCCL use this rank's GPU, not cuda:0 for every rank of a node (review of
issue 40's NoticeWatch: ``"cuda"`` is the current device, which a program that never called
``torch.cuda.set_device`` leaves at 0)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from volcano_elastic_job import devices


@pytest.mark.parametrize(("current", "count", "env", "want"), [
    (0, 8, {"LOCAL_RANK": "3"}, 3),   # model moved with .to(cuda:3), current device never set
    (5, 8, {"LOCAL_RANK": "3"}, 5),   # the program chose its device: kept
    (0, 1, {"LOCAL_RANK": "3"}, 0),   # one visible GPU per process (CUDA_VISIBLE_DEVICES): cuda:0
    (0, 8, {}, 0),                    # no torchrun numbering
    (0, 8, {"LOCAL_RANK": "x"}, 0),   # not a number: the current device
    (0, 4, {"LOCAL_RANK": "4"}, 0),   # no such device
])
def test_cuda_index(current: int, count: int, env: dict[str, str], want: int) -> None:
    assert devices.cuda_index(current, count, env) == want


def _fake_torch(current: int, count: int) -> Any:
    return SimpleNamespace(device=lambda kind, index: f"{kind}:{index}",
                           cuda=SimpleNamespace(current_device=lambda: current, device_count=lambda: count))


def test_nccl_gets_the_local_ranks_device_and_gloo_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOCAL_RANK", "2")
    assert devices.collective_device(_fake_torch(0, 4), "nccl") == "cuda:2"
    assert devices.collective_device(_fake_torch(0, 4), "NCCL") == "cuda:2"
    assert devices.collective_device(_fake_torch(0, 4), "gloo") is None


def test_notice_watch_and_in_place_use_it() -> None:
    """Both collectives of the kit go through devices.collective_device (no bare "cuda" left)."""
    import inspect

    from volcano_elastic_job import inplace, loop

    for module in (loop, inplace):
        text = inspect.getsource(module)
        assert "collective_device(" in text, module.__name__
        assert '"cuda" if' not in text, module.__name__
