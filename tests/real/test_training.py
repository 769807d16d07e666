"""A real elastic torchrun job through volcano-elastic (issue targets as assertions), the scenarios of
bench/real_training.py on the in-cluster install:

- it starts at min and takes its elastic workers, is shrunk by our in-cluster agent for a gang (real
  eviction, SIGTERM, grace period), resumes at the smaller world size from its shared checkpoint,
  grows back after the gang, and its PyTorchJob ends Succeeded with every step done; steps redone at
  most the steps since the last checkpoint;
- in a queue with an eviction notice, with `maxRestarts: 2` and three gangs: the notice's checkpoint
  leaves no step to redo, the job is shrunk once (one restart kept in reserve), the later gangs wait
  for it with the restart budget as their reason, and it finishes."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.real.test_install import NAMESPACE, RELEASE, helm, wait_installed

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import real_training as rt

CHECKPOINT_EVERY = 20  # examples/training/elastic_train.py's default


@pytest.fixture(scope="module")
def installed(box: Any, kube: Any) -> Iterator[Any]:
    from kubernetes import client

    box.kubectl("create", "namespace", NAMESPACE, check=False)
    rt.install(box)
    try:
        wait_installed(box, kube(client.CoreV1Api))
        yield box
    finally:
        helm(box, "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", "--timeout", "180s")


def summary(result: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in result.items() if k != "log"}
    print("\n[real] training: " + json.dumps(out))
    return out


def test_elastic_torchrun_job_shrinks_for_a_gang_grows_back_and_succeeds(installed: Any) -> None:
    result = rt.run(installed, steps=400, gangs=1, max_restarts=10, notice_seconds=0, baseline=False,
                    shared_root=installed.dir / "shared")
    s = summary(result)
    assert result["succeeded"], s
    assert result["stepsDone"] == result["stepsTarget"], s
    kinds = [e["kind"] for e in result["events"]]
    assert "shrink" in kinds and "grow" in kinds, s
    shrink = next(e for e in result["events"] if e["kind"] == "shrink")
    assert shrink["toWorkers"] >= 2  # never below min
    for e in result["events"]:
        assert e["stepsRedone"] <= CHECKPOINT_EVERY, e
    assert not result["gatedLeft"]


def test_with_a_notice_nothing_is_redone_and_a_small_restart_budget_outlives_three_gangs(installed: Any) -> None:
    result = rt.run(installed, steps=600, gangs=3, max_restarts=2, notice_seconds=rt.NOTICE_SECONDS,
                    baseline=False, shared_root=installed.dir / "shared")
    s = summary(result)
    assert result["succeeded"], s
    assert result["stepsDone"] == result["stepsTarget"], s
    shrinks = [e for e in result["events"] if e["kind"] == "shrink"]
    assert len(shrinks) == 1, s  # maxRestarts 2: one shrink, one restart kept in reserve
    assert shrinks[0]["stepsRedone"] == 0, s  # checkpointed on the notice, then waited for the eviction
    assert result["held"], s
    assert max(e["restartBudgetUsed"] for e in result["events"]) < result["maxRestarts"], s
    first, *later = result["gangRuns"]
    assert not first["afterTheJobEnded"], s  # the job gave way once
    for g in later:  # then no more: the gangs waited for the job, and said why
        assert g["afterTheJobEnded"], s
        assert "restart budget spent" in g["decisionWhileWaiting"], s
    assert not result["gatedLeft"]
