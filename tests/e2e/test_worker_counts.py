"""Issue 20 on the whole box (real Volcano, kwok GPU nodes 4 x 8, the training operator, our webhook,
controller and agent): a job with ``volcano-elastic.io/worker-step: "2"`` filling the cluster gives
exactly two workers when a gang needing one worker's GPUs arrives (the planner rounds 8 -> 7 down to
the allowed 6)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.resources import PODGROUPS, PYTORCHJOBS
from tests.harness.stack import (
    config_text,
    kc,  # noqa: F401 - the fixture
    pytorchjob,
    stack_scenario,
    wait_until,
)

pytestmark = pytest.mark.e2e
STEP = "volcano-elastic.io/worker-step"


def test_a_step_2_job_shrinks_by_two(kc: KubeClient, box: Any, box_process: Any,  # noqa: F811
                                     kubeconfig: str, namespace: str, serving_cert: tuple[Path, Path],
                                     tmp_path: Path) -> None:
    started = time.monotonic()
    with stack_scenario(kc, box, box_process, kubeconfig, namespace, serving_cert, tmp_path, config_text()) as sc:
        job = pytorchjob("a", sc.qa, 8, (2, 8))  # 8 x 4 GPUs: the whole box
        job["metadata"]["annotations"] = {STEP: "2"}  # counts 2, 4, 6, 8
        kc.create(PYTORCHJOBS, job, namespace)
        wait_until("A runs 8 workers", lambda: len(sc.running("a")) >= 8, 180)
        # The controller copies the contract to A's PodGroup (what the planner reads).
        wait_until("worker-step on A's PodGroup",
                   lambda: kc.get(PODGROUPS, "a", namespace)["metadata"].get("annotations", {}).get(STEP) == "2", 30)
        sc._seen = {p["metadata"]["uid"]: p["metadata"]["name"] for p in sc.pods("a")}
        threading.Thread(target=sc._sample, daemon=True).start()
        t0 = time.monotonic()
        # B needs one worker's GPUs (4), in A's queue: qa holds all 32 GPUs and would be above its
        # deserved share with B, so A's own workers make room (another queue could reclaim only down to
        # qa's deserved 28 GPUs: one worker, which step 2 does not allow; see the planner's tests).
        kc.create(PYTORCHJOBS, pytorchjob("b", sc.qa, 1, None), namespace)
        wait_until("B runs", lambda: len(sc.running("b")) >= 1, 180)
        took = time.monotonic() - t0
        evicted = wait_until("2 EvictedForGang events", lambda: (ev := sc.events("EvictedForGang")) and
                             len(ev) >= 2 and ev, 30)
        wait_until("the victims gone", lambda: len(sc.obs.a_deleted) >= 2, 30)
        time.sleep(3)  # nothing else goes: the plan was 8 -> 6, not 8 -> 7 and not 8 -> 4
        names = sorted(e["involvedObject"]["name"] for e in sc.events("EvictedForGang"))
        assert len(names) == 2, names
        assert sorted(sc.obs.a_deleted) == names, (sc.obs.a_deleted, names)
        assert names == ["a-worker-6", "a-worker-7"], names  # elastic, highest index first
        assert len(sc.running("a")) == 6
        assert sc.obs.a_running_min >= 6, sc.obs.a_running_min  # (7 only between the two evictions)
        down = sc.annotations("a")
        assert down["volcano-elastic.io/last-scale-direction"] == "down"
        # the shrink is said in its Event; last-decision may already carry the next decision (the
        # snooze that holds A's growth back is published there too)
        # (the Event goes out through the recorder's outbox: wait for it, do not race it)
        assert wait_until("A's ScaledDown Event", lambda: any(
            "2 elastic worker" in e["message"] for e in sc.events("ScaledDown")), 30), sc.events("ScaledDown")
        assert ("2 elastic worker" in down.get("volcano-elastic.io/last-decision", "")
                or "held (" in down.get("volcano-elastic.io/last-decision", "")), down
        print(f"B ran {took:.1f}s after creation; A 8 -> 6 (2 evicted: {', '.join(names)}); "
              f"test {time.monotonic() - started:.0f}s")
        assert evicted
