"""Elastic scaling on the whole box: Volcano, kwok GPU nodes (4 x 8), the training operator, our
webhook, controller and agent. Job A (elastic, queue dept-a) fills the idle cluster; job B (queue
dept-b) needs its min; A's elastic workers make room; after B finishes A grows back after cooldown.

The stack (tests/harness/stack.py) is shared with bench/agent_vs_native.py, which runs the shipped
defaults with shortened time constants, not ``config_text`` (whose minScaleUpGain 0.3 is this test's,
so that A regrows)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.resources import PODGROUPS
from tests.harness import stack
from tests.harness.stack import COOLDOWN, GPUS_PER_WORKER, config_text, podgroup_gone, stack_scenario, wait_until

kc = stack.kc  # a fixture
pytestmark = pytest.mark.e2e


def test_elastic_job_makes_room_and_grows_back_after_cooldown(kc: KubeClient, box: Any, box_process: Any,
                                                              kubeconfig: str, namespace: str,
                                                              serving_cert: tuple[Path, Path],
                                                              tmp_path: Path) -> None:
    with stack_scenario(kc, box, box_process, kubeconfig, namespace, serving_cert, tmp_path, config_text()) as sc:
        sc.fill_with_a(8)
        a_pods = sc.pods("a")
        gated_seen = any(p["metadata"]["annotations"].get("volcano-elastic.io/role") == "elastic" for p in a_pods)
        assert gated_seen
        pg = kc.get(PODGROUPS, "a", namespace)
        assert pg["spec"]["minResources"]["nvidia.com/gpu"] == str(2 * GPUS_PER_WORKER)  # not reduced by Volcano
        t0 = sc.start_b()
        wait_until("B's gang runs", lambda: sc.obs.b_running_at is not None, COOLDOWN + 120)
        took = (sc.obs.b_running_at or 0) - t0
        # Events are written right after each eviction; under load they may trail B's start a little.
        evicted = wait_until("2 EvictedForGang events", lambda: (ev := sc.events("EvictedForGang")) and
                             len(ev) >= 2 and ev, 30)
        names = sorted(e["involvedObject"]["name"] for e in evicted)
        assert len(evicted) == 2, names  # 2 elastic 4-GPU workers make room for 2 x 4 GPUs
        wait_until("the victims gone", lambda: len(sc.obs.a_deleted) >= 2, 30)
        assert sorted(sc.obs.a_deleted) == names  # and nothing else of A went away
        assert all(int(n.rsplit("-", 1)[1]) >= 2 for n in names), names  # elastic only
        assert sc.obs.a_running_min >= 2  # never below min
        assert len(sc.obs.master_uids) == 1  # worker-0 (the master) never evicted or restarted
        down = sc.annotations("a")
        assert down["volcano-elastic.io/last-scale-direction"] == "down"
        sc.finish_b()
        wait_until("B finished and its PodGroup deleted", lambda: not sc.annotations("b") and
                   podgroup_gone(kc, namespace, "b"), 120)
        wait_until("A grows back to 8 workers", lambda: len(sc.running("a")) >= 8, COOLDOWN + 120)
        up = sc.annotations("a")
        assert up["volcano-elastic.io/last-scale-direction"] == "up"
        from elastic_controller.policy.parse import parse_time
        t_down = parse_time(down["volcano-elastic.io/last-scale-time"])
        t_up = parse_time(up["volcano-elastic.io/last-scale-time"])
        assert t_down and t_up and (t_up - t_down).total_seconds() >= COOLDOWN - 1
        assert len(sc.events("EvictedForGang")) == 2  # nothing evicted from the cooling job
        print(f"B's gang ran {took:.1f}s after creation")


