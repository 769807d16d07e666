"""The agent's unit-test world: a small cluster of builders objects in the in-memory API server, an
Agent over it, and the annotation keys its checks read."""

from __future__ import annotations

from typing import Any

from elastic_controller.agent import Agent
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.kube.resources import PODS
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.fakecluster import fake_kube
from tests.harness.legacy import legacy_config

EVICTED_FOR = "volcano-elastic.io/evicted-for"
LAST = "volcano-elastic.io/last-scale-time"
MUTATING = ("create", "patch-merge", "patch-strategic", "patch-json", "delete", "replace")


def world() -> list[Any]:
    """Job A (elastic 2..6, all 6 running) fills n1; gang B needs 4 GPUs and has starved for 10 min."""
    return b.items(b.node("n1"), b.queue("default"),
                   b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                   b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"]),
                   b.gang("team-b", "b", members=4, gpus=1))


def make(*groups: Any, cfg: ElasticConfig | None = None, store: Any = None) -> tuple[FakeKube, Agent]:
    kube = fake_kube(*groups)
    agent = Agent(kube, store or FakeStore(kube), cfg or legacy_config(), EventRecorder(kube),
                  clock=lambda: b.NOW)
    return kube, agent


def pod(kube: FakeKube, name: str, ns: str = "team-a") -> dict[str, Any]:
    return kube.get(PODS, name, ns)


def evict_world() -> list[Any]:
    """Job A (elastic 2..6, all running) fills n1; gang B (4 x 1 GPU) has starved for 10 min."""
    return b.items(b.node("n1"), b.queue("default"), b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                   b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"]),
                   b.gang("team-b", "b", members=4, gpus=1))


def gate_world() -> list[Any]:
    """Job J (elastic 2..5, 2 running, 3 gated) on a node with room for all."""
    return b.items(b.node("n1"), b.queue("default"), b.pytorchjob("ns", "j", workers=5, min_r=2, max_r=5),
                   b.elastic_job("ns", "j", min_r=2, max_r=5, nodes=["n1"], running=2))
