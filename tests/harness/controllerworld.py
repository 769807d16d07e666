"""The controller over the in-memory API server, and the Warning reasons it recorded."""

from __future__ import annotations

from typing import Any

from elastic_controller.controller import Controller
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.fakecluster import load
from tests.harness.legacy import legacy_config


def make(*groups: Any, cfg: ElasticConfig | None = None) -> tuple[FakeKube, Controller, EventRecorder]:
    kube = FakeKube()
    load(kube, b.queue("default"), *groups)
    rec = EventRecorder(kube)
    return kube, Controller(kube, FakeStore(kube), cfg or legacy_config(), rec), rec


def reasons(rec: EventRecorder) -> list[str]:
    return [e["reason"] for e in rec.emitted]
