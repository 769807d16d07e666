"""Reading the Volcano scheduler configuration: which actions evict, and the `status` warning."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.errors import ForbiddenError, NotFoundError
from elastic_controller.kube.resources import CONFIGMAPS, Resource
from elastic_controller.statuscmd import two_evictors
from elastic_controller.volcanoconf import (
    conf_from_configmap,
    parse_configmap_ref,
    parse_scheduler_actions,
    two_evictors_warning,
)

HACK = Path(__file__).resolve().parents[2] / "hack"
EXAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "volcano-scheduler.conf"


@pytest.mark.parametrize(("name", "evicting", "cdp"), [
    ("ours", (), False),
    ("native", ("preempt", "reclaim"), False),
    ("gang-native", ("gangpreempt", "gangreclaim"), True),
])
def test_the_shipped_configurations(name: str, evicting: tuple[str, ...], cdp: bool) -> None:
    conf = parse_scheduler_actions((HACK / f"volcano-scheduler-{name}.conf").read_text())
    assert conf is not None
    assert conf.evicting_actions == evicting
    assert ("cdp" in conf.plugins) is cdp
    warning = two_evictors_warning(conf, "test")
    if evicting:
        assert warning is not None and ", ".join(evicting) in warning
        assert ("with plugin cdp" in warning) is cdp
    else:
        assert warning is None


def test_the_recommended_example_evicts_nothing() -> None:
    conf = parse_scheduler_actions(EXAMPLE.read_text())
    assert conf is not None and conf.actions == ("enqueue", "allocate", "backfill")
    assert two_evictors_warning(conf, "x") is None


def test_actions_are_trimmed_and_lowercased() -> None:
    conf = parse_scheduler_actions('actions: " Enqueue,allocate , GangReclaim,"\ntiers: []\n')
    assert conf is not None and conf.actions == ("enqueue", "allocate", "gangreclaim")
    assert conf.evicting_actions == ("gangreclaim",)


@pytest.mark.parametrize("text", ["", "[", "actions: [a, b]", "- 1\n- 2", "tiers: []"])
def test_not_a_scheduler_configuration(text: str) -> None:
    assert parse_scheduler_actions(text) is None


def test_odd_tiers_are_skipped_not_fatal() -> None:
    conf = parse_scheduler_actions('actions: "reclaim"\ntiers: [null, {plugins: [x, {name: cdp}, {name: 3}]}, 7]\n')
    assert conf is not None and conf.plugins == ("cdp",)


def test_configmap_key_preference() -> None:
    cm = {"data": {"a.conf": 'actions: "preempt"', "volcano-scheduler.conf": 'actions: "allocate"'}}
    conf = conf_from_configmap(cm)
    assert conf is not None and conf.actions == ("allocate",)
    conf = conf_from_configmap({"data": {"other.conf": "[", "z.conf": 'actions: "reclaim"'}})
    assert conf is not None and conf.actions == ("reclaim",)
    assert conf_from_configmap({"data": {"readme": 'actions: "reclaim"'}}) is None
    assert conf_from_configmap({}) is None


@pytest.mark.parametrize("ref", ["volcano-system", "/x", "x/", "a/b/c", ""])
def test_bad_configmap_refs(ref: str) -> None:
    with pytest.raises(ValueError, match="NAMESPACE/NAME"):
        parse_configmap_ref(ref)


class OneObject:
    def __init__(self, result: dict[str, Any] | Exception) -> None:
        self.result = result
        self.asked: list[tuple[Resource, str, str | None]] = []

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        self.asked.append((res, name, namespace))
        if isinstance(self.result, Exception):
            raise self.result
        return self.result


def test_status_warns_only_when_it_may_read_an_evicting_configuration() -> None:
    ref = ("volcano-system", "volcano-scheduler-configmap")
    gang = OneObject({"data": {"volcano-scheduler.conf": (HACK / "volcano-scheduler-gang-native.conf").read_text()}})
    warning = two_evictors(gang, ref)
    assert warning is not None and "two evictors" in warning and "gangpreempt, gangreclaim" in warning
    assert "ConfigMap volcano-system/volcano-scheduler-configmap" in warning
    assert gang.asked == [(CONFIGMAPS, "volcano-scheduler-configmap", "volcano-system")]  # that one object
    ours = OneObject({"data": {"volcano-scheduler.conf": (HACK / "volcano-scheduler-ours.conf").read_text()}})
    assert two_evictors(ours, ref) is None
    assert two_evictors(OneObject(ForbiddenError("forbidden")), ref) is None  # say nothing
    assert two_evictors(OneObject(NotFoundError("absent")), ref) is None
