"""Neighbours on the whole box (real training operator and Volcano, our webhook and controller):
a PyTorchJob scheduled by another scheduler, and one managed by Kueue whose pod templates carry
Kueue's label, are left alone (no PodGroup, pods unmutated, one LeftToNeighbour Warning), while a
plain elastic job next to them is managed as usual; a Volcano PodGroup asking for HyperNode
placement gets one NetworkTopologyIgnored Warning."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.kube.client import KubeClient
from elastic_controller.kube.errors import KubeError
from elastic_controller.kube.resources import PODGROUPS, PYTORCHJOBS, QUEUES
from tests.harness.stack import (
    WEBHOOKS,
    Scenario,
    config_text,
    kc,  # noqa: F401 - fixture
    podgroup_gone,
    pytorchjob,
    start_stack,
    wait_until,
)

pytestmark = pytest.mark.e2e
GROUP = "scheduling.k8s.io/group-name"


def _worker_template(job: dict[str, Any]) -> dict[str, Any]:
    template: dict[str, Any] = job["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]
    return template


def test_neighbours_jobs_are_left_alone(kc: KubeClient, box: Any, box_process: Any,  # noqa: F811
                                        kubeconfig: str, namespace: str, serving_cert: tuple[Path, Path],
                                        tmp_path: Path) -> None:
    cfg = tmp_path / "config.yaml"
    cfg.write_text(config_text())
    hook = start_stack(kc, box, box_process, kubeconfig, cfg, serving_cert, namespace)
    queue = f"nb-{uuid.uuid4().hex[:5]}"
    kc.create(QUEUES, {"metadata": {"name": queue}, "spec": {"weight": 1, "reclaimable": True}})
    sc = Scenario(kc, namespace)
    try:
        other = pytorchjob("other", queue, 3, (1, 3))
        _worker_template(other)["spec"]["schedulerName"] = "kai-scheduler"
        kueue = pytorchjob("kueue", queue, 3, (1, 3))
        kueue["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-lq"}
        _worker_template(kueue)["metadata"] = {"labels": {"kueue.x-k8s.io/queue-name": "team-lq"}}
        own = pytorchjob("own", queue, 3, (1, 3))
        for job in (other, kueue, own):
            kc.create(PYTORCHJOBS, job, namespace)

        wait_until("our job's PodGroup", lambda: not podgroup_gone(kc, namespace, "own"), 60)
        wait_until("our job's pods admitted by our webhook",
                   lambda: len(sc.pods("own")) == 3 and all(GROUP in (p["metadata"].get("annotations") or {})
                                                            for p in sc.pods("own")), 60)
        for name, needle in (("other", "scheduled by 'kai-scheduler'"), ("kueue", "managed by Kueue")):
            warned = wait_until(f"LeftToNeighbour on {name}", lambda name=name: [
                e for e in sc.events("LeftToNeighbour") if e["involvedObject"]["name"] == name], 60)
            assert len(warned) == 1 and needle in warned[0]["message"], warned
            pods = wait_until(f"the operator creates {name}'s pods", lambda name=name: len(sc.pods(name)) == 3
                              and sc.pods(name), 60)
            for p in pods:
                ann = p["metadata"].get("annotations") or {}
                assert GROUP not in ann and "volcano-elastic.io/role" not in ann, (name, ann)
                assert not p["spec"].get("schedulingGates"), (name, p["spec"].get("schedulingGates"))
            assert podgroup_gone(kc, namespace, name), f"{name} got a PodGroup"
        assert pods[0]["spec"].get("schedulerName") in (None, "default-scheduler")  # kueue's: not ours either

        pg = {"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
              "metadata": {"name": "topo-gang"},
              "spec": {"minMember": 2, "queue": queue, "networkTopology": {"mode": "hard", "highestTierAllowed": 1}}}
        kc.create(PODGROUPS, pg, namespace)
        warned = wait_until("NetworkTopologyIgnored", lambda: sc.events("NetworkTopologyIgnored"), 60)
        assert len(warned) == 1 and warned[0]["involvedObject"]["kind"] == "PodGroup"
        assert kc.get(PODGROUPS, "topo-gang", namespace)["spec"]["networkTopology"]["mode"] == "hard"
    finally:
        for job in ("other", "kueue", "own"):
            try:
                kc.delete(PYTORCHJOBS, job, namespace)
            except KubeError:
                pass
        try:
            kc.delete(WEBHOOKS, hook)
        except KubeError:
            pass
        try:
            kc.delete(QUEUES, queue)
        except KubeError:
            pass
