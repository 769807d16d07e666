"""The agent keeps attained service durably (``execute/attained.py``, issue 38): a pod that leaves is
counted in the PodGroup's ``volcano-elastic.io/attained-service`` stamp, which a restarted agent (or
``plan``/``status`` on a dump) reads back; while no pod leaves nothing is written."""

from __future__ import annotations

from datetime import timedelta

import pytest

from elastic_controller.agent import Agent
from elastic_controller.kube.events import EventRecorder
from elastic_controller.kube.fake import FakeStore
from elastic_controller.kube.resources import PODGROUPS, PODS
from elastic_controller.policy import keys
from elastic_controller.policy.attained import attained_by_group, parse_stamp
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.fakecluster import fake_kube


def test_a_departed_pod_is_stamped_and_survives_a_restart() -> None:
    # j: 4 workers of 1 GPU placed an hour before NOW (the builders' default); no room to grow
    objs = b.items(b.node("n1", gpus=4), b.queue("default"), b.elastic_job("ns", "j", min_r=2, max_r=4, nodes=["n1"]))
    kube = fake_kube(objs)
    now = [b.NOW]
    agent = Agent(kube, FakeStore(kube), ElasticConfig(), EventRecorder(kube), clock=lambda: now[0])
    agent.run_cycle()
    assert keys.ATTAINED_SERVICE not in kube.get(PODGROUPS, "j", "ns")["metadata"]["annotations"]  # nothing left
    kube.delete(PODS, "j-worker-3", "ns")
    kube.finish_terminations()
    now[0] = b.NOW + timedelta(seconds=60)
    agent.run_cycle()
    stamp = parse_stamp(kube.get(PODGROUPS, "j", "ns")["metadata"]["annotations"][keys.ATTAINED_SERVICE])
    # 4 GPUs for the hour before NOW (the departed one last seen then), 3 more for the minute since
    assert stamp is not None and stamp.as_of == now[0]
    assert stamp.gpu_seconds == pytest.approx(4 * 3600 + 3 * 60)
    # a restarted agent, or plan/status on a dump, reads it back: the departed worker's hour still counts
    later = now[0] + timedelta(seconds=600)
    restarted = Agent(kube, FakeStore(kube), ElasticConfig(), EventRecorder(kube), clock=lambda: later)
    snapshot = restarted.snapshot()
    assert attained_by_group(snapshot, later)["ns/j"] == pytest.approx(4 * 3600 + 3 * 60 + 3 * 600)
