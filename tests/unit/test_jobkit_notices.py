"""The job kit does not fail silently (issue 40, item 5).

- ``NoticeWatch`` without an all-reduce agrees through torch.distributed when a process group is up
  (real torch, two gloo processes, only one of them the victim: both save at the same step and a
  collective save completes), and refuses to guess when ``WORLD_SIZE`` > 1 but no group is up;
- ``NoticeWatch.checkpoint`` does save, agree, record (global rank 0), hold, in that order;
- a missing pod-info file is said once per process;
- the docs and the example record from the same rank.
"""

from __future__ import annotations

import ast
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import textwrap
import types
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import volcano_elastic_job as kit
from volcano_elastic_job import loop, podinfo

ROOT = Path(__file__).resolve().parents[2]
KIT_SRC = ROOT / "jobkit" / "src"


@pytest.fixture(autouse=True)
def _no_torchrun_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)


# ------------------------------------------------------------------ refusing to guess
def test_several_ranks_without_a_group_is_an_error_not_a_guess(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "4")
    watch = kit.NoticeWatch(every=2, read=lambda: None)
    assert not watch.checkpoint_now(1)  # not a step it looks at: nothing to agree on yet
    with pytest.raises(kit.NoticeWatchError, match=r"WORLD_SIZE=4 .*init_process_group.*alone=True"):
        watch.checkpoint_now(2)


def test_alone_is_said_explicitly(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "4")
    notice = datetime(2026, 1, 1, tzinfo=UTC)
    watch = kit.NoticeWatch(every=1, alone=True, read=lambda: notice)
    assert watch.checkpoint_now(1) and watch.collectives == 0
    with pytest.raises(ValueError, match="contradict"):
        kit.NoticeWatch(alone=True, all_reduce_max=lambda f: f)


def _fake_dist(monkeypatch: pytest.MonkeyPatch, world: int, rank: int, backend: str) -> None:
    dist = types.ModuleType("torch.distributed")
    dist.is_available = lambda: True  # type: ignore[attr-defined]
    dist.is_initialized = lambda: True  # type: ignore[attr-defined]
    dist.get_world_size = lambda: world  # type: ignore[attr-defined]
    dist.get_rank = lambda: rank  # type: ignore[attr-defined]
    dist.get_backend = lambda: backend  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch.distributed", dist)


@pytest.mark.parametrize(("backend", "device"), [("gloo", None), ("nccl", "cuda:1")])
def test_an_up_group_is_used_on_its_backends_device(monkeypatch: pytest.MonkeyPatch, backend: str,
                                                     device: str | None) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")  # NCCL: this rank's GPU, though the current device is still 0
    fake_torch = types.ModuleType("torch")
    fake_torch.device = lambda kind, index: f"{kind}:{index}"  # type: ignore[attr-defined]
    fake_torch.cuda = types.SimpleNamespace(current_device=lambda: 0, device_count=lambda: 2)  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", fake_torch)
    _fake_dist(monkeypatch, world=2, rank=1, backend=backend)
    built: list[Any] = []
    flags: list[int] = []

    def fake_reduce_for(dev: Any = None) -> loop.AllReduceMax:
        built.append(dev)
        return lambda flag: flags.append(flag) or 1  # another rank's pod has a notice

    monkeypatch.setattr(loop, "torch_all_reduce_max", fake_reduce_for)
    watch = kit.NoticeWatch(every=1, read=lambda: None)
    assert watch.checkpoint_now(1) and watch.checkpoint_now(2)  # this rank has no notice: the max says so
    assert flags == [0, 0] and built == [device] and watch.collectives == 2  # built once
    assert loop.global_rank() == 1


def test_a_group_of_one_needs_no_collective(monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_dist(monkeypatch, world=1, rank=0, backend="gloo")
    monkeypatch.setattr(loop, "torch_all_reduce_max", lambda dev=None: pytest.fail("no collective for one rank"))
    assert not kit.NoticeWatch(every=1, read=lambda: None).checkpoint_now(1)


# ------------------------------------------------------------------ one call, in order
def test_checkpoint_saves_agrees_records_on_rank_0_then_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    notice = datetime.now(UTC)
    seen: list[datetime | None] = [notice]
    gone_after = [0]  # the eviction "comes": the notice is gone at this read after the record

    def reduce(flag: int) -> int:
        calls.append(f"reduce({flag})")
        return flag

    def record() -> bool:
        calls.append("record")
        return True

    def read() -> datetime | None:
        if "record" in calls:
            gone_after[0] -= 1
            if gone_after[0] <= 0:
                seen[0] = None
        return seen[0]

    monkeypatch.setattr(loop, "record_checkpoint", record)
    watch = kit.NoticeWatch(every=1, all_reduce_max=reduce, read=read)
    gone_after[0] = 2  # hold()'s first read still sees the notice, waits 0.5 s, then it is gone
    assert watch.checkpoint(3, lambda: calls.append("save"), grace=30)
    assert calls == ["reduce(1)", "save", "reduce(0)", "record"] and watch.held == 0.5

    calls.clear()  # an interval checkpoint: no notice, so no hold
    assert watch.checkpoint(4, lambda: calls.append("save"), also=True)
    assert calls == ["reduce(0)", "save", "reduce(0)", "record"] and watch.held == 0.0
    calls.clear()
    assert not watch.checkpoint(5, lambda: calls.append("save"))
    assert calls == ["reduce(0)"]

    # A notice that came between two looks (every=3) is answered by the interval checkpoint: the
    # victim holds after it (the recorded checkpoint ends the notice) instead of training on.
    second = notice + timedelta(seconds=1)
    seen[0] = second
    calls.clear()
    between = kit.NoticeWatch(every=3, all_reduce_max=reduce, read=read)
    gone_after[0] = 3  # the victim's own look, hold()'s first read, then gone
    assert between.checkpoint(4, lambda: calls.append("save"), also=True, grace=30)
    assert calls == ["save", "reduce(0)", "record"] and between.held == 0.5
    assert between.answered == second

    monkeypatch.setenv("RANK", "1")  # another rank saves and agrees, but does not record
    calls.clear()
    assert watch.checkpoint(6, lambda: calls.append("save"), also=True)
    assert calls == ["reduce(0)", "save", "reduce(0)"]


# ------------------------------------------------------------------ said once
def test_missing_pod_info_is_said_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                       caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(podinfo, "_said", set())
    missing = tmp_path / "nowhere" / "annotations"
    monkeypatch.setenv("VOLCANO_ELASTIC_PODINFO", str(missing))
    with caplog.at_level(logging.WARNING, logger="volcano_elastic_job"):
        assert kit.eviction_notice() is None and kit.target_workers() is None and kit.resize_request() is None
        watch = kit.NoticeWatch(every=1)
        assert not any(watch.checkpoint_now(s) for s in range(1, 5))
    said = [r.getMessage() for r in caplog.records if "pod info" in r.getMessage()]
    assert len(said) == 1, said
    assert str(missing) in said[0] and "no eviction notice" in said[0] and "VOLCANO_ELASTIC_PODINFO" in said[0]
    caplog.clear()
    missing.parent.mkdir()
    missing.write_text('volcano-elastic.io/target-workers="3"\n')  # it came: read, nothing said
    with caplog.at_level(logging.WARNING, logger="volcano_elastic_job"):
        assert kit.target_workers() == 3
    assert not caplog.records


# ------------------------------------------------------------------ which rank records
def _python_blocks(path: Path) -> list[str]:
    return re.findall(r"```python\n(.*?)```", path.read_text(), re.S)


def _record_guards(code: str) -> list[str]:
    """The test of each ``if`` that directly guards a ``record_checkpoint()`` call, as source."""
    tree = ast.parse(code)
    guards = []
    for node in ast.walk(tree):
        if isinstance(node, ast.If):
            for inner in ast.walk(ast.Module(body=node.body, type_ignores=[])):
                if isinstance(inner, ast.Call) and getattr(inner.func, "attr", getattr(inner.func, "id", "")) \
                        == "record_checkpoint":
                    guards.append(ast.unparse(node.test))
                    break
    return guards


def test_the_docs_and_the_example_record_from_global_rank_0() -> None:
    docs = [ROOT / "README.md", ROOT / "jobkit" / "README.md", ROOT / "docs" / "checkpointing.md"]
    loops = [b for d in docs for b in _python_blocks(d) if "NoticeWatch" in b]
    assert len(loops) >= 2, "the kit's README and docs/checkpointing.md show the training loop"
    for block in loops:
        assert "watch.checkpoint(" in block, block  # the one call: it records from global rank 0
        assert "local_rank" not in block and not _record_guards(block), block
    example = (ROOT / "examples" / "training" / "elastic_train.py").read_text()
    guards = _record_guards(example)
    assert guards and all(re.fullmatch(r"(rank|dist\.get_rank\(\)) == 0", g) for g in guards), guards
    assert "local_rank() == 0" not in example


# ------------------------------------------------------------------ real torch
WORKER = textwrap.dedent("""
    import json, os, sys, threading, time
    from datetime import datetime, timedelta, timezone
    import torch, torch.distributed as dist
    import volcano_elastic_job as kit
    from volcano_elastic_job import loop

    out = sys.argv[1]
    rank = int(os.environ["RANK"])
    events = []
    def note(what, **kw):
        events.append(dict(what=what, t=time.time(), **kw))
    loop.record_checkpoint = lambda: note("record") or True
    dist.init_process_group("gloo")
    watch = kit.NoticeWatch(every=3)  # no all_reduce_max: the group is up, the kit uses it
    notice = datetime.now(timezone.utc) + timedelta(minutes=5)
    def read():
        return notice if rank == 1 and os.path.exists(out + ".notice") else None
    watch.read = read
    def withdraw_later():  # the notice goes 1 s into the victim's hold (as an eviction would end it)
        time.sleep(1.0)
        os.remove(out + ".notice")
    w = torch.zeros(1)
    for step in range(1, 13):
        g = torch.ones(1)
        dist.all_reduce(g)  # a training step's collective
        w += g
        if step == 4 and rank == 1:
            open(out + ".notice", "w").close()  # only rank 1's pod gets the notice
        dist.barrier()
        def save(step=step):
            note("save", step=step)
            t = torch.tensor([float(step)])
            dist.all_reduce(t)  # a collective save: hangs unless every rank saves
            note("saved", step=step)
        if rank == 1 and step == 6:
            threading.Thread(target=withdraw_later, daemon=True).start()
        if watch.checkpoint(step, save):
            note("answered", step=step)
    json.dump(events, open(f"{out}.{rank}.json", "w"))
    dist.destroy_process_group()
""")


def _torch_python() -> str | None:
    """A Python with torch (Debian's python3-torch on the build machine), or None."""
    for candidate in ("/usr/bin/python3", shutil.which("python3")):
        if candidate and subprocess.run([candidate, "-c", "import torch.distributed"],
                                        capture_output=True, timeout=120).returncode == 0:
            return candidate
    return None


def test_real_torch_every_rank_answers_one_ranks_notice_without_an_all_reduce_given(tmp_path: Path) -> None:
    python = _torch_python()
    if python is None:
        pytest.skip("no Python with torch here (Debian's python3-torch: hack/install-node-packages.sh)")
    script = tmp_path / "worker.py"
    script.write_text(WORKER)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = str(tmp_path / "run")
    procs = []
    for rank in (0, 1):
        env = {**os.environ, "PYTHONPATH": str(KIT_SRC), "RANK": str(rank), "WORLD_SIZE": "2",
               "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "VOLCANO_ELASTIC_PODINFO": out + ".none"}
        procs.append(subprocess.Popen([python, str(script), out], env=env, stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    try:
        logs = [p.communicate(timeout=120)[0] for p in procs]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail("the ranks hung: a collective save ran on only some of them")
    assert [p.returncode for p in procs] == [0, 0], logs
    ev = {r: json.loads(Path(f"{out}.{r}.json").read_text()) for r in (0, 1)}
    answered = {r: [e["step"] for e in ev[r] if e["what"] == "answered"] for r in (0, 1)}
    assert answered[0] == answered[1] == [6], answered  # the first look (every 3) after the notice, both ranks
    assert [e["what"] for e in ev[0]] == ["save", "saved", "record", "answered"]  # rank 0 records ...
    assert [e["what"] for e in ev[1]] == ["save", "saved", "answered"]  # ... and only rank 0
    record = next(e["t"] for e in ev[0] if e["what"] == "record")
    assert record >= max(e["t"] for r in (0, 1) for e in ev[r] if e["what"] == "saved")  # after every rank saved
    held = next(e["t"] for e in ev[1] if e["what"] == "answered") - next(e["t"] for e in ev[1] if e["what"] == "saved")
    assert held >= 0.5, held  # the victim held until its notice went


# ------------------------------------------------------------------ leaving in place
def _annotations(path: Path, values: dict[str, str]) -> None:
    path.write_text("".join(f"{k}={json.dumps(v)}\n" for k, v in sorted(values.items())))


def test_a_pod_leaving_in_place_is_no_checkpoint_notice(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In place, the agent's leaving pods carry an ``evict-after`` too (how long it waits for them to
    have left). NoticeWatch must not answer it with a checkpoint and a hold: the survivors keep the
    state in memory, and a held rank would stall the whole group (issue 39)."""
    notes = tmp_path / "annotations"
    monkeypatch.setenv(podinfo.ANNOTATIONS_ENV, str(notes))
    after = "2026-11-29T05:00:00Z"
    _annotations(notes, {podinfo.EVICT_AFTER: after, podinfo.RESIZE_GENERATION: "2", podinfo.LEAVING: "2",
                         podinfo.TARGET_WORKERS: "2"})
    assert podinfo.eviction_notice() is not None  # the notice is there ...
    assert podinfo.checkpoint_notice() is None  # ... and is not one to checkpoint for
    watch = kit.NoticeWatch(every=1, alone=True)
    assert watch.pending() is None and not watch.checkpoint_now(1)
    # a leaving mark of an older event is no leave now: the notice is a plain one again
    _annotations(notes, {podinfo.EVICT_AFTER: after, podinfo.RESIZE_GENERATION: "3", podinfo.LEAVING: "2"})
    assert podinfo.checkpoint_notice() == podinfo.eviction_notice() is not None
    assert kit.NoticeWatch(every=1, alone=True).checkpoint_now(1)
    # a survivor of the event (not leaving) with a notice of its own still checkpoints
    _annotations(notes, {podinfo.EVICT_AFTER: after, podinfo.RESIZE_GENERATION: "2"})
    assert kit.NoticeWatch(every=1, alone=True).checkpoint_now(1)
