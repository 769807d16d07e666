"""Which queue-share plugin the Volcano scheduler runs, and the agent's check against config ``shares``."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from elastic_controller.kube.errors import ForbiddenError
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeKube, raise_on
from elastic_controller.kube.resources import CONFIGMAPS, EVENTS
from elastic_controller.policy.settings import SharesConfig
from elastic_controller.volcanoconf import (
    MISMATCH_REASON,
    SchedulerConfError,
    SchedulerShares,
    check_scheduler,
    describe,
    mismatch,
    parse_scheduler_conf,
)

HACK = Path(__file__).resolve().parents[2] / "hack"
PROPORTION = SharesConfig()
CAPACITY = SharesConfig(plugin="capacity")
HIERARCHY = SharesConfig(plugin="capacity", hierarchy=True)


@pytest.mark.parametrize(("name", "expected"), [
    ("ours", SchedulerShares(("proportion",))),
    ("native", SchedulerShares(("proportion",))),
    ("capacity", SchedulerShares(("capacity",))),
    ("capacity-hierarchy", SchedulerShares(("capacity",), hierarchy=True)),
])
def test_parse_the_box_confs(name: str, expected: SchedulerShares) -> None:
    assert parse_scheduler_conf((HACK / f"volcano-scheduler-{name}.conf").read_text()) == expected


def test_parse_ancestor_reclaim_level_and_junk() -> None:
    text = ("actions: enqueue\ntiers:\n- plugins:\n  - name: capacity\n    enableHierarchy: true\n"
            "    arguments: {ancestorReclaimLevel: 2}\n  - just-a-string\n- nothing: here\n")
    assert parse_scheduler_conf(text) == SchedulerShares(("capacity",), True, 2)
    for bad in ("- a list", "tiers: 5", "{unclosed"):
        with pytest.raises(SchedulerConfError):
            parse_scheduler_conf(bad)


@pytest.mark.parametrize(("configured", "scheduler", "expected"), [
    (PROPORTION, SchedulerShares(("proportion",)), None),
    (CAPACITY, SchedulerShares(("capacity",)), None),
    (HIERARCHY, SchedulerShares(("capacity",), hierarchy=True), None),
    (PROPORTION, SchedulerShares(("capacity",)), "set shares: {plugin: capacity}"),
    (PROPORTION, SchedulerShares(("capacity",), hierarchy=True), "set shares: {plugin: capacity, hierarchy: true}"),
    (CAPACITY, SchedulerShares(("proportion",)), "set shares: {plugin: proportion}"),
    (CAPACITY, SchedulerShares(("capacity",), hierarchy=True), "enableHierarchy: true"),
    (HIERARCHY, SchedulerShares(("capacity",)), "enableHierarchy: false"),
    (HIERARCHY, SchedulerShares(("capacity",), True, 1), "ancestorReclaimLevel 1"),
    (PROPORTION, SchedulerShares(()), "neither proportion nor capacity"),
    (PROPORTION, SchedulerShares(("proportion", "capacity")), "mutually exclusive"),
])
def test_mismatch(configured: SharesConfig, scheduler: SchedulerShares, expected: str | None) -> None:
    got = mismatch(configured, scheduler)
    assert got is None if expected is None else (got is not None and expected in got)


def test_describe() -> None:
    assert [describe(s) for s in (PROPORTION, CAPACITY, HIERARCHY)] == [
        "proportion", "capacity", "capacity (hierarchical)"]


def _kube_with(conf: str) -> FakeKube:
    kube = FakeKube()
    kube.add(CONFIGMAPS, {"metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                          "data": {"volcano-scheduler.conf": (HACK / f"volcano-scheduler-{conf}.conf").read_text()}})
    return kube


def test_check_warns_loudly_and_records_a_warning_event(caplog: pytest.LogCaptureFixture) -> None:
    kube = _kube_with("ours")
    recorder = EventRecorder(kube)
    with caplog.at_level(logging.INFO):
        verdict = check_scheduler(kube, CAPACITY, "volcano-system/volcano-scheduler-configmap", recorder)
    assert verdict.startswith("capacity (MISMATCH: the Volcano scheduler runs the proportion plugin")
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings and "DO NOT MATCH" in warnings[0].getMessage()
    (event,) = kube.of(EVENTS)
    assert event["type"] == "Warning" and event["reason"] == MISMATCH_REASON
    assert event["metadata"]["namespace"] == "volcano-system"
    assert event["involvedObject"]["kind"] == "ConfigMap"
    assert event["involvedObject"]["name"] == "volcano-scheduler-configmap"


def test_check_matches_quietly() -> None:
    kube = _kube_with("capacity-hierarchy")
    verdict = check_scheduler(kube, HIERARCHY, "volcano-system/volcano-scheduler-configmap", EventRecorder(kube))
    assert verdict == "capacity (hierarchical) (matches volcano-system/volcano-scheduler-configmap)"
    assert kube.of(EVENTS) == []


def test_check_without_access_absent_or_skipped() -> None:
    kube = _kube_with("ours")
    kube.faults.append(raise_on("get", "configmaps", error=ForbiddenError("forbidden", 403)))
    assert "not checked: no access" in check_scheduler(kube, PROPORTION, "volcano-system/volcano-scheduler-configmap")
    assert "not found" in check_scheduler(kube, PROPORTION, "volcano-system/other")
    assert "not checked: not NAMESPACE/NAME" in check_scheduler(kube, PROPORTION, "just-a-name")
    assert check_scheduler(kube, PROPORTION, "") == "proportion (scheduler configuration not checked)"
    assert kube.of(EVENTS) == []
