"""Objects the agent cannot use are said once at WARNING per object and reason, counted in a
metric and shown by `status` (issue 23, item 5)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from elastic_controller.cli.controller import PrometheusMetrics
from elastic_controller.cli.status import render_skipped, skipped_objects
from elastic_controller.kube.resources import NODES, PODGROUPS
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.agentworld import make, world


def broken(kube: Any) -> None:
    kube.add(NODES, {"metadata": {"name": "no-status"}, "spec": {}})
    absurd = b.node("absurd")
    absurd["status"]["allocatable"]["nvidia.com/gpu"] = "1e18"
    kube.add(NODES, absurd)
    pg = b.podgroup("team-x", "bad", 2)
    pg["spec"]["minMember"] = "two"
    kube.add(PODGROUPS, pg)


def warnings_about(caplog: pytest.LogCaptureFixture, name: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == logging.WARNING and getattr(r, "object", "") == name]


def test_skipped_objects_are_warned_once_per_object_and_reason(caplog: pytest.LogCaptureFixture) -> None:
    kube, agent = make(world())
    metrics = PrometheusMetrics()
    agent.metrics = metrics
    broken(kube)
    caplog.set_level(logging.INFO, logger="elastic_controller.agent")
    for _ in range(3):
        agent.run_cycle()
    assert len(warnings_about(caplog, "no-status")) == 1
    assert len(warnings_about(caplog, "team-x/bad")) == 1
    absurd = warnings_about(caplog, "absurd")
    assert len(absurd) == 1 and "nvidia.com/gpu" in absurd[0].reason  # type: ignore[attr-defined]
    text = metrics.render()[0].decode()
    assert 'volcano_elastic_skipped_objects{kind="Node"} 2.0' in text
    assert 'volcano_elastic_skipped_objects{kind="PodGroup"} 1.0' in text
    pg = kube.get(PODGROUPS, "bad", "team-x")
    pg["spec"]["minMember"] = -1  # another change, another reason: said again
    kube.add(PODGROUPS, pg)
    agent.run_cycle()
    assert len(warnings_about(caplog, "team-x/bad")) == 2
    kube.delete(PODGROUPS, "bad", "team-x")
    agent.run_cycle()
    assert 'volcano_elastic_skipped_objects{kind="PodGroup"} 0.0' in metrics.render()[0].decode()
    assert ("PodGroup", "team-x/bad") not in agent.skipped


def test_status_lists_skipped_objects() -> None:
    kube, _ = make(world())
    broken(kube)
    items = [o for res in (NODES, PODGROUPS) for o in kube.of(res)]
    lines = skipped_objects(items, ElasticConfig())
    text = render_skipped(lines)
    assert "SKIPPED OBJECTS (3" in text
    assert "no-status" in text and "team-x/bad" in text and "absurd" in text and "nvidia.com/gpu" in text
