"""bench/real_training.py --in-place: the in-place job's manifest, how its log's events are read
(`inPlace: true` for a world change with no restart, `false` for a restart) and how the two paths
are compared."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import real_training as rt


def steps(first: int, last: int, world: int, t0: float, dt: float = 0.3, restart: int = 0) -> list[dict[str, Any]]:
    return [{"step": s, "world": world, "t": t0 + (s - first) * dt, "restart": restart} for s in range(first, last + 1)]


def test_the_in_place_job_runs_one_process_per_pod_and_opts_in() -> None:
    job = rt.training_job("train", "q", 100, 3, Path("/tmp/x"), baseline=False, step_seconds=0.25, in_place=True)
    assert job["metadata"]["annotations"] == {"volcano-elastic.io/resize": "in-place"}
    command = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["python3", "/scripts/elastic_train.py"] and "--in-place" in command
    assert "volcano_elastic_job.run" not in command  # no torchrun: its agent would restart every worker
    kit = rt.training_job("train", "q", 100, 3, Path("/tmp/x"), baseline=False, step_seconds=0.25)
    assert "annotations" not in kit["metadata"]
    assert kit["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"][0]["command"][:3] == [
        "python3", "-m", "volcano_elastic_job.run"]
    with pytest.raises(ValueError, match="pick one"):
        rt.training_job("train", "q", 100, 3, Path("/tmp/x"), baseline=True, step_seconds=0.25, in_place=True)


def test_a_world_change_without_a_restart_is_an_in_place_event() -> None:
    log: list[dict[str, Any]] = [{"event": "start", "from": 0, "world": 4, "t": 0.0, "spawned": -3.0, "restart": 0}]
    log += steps(1, 10, 4, 1.0)  # step 10 at 3.7
    log += steps(11, 20, 2, 4.1)  # in place: 0.4 s from step 10 to 11
    log += steps(21, 30, 4, 7.5)  # in place: grow, step 20 at 6.8
    events = rt.scale_events(log)
    assert [(e["kind"], e["fromWorkers"], e["toWorkers"], e["inPlace"]) for e in events] == [
        ("shrink", 4, 2, True), ("grow", 2, 4, True)]
    assert events[0]["stallSeconds"] == pytest.approx(0.4) and events[1]["stallSeconds"] == pytest.approx(0.7)
    assert all(e["stepsRedone"] == 0 for e in events)
    assert "restartSeconds" not in events[0]


def test_a_restart_is_not_in_place_and_the_events_stay_in_order() -> None:
    log: list[dict[str, Any]] = [{"event": "start", "from": 0, "world": 4, "t": 0.0, "restart": 0}]
    log += steps(1, 10, 4, 1.0)
    log += steps(11, 12, 2, 4.1)  # in place
    log.append({"event": "start", "from": 10, "world": 4, "t": 20.0, "spawned": 15.0, "restart": 1})  # a kill
    log += steps(11, 15, 4, 22.0, restart=1)  # steps 11 and 12 redone
    events = rt.scale_events(log)
    assert [(e["kind"], e["inPlace"]) for e in events] == [("shrink", True), ("restart", False)]
    restart = events[1]
    assert restart["stepsRedone"] == 2 and restart["restartSeconds"] == 7.0
    assert restart["stallSeconds"] == pytest.approx(22.0 - 4.4)


def test_steps_redone_in_place_are_counted() -> None:
    log = steps(1, 10, 4, 0.0) + steps(9, 12, 2, 3.0)  # the new group went back two steps
    (event,) = rt.scale_events(log)
    assert event["inPlace"] and event["stepsRedone"] == 2


def test_the_paths_are_compared_event_by_event() -> None:
    in_place = [{"kind": "shrink", "inPlace": True, "stallSeconds": 0.4},
                {"kind": "grow", "inPlace": True, "stallSeconds": 0.5}]
    restart = [{"kind": "shrink", "inPlace": False, "stallSeconds": None},  # another restart came first
               {"kind": "shrink", "inPlace": False, "stallSeconds": 8.0, "restartSeconds": 4.0},
               {"kind": "grow", "inPlace": False, "stallSeconds": 10.0, "restartSeconds": 6.0}]
    c = rt.compare_paths(in_place, restart)
    assert c["shrink"]["ratio"] == 0.05 and c["shrink"]["restartStallSeconds"] == 8.0
    assert c["grow"]["ratio"] == 0.05 and c["grow"]["inPlace"] is True
    missing = rt.compare_paths(in_place[:1], restart)
    assert missing["grow"]["ratio"] is None and missing["grow"]["inPlace"] is None


class FakeObjs:
    """CustomObjectsApi's two reads `restarts_counted` makes: the PodGroups, the PyTorchJob."""

    def __init__(self, pg: dict[str, str] | None, job: dict[str, str]) -> None:
        self.pg, self.job = pg, job

    def list_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        if self.pg is None:
            return {"items": []}
        return {"items": [{"metadata": {"name": "train-pg", "ownerReferences": [{"name": "train"}],
                                        "annotations": self.pg}}]}

    def get_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        return {"metadata": {"annotations": self.job}}


def test_the_restarts_counted_are_the_pod_groups_else_the_jobs_copy() -> None:
    used = "volcano-elastic.io/restarts-used"
    assert rt.restarts_counted(FakeObjs({used: "2"}, {used: "1"}), "ns", "train") == 2  # the PodGroup rules
    assert rt.restarts_counted(FakeObjs({}, {}), "ns", "train") == 0  # nothing counted (in place)
    assert rt.restarts_counted(FakeObjs(None, {used: "1"}), "ns", "train") == 1  # PodGroup gone with the job
    assert rt.restarts_counted(FakeObjs({used: "x"}, {}), "ns", "train") == -1  # unreadable: not a 0
