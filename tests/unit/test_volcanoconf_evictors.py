"""Which actions of the Volcano scheduler evict, and `status`'s two-evictors warning."""

from __future__ import annotations

from pathlib import Path

import pytest

from elastic_controller.kube.errors import ForbiddenError, KubeError
from elastic_controller.kube.fake import FakeKube, raise_on
from elastic_controller.kube.resources import CONFIGMAPS
from elastic_controller.volcanoconf import (
    SchedulerConfError,
    parse_scheduler_actions,
    two_evictors,
    two_evictors_warning,
)

HACK = Path(__file__).resolve().parents[2] / "hack"
EXAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "volcano-scheduler.conf"
REF = "volcano-system/volcano-scheduler-configmap"


@pytest.mark.parametrize(("name", "evicting", "cdp"), [
    ("ours", (), False),
    ("native", ("preempt", "reclaim"), False),
    ("gang-native", ("gangpreempt", "gangreclaim"), True),
    ("capacity", (), False),
])
def test_the_shipped_configurations(name: str, evicting: tuple[str, ...], cdp: bool) -> None:
    conf = parse_scheduler_actions((HACK / f"volcano-scheduler-{name}.conf").read_text())
    assert conf.evicting == evicting
    assert ("cdp" in conf.plugins) is cdp
    warning = two_evictors_warning(conf, "test")
    if evicting:
        assert warning is not None and ", ".join(evicting) in warning
        assert ("with plugin cdp" in warning) is cdp
    else:
        assert warning is None


def test_the_gang_native_conf_is_what_the_issue_names() -> None:
    conf = parse_scheduler_actions((HACK / "volcano-scheduler-gang-native.conf").read_text())
    assert conf.actions == ("enqueue", "allocate", "gangpreempt", "gangreclaim", "backfill")
    assert {"priority", "gang", "conformance", "cdp", "drf", "predicates", "proportion", "nodeorder",
            "binpack"} <= set(conf.plugins)
    assert not {"preempt", "reclaim"} & set(conf.actions)  # Volcano's design forbids mixing them
    # overcommit's enqueue admission would keep a gang larger than 20% of a full cluster Pending,
    # and the gang actions skip Pending jobs (tests/e2e/test_volcano_gang_native.py)
    assert "overcommit" not in conf.plugins


def test_the_recommended_example_evicts_nothing() -> None:
    conf = parse_scheduler_actions(EXAMPLE.read_text())
    assert conf.actions == ("enqueue", "allocate", "backfill")
    assert two_evictors_warning(conf, "x") is None


def test_actions_are_trimmed_and_lowercased() -> None:
    conf = parse_scheduler_actions('actions: " Enqueue,allocate , GangReclaim,"\ntiers: []\n')
    assert conf.actions == ("enqueue", "allocate", "gangreclaim")
    assert conf.evicting == ("gangreclaim",)


@pytest.mark.parametrize("text", ["", "[", "actions: [a, b]", "- 1\n- 2", "tiers: []"])
def test_not_a_scheduler_configuration(text: str) -> None:
    with pytest.raises(SchedulerConfError):
        parse_scheduler_actions(text)


def test_odd_tiers_are_skipped_not_fatal() -> None:
    conf = parse_scheduler_actions('actions: "reclaim"\ntiers: [null, {plugins: [x, {name: cdp}, {name: 3}]}, 7]\n')
    assert conf.plugins == ("cdp",)


def _kube_with(conf: str | None) -> FakeKube:
    kube = FakeKube()
    data = {} if conf is None else {"volcano-scheduler.conf": conf}
    kube.add(CONFIGMAPS, {"metadata": {"name": "volcano-scheduler-configmap", "namespace": "volcano-system"},
                          "data": data})
    return kube


def test_status_warns_when_it_may_read_an_evicting_configuration() -> None:
    warning = two_evictors(_kube_with((HACK / "volcano-scheduler-gang-native.conf").read_text()), REF)
    assert warning is not None and "two evictors" in warning and "gangpreempt, gangreclaim" in warning
    assert f"ConfigMap {REF}" in warning
    legacy = two_evictors(_kube_with((HACK / "volcano-scheduler-native.conf").read_text()), REF)
    assert legacy is not None and "preempt, reclaim" in legacy


@pytest.mark.parametrize("why", ["ours", "forbidden", "absent", "error", "no key", "garbage", "no ref", "bad ref"])
def test_status_says_nothing_otherwise(why: str) -> None:
    kube = _kube_with("[" if why == "garbage" else None if why == "no key" else
                      (HACK / ("volcano-scheduler-ours.conf" if why == "ours" else
                               "volcano-scheduler-gang-native.conf")).read_text())
    ref = {"no ref": "", "bad ref": "volcano-system", "absent": "volcano-system/other"}.get(why, REF)
    if why == "forbidden":
        kube.faults.append(raise_on("get", "configmaps", error=ForbiddenError("forbidden", 403)))
    if why == "error":
        kube.faults.append(raise_on("get", "configmaps", error=KubeError("boom", 500)))
    assert two_evictors(kube, ref) is None
