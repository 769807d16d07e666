"""The bundled examples/plan snapshots plan exactly as their reviewed .expected.json says."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from elastic_controller.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plan"
NOW = "2026-01-01T13:00:00Z"
CASES = sorted(p.name[: -len(".json")] for p in EXAMPLES.glob("*.json") if not p.name.endswith(".expected.json"))


def _plan(name: str, capsys: pytest.CaptureFixture[str], output: str = "json") -> str:
    config = EXAMPLES / f"{name}.config.yaml"  # an example planned with a configuration of its own
    extra = ["--config", str(config)] if config.exists() else []
    rc = main(["plan", "--from", str(EXAMPLES / f"{name}.json"), "--now", NOW, "--output", output, *extra])
    assert rc == 0
    return capsys.readouterr().out


def test_there_are_enough_examples() -> None:
    assert len(CASES) >= 4


@pytest.mark.parametrize("name", CASES)
def test_example_plans_as_reviewed(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    got = json.loads(_plan(name, capsys))
    want = json.loads((EXAMPLES / f"{name}.expected.json").read_text())
    assert got == want


@pytest.mark.parametrize("name", CASES)
def test_example_table_has_a_line_per_decision(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    plan = json.loads((EXAMPLES / f"{name}.expected.json").read_text())
    table = _plan(name, capsys, "table")
    assert table.count("\nEVICT ") + table.startswith("EVICT ") == len(plan["evictions"])
    grow = [line.split()[:3] for line in table.splitlines() if line.startswith("GROW ") and " none " not in line]
    jobs = list(dict.fromkeys(g["job"] for g in plan["gateReleases"]))  # one GROW row per job, in decision order
    assert [g[1] for g in grow] == jobs
    assert sum(int(g[2].strip("+pod(s)")) for g in grow) == len(plan["gateReleases"])
    wide = _plan(name, capsys, "wide")
    pods = [line.split()[:2] for line in wide.splitlines() if line.startswith("  ") and "node=" in line]
    assert sorted(p[0] for p in pods) == sorted(g["pod"] for g in plan["gateReleases"])
    assert {p[0]: p[1] for p in pods} == {g["pod"]: f"node={g['node']}" for g in plan["gateReleases"]}


def test_scale_down_story(capsys: pytest.CaptureFixture[str]) -> None:
    plan = json.loads(_plan("scale-down-for-gang", capsys))
    assert [s["decision"] for s in plan["starving"]] == ["evict"]
    victims = [e["pod"] for e in plan["evictions"]]
    # B needs 4 x 2 GPUs on a full 4 x 8 cluster: the four highest-index workers of A, one per node.
    assert victims == [f"team-vision/resnet-worker-{i}" for i in (15, 14, 13, 12)]
    assert len({e["node"] for e in plan["evictions"]}) == 4
    assert all(e["for"] == "team-nlp/bert" for e in plan["evictions"])


def test_cooldown_and_in_flight_wait(capsys: pytest.CaptureFixture[str]) -> None:
    cooling = json.loads(_plan("cooldown-blocks-eviction", capsys))
    assert cooling["evictions"] == [] and cooling["starving"][0]["decision"] == "wait"
    assert "cooldown" in cooling["starving"][0]["reason"]
    flight = json.loads(_plan("evictions-in-flight", capsys))
    assert flight["evictions"] == [] and "terminating" in flight["starving"][0]["reason"]


def test_scale_up_story(capsys: pytest.CaptureFixture[str]) -> None:
    plan = json.loads(_plan("scale-up-into-idle-gpus", capsys))
    jobs = [g["job"] for g in plan["gateReleases"]]
    # The least fulfilled job (resnet, 0%) goes first and grows 2 -> 8 in one scale event (all its queue's
    # share admits); gpt (3 of 4) could take the last free node's 4 GPUs, but +33% is below
    # minScaleUpGain (1): not worth a restart.
    assert jobs == ["team-vision/resnet"] * 6
    assert [g["pod"] for g in plan["gateReleases"]] == [f"team-vision/resnet-worker-{i}" for i in range(2, 8)]
    assert all("grows from 2 to 8 of max 16 workers in one scale event" in g["reason"] for g in plan["gateReleases"])


def test_department_tree_story(capsys: pytest.CaptureFixture[str]) -> None:
    # research (capability 24 GPUs) is full with scratch's sweep; vision's gang fits on idle GPUs but
    # not in the department: four of scratch's workers (the sibling) make room, one per node.
    plan = json.loads(_plan("department-tree", capsys))
    assert [s["decision"] for s in plan["starving"]] == ["evict"]
    assert [e["pod"] for e in plan["evictions"]] == [f"team-scratch/sweep-worker-{i}" for i in (11, 10, 9, 8)]
    assert "real capability" in plan["starving"][0]["reason"]


def test_restart_budget_story(capsys: pytest.CaptureFixture[str]) -> None:
    # scale-down-for-gang's cluster, but resnet has used 2 of its maxRestarts 3: a third shrink would
    # leave no restart in reserve, so none of its 14 elastic workers is a victim and bert says why.
    plan = json.loads(_plan("restart-budget-spent", capsys))
    assert plan["evictions"] == [] and [s["decision"] for s in plan["starving"]] == ["wait"]
    assert "candidates excluded: 14 restart budget spent (2 of 3 used, 1 kept in reserve)" in \
        plan["starving"][0]["reason"]
    assert plan["scaleUpBlockedBy"] == []  # a gang no victim can feed holds back no growth
