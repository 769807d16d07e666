"""The kube layer without a server: watch caches (bookmarks, 410 relist, backoff), the work
queue, leader election on a Lease, error mapping."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from elastic_controller.kube.errors import (
    AlreadyExistsError,
    ConflictError,
    GoneError,
    TooManyRequestsError,
    UnavailableError,
    error_for,
)
from elastic_controller.kube.fake import FakeKube
from elastic_controller.kube.informer import Informer
from elastic_controller.kube.leader import LeaderElector, LeaseSettings
from elastic_controller.kube.resources import LEASES, PODGROUPS, PODS
from elastic_controller.kube.workqueue import WorkQueue


def obj(name: str, rv: int, ns: str = "ns") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": ns, "resourceVersion": str(rv)}}


class Script:
    """A WatchSource playing back lists and watch sessions (each an iterable or an exception)."""

    def __init__(self, lists: list[list[dict[str, Any]]], watches: list[Any]) -> None:
        self.lists = lists
        self.watches = watches
        self.list_calls = 0
        self.watch_from: list[str] = []
        self.done = threading.Event()

    def list(self, res: Any, namespace: Any = None, **_: Any) -> tuple[list[dict[str, Any]], str]:
        items = self.lists[min(self.list_calls, len(self.lists) - 1)]
        self.list_calls += 1
        return items, str(max((int(o["metadata"]["resourceVersion"]) for o in items), default=1))

    def watch(self, res: Any, rv: str, namespace: Any = None, **_: Any) -> Iterator[dict[str, Any]]:
        self.watch_from.append(rv)
        if not self.watches:
            self.done.set()
            time.sleep(0.05)
            return
        step = self.watches.pop(0)
        if isinstance(step, Exception):
            raise step
        yield from step


def run(script: Script) -> Informer:
    seen: list[tuple[str, str]] = []
    inf = Informer(script, PODS, min_backoff=0.001, max_backoff=0.002)
    inf.add_handler(lambda _r, kind, o: seen.append((kind, o["metadata"]["name"])))
    inf.seen = seen  # type: ignore[attr-defined]
    inf.start()
    assert script.done.wait(5)
    inf.stop(1)
    return inf


def test_list_then_watch_with_bookmarks_resumes_from_the_last_version() -> None:
    s = Script([[obj("a", 5)]], [
        [{"type": "ADDED", "object": obj("b", 6)}, {"type": "BOOKMARK", "object": obj("", 9)}],
        [{"type": "MODIFIED", "object": obj("a", 10)}, {"type": "DELETED", "object": obj("b", 11)}],
    ])
    inf = run(s)
    assert s.watch_from[:3] == ["5", "9", "11"]
    assert s.list_calls == 1
    assert [o["metadata"]["name"] for o in inf.items()] == ["a"]
    assert inf.seen == [("ADDED", "a"), ("ADDED", "b"), ("MODIFIED", "a"), ("DELETED", "b")]  # type: ignore[attr-defined]


def test_gone_relists_and_diffs_the_cache() -> None:
    s = Script([[obj("a", 5), obj("b", 5)], [obj("a", 20), obj("c", 21)]],
               [GoneError("too old", 410), []])
    inf = run(s)
    assert s.list_calls == 2 and s.watch_from[1] == "21"
    assert sorted(o["metadata"]["name"] for o in inf.items()) == ["a", "c"]
    assert ("DELETED", "b") in inf.seen and ("MODIFIED", "a") in inf.seen  # type: ignore[attr-defined]
    assert inf.restarts == 1


def test_errors_back_off_mark_the_cache_stale_and_relist() -> None:
    s = Script([[obj("a", 5)], [obj("a", 5), obj("c", 6)]],
               [UnavailableError("refused"), UnavailableError("refused"),
                [{"type": "ADDED", "object": obj("b", 7)}]])
    inf = run(s)
    assert s.list_calls == 3 and s.watch_from[:3] == ["5", "6", "6"]
    assert inf.restarts == 2 and inf.get("ns/b") is not None and inf.get("ns/c") is not None
    assert not inf.stale


def test_write_through_never_goes_back_in_time() -> None:
    inf = Informer(Script([[]], []), PODGROUPS)
    inf.put(obj("g", 10))
    inf.put(obj("g", 8))
    assert inf.get("ns/g")["metadata"]["resourceVersion"] == "10"  # type: ignore[index]


def test_write_through_never_brings_back_a_deleted_object() -> None:
    """A patch's answer that arrives after the watch delivered the pod's deletion (or an answer older
    than the last list, which no longer had the pod) is dropped: it would haunt the cache until the
    next relist. A newer object of the same name (recreated) is taken."""
    inf = Informer(Script([[]], []), PODS)
    inf.relist()  # the list's resourceVersion: 1
    inf.run_once([{"type": "ADDED", "object": obj("p", 10)}, {"type": "DELETED", "object": obj("p", 12)}])
    inf.put(obj("p", 11))
    assert inf.get("ns/p") is None
    inf.put(obj("q", 1))  # absent from the list at version 1: deleted before it
    assert inf.get("ns/q") is None
    inf.put(obj("p", 13))  # created again after the deletion
    assert inf.get("ns/p") is not None
    inf.put(obj("r", 2))  # created after the list
    assert inf.get("ns/r") is not None


@pytest.mark.parametrize(("status", "body", "cls"), [
    (409, '{"reason": "AlreadyExists", "message": "exists"}', AlreadyExistsError),
    (409, '{"reason": "Conflict"}', ConflictError),
    (429, '{"message": "Cannot evict pod as it would violate the pod\'s disruption budget."}', TooManyRequestsError),
    (410, "", GoneError), (503, "<html>", UnavailableError), (0, None, UnavailableError),
])
def test_error_mapping(status: int, body: str | None, cls: type) -> None:
    err = error_for(status, body, "POST x")
    assert type(err) is cls and err.status == status


def test_work_queue_dedups_and_requeues_keys_added_while_processing() -> None:
    q = WorkQueue()
    q.add("a")
    q.add("a")
    assert q.get(0) == "a" and q.get(0) is None
    q.add("a")  # while processing
    q.done("a")
    assert q.get(0) == "a"
    q.done("a")
    q.add_after("b", 0.01)
    assert q.get(1) == "b"


def test_leader_election_on_a_lease() -> None:
    kube = FakeKube()
    clock = [0.0]
    s = LeaseSettings("ve", "ns", lease_duration=10, renew_deadline=5, retry_period=1)
    a = LeaderElector(kube, "a", s, clock=lambda: clock[0])
    b = LeaderElector(kube, "b", s, clock=lambda: clock[0])
    assert a.try_acquire_or_renew()
    assert not b.try_acquire_or_renew()
    clock[0] = 5
    assert a.try_acquire_or_renew()  # renewed
    clock[0] = 9
    assert not b.try_acquire_or_renew()  # b first sees a's renewal now: it waits 10 s from here
    clock[0] = 18
    assert not b.try_acquire_or_renew()
    clock[0] = 19.5
    assert b.try_acquire_or_renew()
    lease = kube.get(LEASES, "ve", "ns")["spec"]
    assert lease["holderIdentity"] == "b" and lease["leaseTransitions"] == 1
    a._leading.set()
    b.release()
    assert not kube.get(LEASES, "ve", "ns")["spec"].get("holderIdentity")
    assert a.try_acquire_or_renew()  # released: taken at once


def test_elector_run_calls_back_and_releases_on_stop() -> None:
    kube = FakeKube()
    stop = threading.Event()
    events: list[str] = []
    el = LeaderElector(kube, "me", LeaseSettings("ve", "ns", 3, 2, 0.05))

    def started() -> None:
        events.append("started")
        stop.set()

    assert el.run(stop, started, lambda: events.append("stopped")) is False
    assert events == ["started", "stopped"]
    assert not kube.get(LEASES, "ve", "ns")["spec"].get("holderIdentity")
