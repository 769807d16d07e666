"""An API outage (issue 23, item 9): caches reconnect promptly, are known stale meanwhile, the
agent does not act on them and /readyz says so."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from elastic_controller.cli.controller import Health
from elastic_controller.kube.caches import Caches
from elastic_controller.kube.errors import TooManyRequestsError, UnavailableError
from elastic_controller.kube.fake import FakeKube
from elastic_controller.kube.resources import PODGROUPS, PODS, PYTORCHJOBS, Resource
from tests.harness.agentworld import make, world

OUTAGE = 8.0


class FlakyServer:
    """A WatchSource over a FakeKube that refuses everything while ``down``, then answers 429
    "storage is (re)initializing" for a moment, as a restarted kube-apiserver does."""

    def __init__(self, kube: FakeKube) -> None:
        self.kube = kube
        self.down = threading.Event()
        self.up_at = 0.0
        self.lists: list[tuple[str, float]] = []

    def _check(self) -> None:
        if self.down.is_set():
            raise UnavailableError("connection refused")
        if time.monotonic() - self.up_at < 0.3:
            raise TooManyRequestsError("storage is (re)initializing", 429)

    def list(self, res: Resource, namespace: str | None = None, **_: Any) -> tuple[list[dict[str, Any]], str]:
        self._check()
        self.lists.append((res.plural, time.monotonic()))
        return self.kube.list(res, namespace)

    def watch(self, res: Resource, resource_version: str, namespace: str | None = None,
              **_: Any) -> Iterator[dict[str, Any]]:
        self._check()
        while not self.down.is_set():  # a quiet, healthy stream
            time.sleep(0.02)
        raise UnavailableError("stream broke: connection reset")


def test_caches_relist_within_seconds_of_the_api_coming_back_and_are_stale_meanwhile() -> None:
    kube = FakeKube()
    kube.add(PODS, {"metadata": {"name": "p", "namespace": "ns"}})
    server = FlakyServer(kube)
    caches = Caches(server, (PODS, PODGROUPS, PYTORCHJOBS))  # default backoff settings
    recovered: list[str] = []
    caches.on_recovered(lambda res: recovered.append(res.plural))
    health = Health(caches, stale_after=60)
    caches.start()
    try:
        assert caches.wait_synced(5)
        assert caches.stale() == [] and health.readyz() == (200, "ok")
        server.down.set()  # the API server goes away
        deadline = time.monotonic() + 5
        while len(caches.stale()) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sorted(caches.stale()) == ["podgroups", "pods", "pytorchjobs"]
        code, text = health.readyz()
        assert code == 503 and "stale" in text
        kube.add(PODS, {"metadata": {"name": "q", "namespace": "ns"}})  # a change during the outage
        time.sleep(OUTAGE)
        server.up_at = time.monotonic()
        server.down.clear()  # back (after 0.3 s of 429s)
        deadline = time.monotonic() + 10
        while caches.stale() and time.monotonic() < deadline:
            time.sleep(0.02)
        took = time.monotonic() - server.up_at
        assert caches.stale() == [] and health.readyz() == (200, "ok")
        assert took < 4.5, f"caches relisted {took:.1f}s after the API server came back"
        assert caches.get(PODS, "q", "ns") is not None
        assert sorted(recovered) == ["podgroups", "pods", "pytorchjobs"]
    finally:
        caches.stop()


def test_the_agent_does_not_act_on_stale_caches() -> None:
    kube, agent = make(world())
    kube.stale_caches = {"pods"}
    report = agent.run_cycle()
    assert report.stale == ["pods"] and report.evicted == []
    assert not [c for c in kube.calls if c[0] != "get"]
    kube.stale_caches = set()
    report = agent.run_cycle()
    assert sorted(report.evicted) == ["team-a/a-worker-4", "team-a/a-worker-5"]


def test_readyz_reports_stale_caches() -> None:
    caches = SimpleNamespace(unsynced=lambda: [], stale=lambda: ["pods", "nodes"])
    code, text = Health(caches, stale_after=10).readyz()
    assert code == 503 and "pods" in text and "nodes" in text
