"""The Volcano scheduler configurations in hack/ that the box runs (hack/localbox ``--volcano-conf``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

HACK = Path(__file__).resolve().parents[2] / "hack"


def plugins(name: str) -> dict[str, dict[str, Any]]:
    conf = yaml.safe_load((HACK / f"volcano-scheduler-{name}.conf").read_text())
    return {p["name"]: p for tier in conf["tiers"] for p in tier["plugins"]}


@pytest.mark.parametrize(("name", "hierarchy"), [("capacity", False), ("capacity-hierarchy", True)])
def test_capacity_confs(name: str, hierarchy: bool) -> None:
    found = plugins(name)
    assert "capacity" in found and "proportion" not in found  # mutually exclusive in Volcano
    assert bool(found["capacity"].get("enableHierarchy", False)) is hierarchy
    conf = yaml.safe_load((HACK / f"volcano-scheduler-{name}.conf").read_text())
    actions = [a.strip() for a in conf["actions"].split(",")]
    assert "reclaim" not in actions and "preempt" not in actions  # the agent is the one evictor
    assert actions[:2] == ["enqueue", "allocate"]


def test_other_confs_keep_proportion() -> None:
    for name in ("ours", "native"):
        assert "proportion" in plugins(name) and "capacity" not in plugins(name)
