"""Events sent in the background (``EventRecorder(background=True)``, what the controller process uses;
issue 36, item 3): the writer that emits one does not wait on the API server, every Event still
arrives, the de-duplication still holds, and a full queue drops (and says so) instead of blocking."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from elastic_controller.kube import events as ev
from elastic_controller.kube.errors import KubeError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube
from elastic_controller.kube.resources import EVENTS, Resource

REF = {"apiVersion": "v1", "kind": "Pod", "name": "p", "namespace": "ns", "uid": "u1"}


class SlowEvents(FakeKube):
    def __init__(self, delay: float) -> None:
        super().__init__()
        self.delay = delay
        self.gate = threading.Event()
        self.gate.set()

    def create(self, res: Resource, body: dict[str, Any], namespace: str | None = None, *,
               dry_run: bool = False) -> dict[str, Any]:
        self.gate.wait(10)
        time.sleep(self.delay)
        return super().create(res, body, namespace, dry_run=dry_run)


def test_emitting_does_not_wait_and_every_event_arrives() -> None:
    kube = SlowEvents(0.1)
    rec = EventRecorder(kube, background=True)
    t = time.perf_counter()
    for i in range(5):
        assert rec.emit(REF, "Normal", "ScaledUp", f"lifted {i}")
    assert time.perf_counter() - t < 0.25  # five Events of 0.1 s each: not waited for
    assert rec.flush(10)
    assert sorted(e["message"] for e in kube.of(EVENTS)) == [f"lifted {i}" for i in range(5)]
    assert len(rec.emitted) == 5


def test_the_same_event_is_still_sent_once() -> None:
    kube = SlowEvents(0.0)
    rec = EventRecorder(kube, background=True)
    assert rec.emit(REF, "Normal", "GangWaiting", "waits")
    assert not rec.emit(REF, "Normal", "GangWaiting", "waits")
    assert rec.flush(10)
    assert len(kube.of(EVENTS)) == 1


def test_a_full_queue_drops_instead_of_blocking(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ev, "QUEUE_SIZE", 2)
    kube = SlowEvents(0.0)
    kube.gate.clear()  # the API server answers nothing for now
    rec = EventRecorder(kube, background=True)
    sent = [rec.emit(REF, "Normal", "R", f"m{i}") for i in range(6)]
    assert sent.count(False) >= 3  # one being sent, two waiting, the rest dropped
    kube.gate.set()
    assert rec.flush(10)
    assert len(kube.of(EVENTS)) == sent.count(True)


def test_a_failed_event_does_not_stop_the_sender() -> None:
    kube = SlowEvents(0.0)
    calls = {"n": 0}

    def fault(verb: str, res: Resource, ns: str, name: str, dry: bool) -> None:
        if res is EVENTS and calls["n"] == 0:
            calls["n"] += 1
            raise KubeError("etcd slow", 500)

    kube.faults.append(fault)
    rec = EventRecorder(kube, background=True)
    rec.emit(REF, "Normal", "A", "first")
    rec.emit(REF, "Normal", "B", "second")
    assert rec.flush(10)
    assert [e["message"] for e in kube.of(EVENTS)] == ["second"]


def test_without_background_an_event_is_sent_before_emit_returns() -> None:
    kube = SlowEvents(0.0)
    rec = EventRecorder(kube)
    assert rec.emit(REF, "Normal", "A", "now")
    assert len(kube.of(EVENTS)) == 1 and rec.flush(0)
