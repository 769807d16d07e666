"""The job kit's in-place resize, its pure parts (torch is not needed): the contract read from the
downward-API file, the decision every rank takes from the agreed vector, the store's address and
host, the optimizer-state skeleton, the 'left' acknowledgement; and bench/inplace_resize.py's
reading of a progress log (stall, steps redone, in place or restarted). The processes themselves
(gloo, torch) are tested in tests/real/test_inplace_resize.py."""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
import volcano_elastic_job as kit
from volcano_elastic_job import inplace
from volcano_elastic_job.inplace import ResizeError, decide, first_size, hosts_store, store_address

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import inplace_resize as bench


def write(path: Path, values: dict[str, str]) -> None:
    path.write_text("".join(f"{k}={json.dumps(v)}\n" for k, v in values.items()))


@pytest.fixture
def podinfo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "annotations"
    monkeypatch.setenv("VOLCANO_ELASTIC_PODINFO", str(path))
    return path


# ------------------------------------------------------------------ the contract
def test_the_contract_names_are_stable() -> None:
    assert (kit.RESIZE, kit.RESIZE_GENERATION, kit.LEAVING, kit.LEFT) == (
        "volcano-elastic.io/resize", "volcano-elastic.io/resize-generation",
        "volcano-elastic.io/leaving", "volcano-elastic.io/left")


def test_resize_request_reads_generation_target_and_leaving(podinfo: Path) -> None:
    assert kit.resize_request() is None  # no file
    write(podinfo, {kit.TARGET_WORKERS: "2"})
    assert kit.resize_request() is None  # a target alone is no in-place event
    write(podinfo, {kit.RESIZE_GENERATION: "3", kit.TARGET_WORKERS: "2", kit.LEAVING: "3"})
    assert kit.resize_request() == (3, 2, True)
    write(podinfo, {kit.RESIZE_GENERATION: "4", kit.TARGET_WORKERS: "4", kit.LEAVING: "3"})
    assert kit.resize_request() == (4, 4, False)  # it left at 3; event 4 does not take it
    write(podinfo, {kit.RESIZE_GENERATION: "5", kit.TARGET_WORKERS: "zero"})
    assert kit.resize_request() == (5, None, False)


def test_an_unreadable_generation_is_ignored_loudly(podinfo: Path, caplog: pytest.LogCaptureFixture) -> None:
    write(podinfo, {kit.RESIZE_GENERATION: "two", kit.LEAVING: "two"})
    with caplog.at_level(logging.WARNING, logger="volcano_elastic_job"):
        assert kit.resize_request() is None
    assert "unreadable" in caplog.text


# ------------------------------------------------------------------ the decision
def vector(world: int, leaving: list[int], gens: list[int], targets: list[int], ready: int) -> list[int]:
    """What the all-reduce (max) gives when rank r saw gens[r] and targets[r]."""
    v = [1 if r in leaving else 0 for r in range(world)]
    return [*v, max(gens), -min(gens), max(targets), -min(targets), ready]


def test_a_shrink_everybody_saw_is_done_now() -> None:
    assert decide(vector(4, [2, 3], [1] * 4, [2] * 4, 0), 4, applied=0) == (1, 2, [2, 3], 0)


@pytest.mark.parametrize(("why", "v"), [
    ("a rank has not seen the event", vector(4, [2, 3], [1, 1, 1, 0], [2, 2, 2, 0], 0)),
    ("the ranks saw different targets", vector(4, [3], [1] * 4, [3, 3, 2, 3], 0)),
    ("a leaver has not seen its notice", vector(4, [3], [1] * 4, [2] * 4, 0)),
    ("the store host would leave", vector(4, [0, 3], [1] * 4, [2] * 4, 0)),
    ("no newcomer is ready yet", vector(2, [], [2, 2], [4, 4], 1)),
])
def test_no_resize_until_it_can_be_done_the_same_on_every_rank(why: str, v: list[int]) -> None:
    world = len(v) - 5
    assert decide(v, world, applied=0) is None, why


def test_an_event_already_done_is_not_done_again() -> None:
    assert decide(vector(4, [], [1] * 4, [2] * 4, 0), 4, applied=1) is None


def test_a_grow_admits_just_the_newcomers_it_needs() -> None:
    assert decide(vector(2, [], [2, 2], [4, 4], 3), 2, applied=1) == (2, 4, [], 2)


def test_a_shrink_and_a_grow_at_once() -> None:
    assert decide(vector(3, [2], [1] * 3, [3] * 3, 1), 3, applied=0) == (1, 3, [2], 1)


# ------------------------------------------------------------------ where the store is, who hosts it
def test_store_address_order() -> None:
    assert store_address({"VOLCANO_ELASTIC_STORE": "h:1", "PET_RDZV_ENDPOINT": "r:2"}) == ("h", 1)
    assert store_address({"PET_RDZV_ENDPOINT": "job-worker-0:23456"}) == ("job-worker-0", 23456)
    assert store_address({"MASTER_ADDR": "m"}) == ("m", inplace.DEFAULT_PORT)
    assert store_address({"VOLCANO_ELASTIC_STORE": "[::1]:5"}) == ("::1", 5)
    with pytest.raises(ResizeError, match="VOLCANO_ELASTIC_STORE"):
        store_address({})
    with pytest.raises(ResizeError, match="port"):
        store_address({"VOLCANO_ELASTIC_STORE": "h:x"})


def test_the_store_host_is_the_named_pod_or_the_endpoints_pod() -> None:
    assert hosts_store("job-worker-0.ns.svc", "job-worker-0", {})
    assert not hosts_store("job-worker-0.ns.svc", "job-worker-1", {})
    assert hosts_store("127.0.0.1", "w0", {"VOLCANO_ELASTIC_STORE_POD": "w0"})
    assert not hosts_store("w0", "w0", {"VOLCANO_ELASTIC_STORE_POD": "w1"})


def test_first_size() -> None:
    assert first_size({"VOLCANO_ELASTIC_WORKERS": "3"}, lambda: 4) == 3
    assert first_size({}, lambda: 4) == 4
    assert first_size({"PET_NNODES": "2:6"}, lambda: None) == 2
    with pytest.raises(ResizeError, match="unknown"):
        first_size({}, lambda: None)


# ------------------------------------------------------------------ the state a newcomer gets
class FakeTensor:
    def __init__(self, shape: list[int], dtype: str = "torch.float32") -> None:
        self.shape, self.dtype = shape, dtype


def test_optimizer_state_travels_as_a_skeleton_and_tensors() -> None:
    a, b = FakeTensor([3]), FakeTensor([2, 2], "torch.int64")
    state: dict[str, Any] = {"state": {0: {"momentum_buffer": a, "step": 7}, 1: {"exp": b}},
                             "param_groups": [{"lr": 0.1, "params": [0, 1]}]}
    out: list[Any] = []
    skeleton = inplace.split_tensors(state, FakeTensor, out)
    assert out == [a, b]
    json.dumps(skeleton)  # picklable, plain data: no tensor left in it
    assert [p["shape"] for p in inplace.placeholders(skeleton)] == [[3], [2, 2]]
    assert [p["dtype"] for p in inplace.placeholders(skeleton)] == ["float32", "int64"]
    assert inplace.join_tensors(skeleton, out) == state


# ------------------------------------------------------------------ "left"
def test_announce_left_to_a_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VOLCANO_ELASTIC_ANNOUNCE_DIR", str(tmp_path))
    assert kit.announce_left(3, pod="w2")
    assert (tmp_path / "w2.left").read_text() == "3"


def test_announce_left_patches_the_pod(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOLCANO_ELASTIC_ANNOUNCE_DIR", raising=False)
    seen: list[tuple[dict[str, str], str | None]] = []

    def annotate_pod(values: dict[str, str], what: str, *, pod: str | None = None, **_: Any) -> bool:
        seen.append((values, pod))
        return True

    monkeypatch.setattr(inplace, "annotate_pod", annotate_pod)
    assert kit.announce_left(2, pod="job-worker-3")
    assert seen == [({"volcano-elastic.io/left": "2"}, "job-worker-3")]


def test_announce_left_tries_again_while_the_api_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    # the agent evicts on `left`, else only after inPlaceLeaveSeconds: a lost PATCH must be tried again
    monkeypatch.delenv("VOLCANO_ELASTIC_ANNOUNCE_DIR", raising=False)
    answers = [False, False, True]
    slept: list[float] = []
    monkeypatch.setattr(inplace, "annotate_pod", lambda *a, **k: answers.pop(0))
    assert kit.announce_left(4, pod="w3", retries=(0.5, 1.0, 2.0), sleep=slept.append)
    assert slept == [0.5, 1.0] and not answers


def test_announce_left_gives_up_after_its_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("VOLCANO_ELASTIC_ANNOUNCE_DIR", raising=False)
    tries: list[int] = []
    monkeypatch.setattr(inplace, "annotate_pod", lambda *a, **k: tries.append(1) and False)
    slept: list[float] = []
    assert not kit.announce_left(4, pod="w3", retries=(0.5, 1.0), sleep=slept.append)
    assert len(tries) == 3 and slept == [0.5, 1.0]
    assert len(inplace.LEFT_RETRIES) >= 3 and sum(inplace.LEFT_RETRIES) <= 20  # well inside the agent's 60 s


def test_a_bad_every_is_refused_before_torch_is_needed() -> None:
    with pytest.raises(ValueError, match="every"):
        kit.InPlace(object(), every=0)


# ------------------------------------------------------------------ the bench's reading of a log
def step(n: int, world: int, t: float) -> dict[str, Any]:
    return {"step": n, "world": world, "t": t}


def test_bench_finds_an_in_place_event() -> None:
    records = [{"event": "start", "t": 0}, step(1, 4, 1.0), step(2, 4, 1.1), step(3, 2, 1.35), step(4, 2, 1.45)]
    (e,) = bench.events_of(records, ["shrink"])
    assert (e["kind"], e["from"], e["to"], e["inPlace"], e["stallSeconds"], e["stepsRedone"]) == (
        "shrink", 4, 2, True, 0.25, 0)


def test_bench_sees_a_restart_and_the_steps_redone() -> None:
    records = [step(24, 4, 1.0), step(25, 4, 1.1), {"event": "start", "t": 2}, step(21, 4, 9.1), step(22, 4, 9.2)]
    (e,) = bench.events_of(records, ["kill"])
    assert (e["inPlace"], e["stepsRedone"], e["stallSeconds"]) == (False, 5, 8.0)  # steps 21..25 done twice


def test_bench_compares_the_same_event() -> None:
    jobs = [{"job": "in-place", "events": [{"kind": "shrink", "stallSeconds": 0.2}]},
            {"job": "restart", "events": [{"kind": "shrink", "stallSeconds": 5.0}]}]
    assert bench.compare(jobs) == {"shrink": {"inPlaceStallSeconds": 0.2, "restartStallSeconds": 5.0, "ratio": 0.04}}


# ------------------------------------------------------------------ waiting on the store
class FakeStore:
    def __init__(self, timeouts: int, alive: bool = True) -> None:
        self.timeouts, self.alive, self.waits, self.looks = timeouts, alive, 0, 0

    def wait(self, keys: list[str], timeout: Any) -> None:
        self.waits += 1
        if self.waits <= self.timeouts:
            raise RuntimeError("Wait timeout")

    def add(self, key: str, n: int) -> int:
        self.looks += 1
        if not self.alive:
            raise RuntimeError("Connection reset by peer")
        return 0


def waiter(store: FakeStore) -> kit.InPlace:
    job = kit.InPlace.__new__(kit.InPlace)
    job.store = store
    return job


def test_a_store_wait_goes_on_in_chunks_while_the_store_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inplace, "WAIT_CHUNK", 0.01)
    store = FakeStore(timeouts=3)
    waiter(store)._wait_key("gen1", 60)
    assert (store.waits, store.looks) == (4, 3)


def test_a_store_wait_ends_when_the_store_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inplace, "WAIT_CHUNK", 0.01)
    with pytest.raises(ResizeError, match="store is gone"):
        waiter(FakeStore(timeouts=99, alive=False))._wait_key("gen1", 60)


def test_a_store_wait_ends_at_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inplace, "WAIT_CHUNK", 0.01)
    with pytest.raises(ResizeError, match="did not appear"):
        waiter(FakeStore(timeouts=10**6))._wait_key("gen1", 0.05)


HOLD = r'''
import sys, types
from volcano_elastic_job.inplace import InPlace
job = types.SimpleNamespace(leave_grace=60.0)
print("holding", flush=True)
InPlace._hold(job)
print("the grace ran out", flush=True)
'''


LEAVE = r'''
import sys, time, types
from volcano_elastic_job.inplace import InPlace
def announce(event):
    print("announcing", flush=True)
    time.sleep(30)  # a PATCH retried against a busy API server
job = types.SimpleNamespace(leave_grace=60.0, step=7, left=False, announce=announce,
                            dist=types.SimpleNamespace(destroy_process_group=lambda: None))
job._hold = lambda: InPlace._hold(job)
InPlace._leave(job, 1)
print("left", flush=True)
'''


def test_a_sigterm_while_left_is_said_ends_the_rank_too() -> None:
    """The eviction may come while `left` is still being said (the agent saw a PATCH the kit timed
    out on, or it is retried): the SIGTERM handler is in place before `announce`, not only in `_hold`."""
    import signal
    import subprocess

    env = {"PYTHONPATH": str(Path(inplace.__file__).resolve().parents[1]), "PATH": "/usr/bin:/bin"}
    p = subprocess.Popen([sys.executable, "-c", LEAVE], stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout is not None and p.stdout.readline().strip() == "announcing"
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 143  # by the handler: the default action would be -15


def test_a_left_rank_ends_on_its_sigterm_even_as_a_containers_pid_1() -> None:
    """A container's PID 1 gets no default action for SIGTERM from the kernel: a left rank that
    relied on it would wait out the pod's grace period for its SIGKILL. `_hold` ends on SIGTERM by a
    handler of its own (exit 143, as the default action would say), so it does not depend on it."""
    import signal
    import subprocess
    import time

    env = {"PYTHONPATH": str(Path(inplace.__file__).resolve().parents[1]), "PATH": "/usr/bin:/bin"}
    p = subprocess.Popen([sys.executable, "-c", HOLD], stdout=subprocess.PIPE, text=True, env=env)
    assert p.stdout is not None and p.stdout.readline().strip() == "holding"
    time.sleep(0.3)
    t = time.monotonic()
    p.send_signal(signal.SIGTERM)
    assert p.wait(timeout=10) == 143  # by the handler: the default action would be -15
    assert time.monotonic() - t < 5
