"""Adopting running jobs: pods of a PyTorchJob created before our webhook was registered carry
the training operator's labels but no ``scheduling.k8s.io/group-name``. They are members of their
job's PodGroup by those labels wherever the planner counts members, candidates and usage, so the
plans are the ones it would make had the webhook annotated them; and ``plan`` never reports
"none excluded" for workers it saw but may not shrink."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from elastic_controller.policy.decisions import CyclePlan
from elastic_controller.policy.parse import parse_pod
from tests.harness.builders import elastic_job, gang, job_pod, node, over_share, plan_of, pod, queue, snapshot_of

GROUP = "scheduling.k8s.io/group-name"


def unannotated(objs: list[dict[str, Any]], which: Callable[[dict[str, Any]], bool] = lambda p: True,
                ) -> list[dict[str, Any]]:
    """The objects with the group annotation removed from the PyTorchJob pods ``which`` selects
    (as the training operator creates them when no webhook of ours is registered)."""
    out = copy.deepcopy(objs)
    for o in out:
        labels = o["metadata"].get("labels") or {}
        if o["kind"] == "Pod" and "training.kubeflow.org/job-name" in labels and which(o):
            o["metadata"]["annotations"].pop(GROUP, None)
            o["spec"]["schedulerName"] = "default-scheduler"
    return out


def summary(plan: CyclePlan) -> tuple[list[tuple[str, str, str]], list[str], list[str]]:
    return ([(d.pod_group, d.decision, d.reason) for d in plan.starving],
            [e.pod for e in plan.evictions], [r.pod for r in plan.gate_releases])


def _full_node_and_gang() -> list[Any]:
    return [node("n0"), *elastic_job("ns", "v", min_r=2, max_r=6, nodes=["n0"], running=6),
            *gang("ns", "g", members=1, gpus=4)]


def _two_nodes_two_jobs() -> list[Any]:
    return [node("n0"), node("n1"), queue("qa"), queue("qb"),
            *elastic_job("ns", "a", min_r=1, max_r=8, nodes=["n0"], running=8, queue="qa"),
            *elastic_job("ns", "b", min_r=2, max_r=8, nodes=["n1"], running=4, queue="qb"),
            *gang("ns", "g", members=2, gpus=4, queue="qb")]


def _idle_gpus_scale_up() -> list[Any]:
    return [node("n0"), node("n1"), *elastic_job("ns", "v", min_r=2, max_r=8, nodes=["n0"], running=3),
            *elastic_job("ns", "w", min_r=1, max_r=4, nodes=["n1"], running=1)]


SCENARIOS: dict[str, Callable[[], list[Any]]] = {
    "gang starving on a full node": _full_node_and_gang,
    "victims from two queues' jobs": _two_nodes_two_jobs,
    "own queue over its share (usage)": over_share,
    "scale-up next to running workers": _idle_gpus_scale_up,
}
WHICH: dict[str, Callable[[dict[str, Any]], bool]] = {
    "every pod": lambda p: True,
    "running pods only (newer pods annotated)": lambda p: bool(p["spec"].get("nodeName")),
    "odd indexes": lambda p: int(p["metadata"]["labels"]["training.kubeflow.org/replica-index"]) % 2 == 1,
}


@pytest.mark.parametrize("which", list(WHICH), ids=list(WHICH))
@pytest.mark.parametrize("scenario", list(SCENARIOS), ids=list(SCENARIOS))
def test_adopted_pods_plan_as_if_annotated(scenario: str, which: str) -> None:
    objs = SCENARIOS[scenario]()
    annotated = plan_of(*objs)
    adopted = plan_of(*unannotated(objs, WHICH[which]))
    assert summary(adopted) == summary(annotated)
    assert annotated.evictions or annotated.gate_releases, "the scenario must decide something"


def test_adopted_pod_view() -> None:
    raw = unannotated([job_pod("ns", "v", "worker", 3, nnodes="2:6", node_name="n0")])[0]
    view = parse_pod(raw)
    assert view.adopted and view.group == "v" and view.group_key == "ns/v"
    assert view.role.value == "elastic" and view.replica_index == 3 and view.job_id == "ns/v"
    annotated = parse_pod(job_pod("ns", "v", "worker", 3, nnodes="2:6", node_name="n0"))
    assert not annotated.adopted and annotated.group_key == "ns/v"


def _grouped_by_volcano() -> dict[str, Any]:
    raw = unannotated([job_pod("ns", "v", "worker", 3, nnodes="2:6")])[0]
    raw["spec"]["schedulerName"] = "volcano"
    raw["metadata"]["annotations"][GROUP] = "podgroup-0b6e"  # Volcano's own PodGroup for a lone pod
    return raw


@pytest.mark.parametrize(("case", "raw"), [
    ("not a training-operator pod", pod("ns", "web-0", node_name="n0")),
    ("grouped by Volcano into a PodGroup of its own", _grouped_by_volcano()),
])
def test_not_adopted(case: str, raw: dict[str, Any]) -> None:
    view = parse_pod(raw)
    assert not view.adopted, case
    assert view.group != "v"


def test_workers_without_a_podgroup_are_excluded_by_name() -> None:
    """A neighbour's job (Kueue, another scheduler: no PodGroup of ours) is never shrunk, and the
    wait reason says which workers it saw and why it left them, never "none excluded"."""
    objs = [o for o in _full_node_and_gang() if not (o["kind"] == "PodGroup" and o["metadata"]["name"] == "v")]
    for variant in (objs, unannotated(objs)):
        plan = plan_of(*variant)
        assert not plan.evictions
        ((pg, verdict, reason),) = summary(plan)[0]
        assert (pg, verdict) == ("ns/g", "wait")
        assert "4 no PodGroup" in reason and "none excluded" not in reason, reason


def test_adopted_usage_counts_for_the_jobs_queue() -> None:
    from elastic_controller.policy.shares import usage_of

    objs = unannotated(elastic_job("ns", "a", min_r=2, max_r=8, nodes=["n0"], running=5, queue="qa"))
    snap = snapshot_of(node("n0"), queue("qa"), *objs)
    usage = usage_of(snap.pods, {pg.key: pg for pg in snap.podgroups})
    assert usage.allocated["qa"]["nvidia.com/gpu"] == 5
    assert usage.gated["qa"]["nvidia.com/gpu"] == 3
