"""The eviction-notice world of the agent's unit tests: a gang waiting on job A's two extra workers,
with a notice period of NOTICE seconds and a clock the test moves."""

from __future__ import annotations

from typing import Any

from elastic_controller.agent import Agent
from elastic_controller.config import parse_config
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, FakeStore
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.fakecluster import Clock, fake_kube
from tests.harness.legacy import legacy_defaults

NOTICE = 120
CFG = parse_config({"defaults": legacy_defaults({"noticeSeconds": NOTICE})})
VICTIMS = ["a-worker-4", "a-worker-5"]


def world() -> list[Any]:
    """Job A (elastic 2..6, all 6 running) fills n1; gang B needs 2 GPUs and has starved for 10 min."""
    return b.items(b.node("n1"), b.queue("default"),
                   b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                   b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"]),
                   b.gang("team-b", "b", members=2, gpus=2))


def make(cfg: ElasticConfig = CFG, *, dry_run: bool | None = None) -> tuple[FakeKube, Agent, Clock]:
    kube = fake_kube(world())
    clock = Clock()
    agent = Agent(kube, FakeStore(kube), cfg, EventRecorder(kube), clock=clock, dry_run=dry_run)
    return kube, agent, clock


def noticed(kube: FakeKube, agent: Agent) -> None:
    report = agent.run_cycle()
    assert {g: sorted(p) for g, p in report.noticed.items()} == {"team-b/b": [f"team-a/{n}" for n in VICTIMS]}
    assert report.evicted == []
