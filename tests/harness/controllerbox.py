"""The controller running for real against a box (its own caches and event recorder), as a fixture."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from elastic_controller.controller import Controller
from elastic_controller.kube.caches import Caches
from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import NotFoundError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.resources import PODGROUPS
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.agentbox import clean
from tests.harness.legacy import legacy_config


class Running:
    def __init__(self, client: KubeClient, cfg: ElasticConfig | None = None) -> None:
        self.caches = Caches(client)
        self.recorder = EventRecorder(client)
        # (the three keys of issue 38 as before unless cfg says: the tier's jobs are elastic from their min)
        self.ctl = Controller(client, self.caches, cfg or legacy_config(), self.recorder, workers=2,
                              resync_seconds=5)
        self.caches.add_handler(self.ctl.on_event)
        self.caches.start()
        assert self.caches.wait_synced(30)
        self.ctl.start()

    def stop(self) -> None:
        self.ctl.stop()
        self.caches.stop()


@pytest.fixture
def controller(kc: KubeClient) -> Iterator[Running]:
    r = Running(kc)
    yield r
    r.stop()


def job(ns: str, name: str, **kw: Any) -> dict[str, Any]:
    return clean(b.pytorchjob(ns, name, **kw), ns)


def pg_of(kc: KubeClient, ns: str, name: str) -> dict[str, Any] | None:
    try:
        return kc.get(PODGROUPS, name, ns)
    except NotFoundError:
        return None
