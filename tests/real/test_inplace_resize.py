"""In-place resizing with real processes: torch, gloo, one process per "pod" on this host, the agent
played through the pods' annotation files (bench/inplace_resize.py, which this runs). No cluster:
it needs Debian's python3-torch on the host (hack/install-node-packages.sh installs it with the
real nodes' packages), not the box.

The stall is bounded, so a job that silently fell back to restarting cannot pass: each planned
event must be done in place within 2 s and 0.1x the restart of the same event on the same machine,
with no step done twice and every step done; a SIGKILLed pod must end the others with an error
(no hang) and the job must still complete from its checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
STALL_LIMIT = 2.0
RATIO_LIMIT = 0.1


def torch_python() -> str | None:
    candidates = [os.environ.get("VOLCANO_ELASTIC_TORCH_PYTHON", ""), "/usr/bin/python3",
                  str(Path.home() / ".cache/volcano-elastic/torch/deb-1.13/bin/python")]
    for c in candidates:
        if c and Path(c).exists() and subprocess.run([c, "-c", "import torch.distributed"],
                                                     capture_output=True).returncode == 0:
            return c
    return None


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    py = torch_python()
    if py is None:
        sys.path.insert(0, str(ROOT))
        from hack.localbox.realnode import host_problems

        problems = host_problems()
        if problems:  # the whole real tier skips on this host, for the same reasons
            pytest.skip("; ".join(problems))
        pytest.fail("no python with torch on this host: the real tier needs Debian's python3-torch "
                    "(sudo bash hack/install-node-packages.sh), or VOLCANO_ELASTIC_TORCH_PYTHON")
    out = tmp_path_factory.mktemp("inplace") / "result.json"
    run = subprocess.run([sys.executable, str(ROOT / "bench" / "inplace_resize.py"), "--out", str(out),
                          "--python", py, "--steps", "160", "--shrink-at", "20", "--grow-at", "40"],
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-4000:]
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def job(result: dict[str, Any], name: str) -> dict[str, Any]:
    (j,) = [j for j in result["jobs"] if j["job"] == name]
    return j


def test_planned_shrink_and_grow_are_done_in_place_within_the_stall_bound(result: dict[str, Any]) -> None:
    j = job(result, "in-place")
    assert j["succeeded"] and j["everyStepDone"] and j["failures"] == 0, j
    assert [(e["kind"], e["from"], e["to"]) for e in j["events"]] == [("shrink", 4, 2), ("grow", 2, 4)], j
    for e in j["events"]:
        assert e["inPlace"], e  # no process of the job restarted
        assert e["stepsRedone"] == 0, e
        assert e["stallSeconds"] <= STALL_LIMIT, e
    assert [(r["from"], r["to"], r["newcomers"]) for r in j["resizes"]] == [(4, 2, 0), (2, 4, 2)]  # the kit's account
    assert all(r["consistent"] for r in j["resizes"])  # every rank held the same model and optimizer state


def test_in_place_is_at_most_a_tenth_of_the_restart_for_the_same_event(result: dict[str, Any]) -> None:
    r = job(result, "restart")
    assert r["succeeded"] and r["everyStepDone"], r
    assert [(e["kind"], e["inPlace"]) for e in r["events"]] == [("shrink", False), ("grow", False)], r
    assert set(result["compare"]) == {"shrink", "grow"}
    for kind, c in result["compare"].items():
        assert c["ratio"] <= RATIO_LIMIT, (kind, c)


def test_a_sigkill_falls_back_to_the_restart_and_the_job_completes(result: dict[str, Any]) -> None:
    k = job(result, "kill")
    assert k["succeeded"] and k["everyStepDone"], k
    assert k["failures"] == 1 and k["fallbacks"][0]["failed"] == ["w3"], k
    assert k["fallbacks"][0]["othersHung"] == [], k  # the survivors ended with an error, by themselves
    (e,) = k["events"]
    assert not e["inPlace"] and (e["from"], e["to"]) == (4, 4), e
