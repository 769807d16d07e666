"""``wholeGangUpTo`` in the real system (issue 38): the controller sizes the PodGroup's gang at the job's
max (``policy/podgroups.plan_podgroup``) and lifts the scale-up gate off the gang's workers, the
webhook does not gate them when the config gives every queue the same setting, and the agent takes the
PodGroup's gang as the job's floor (no victim below its max), as the simulator does."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.cli.status import build_rows, render
from elastic_controller.config import parse_config
from elastic_controller.kube.resources import PODGROUPS, PODS, QUEUES
from elastic_controller.policy import keys
from elastic_controller.policy.model import ElasticBounds
from elastic_controller.policy.parse import parse_job
from elastic_controller.policy.podgroups import plan_podgroup
from elastic_controller.policy.settings import ElasticConfig
from elastic_controller.policy.world import build_world
from tests.harness import builders as b
from tests.harness.controllerworld import make
from tests.harness.webhook_objects import apply, pod, review
from webhook.mutate import whole_up_to
from webhook.review import review_pod

GATE = keys.DEFAULT_GATE


def cfg_of(**doc: Any) -> ElasticConfig:
    return parse_config(doc)


def plan(job: dict[str, Any], cfg: ElasticConfig, ns_queue: str | None = None) -> Any:
    return plan_podgroup(parse_job(job), cfg, ns_queue)


# ---------------------------------------------------------------- the PodGroup's gang


def test_small_elastic_job_gang_is_its_max_with_its_master() -> None:
    cfg = cfg_of(defaults={"wholeGangUpTo": 4})
    p = plan(b.pytorchjob("ns", "j", workers=4, min_r=1, max_r=4, master=True), cfg)
    assert (p.min_member, p.min_task_member, p.gang_workers, p.whole_up_to) == (5, {"master": 1, "worker": 4}, 4, 4)
    assert p.min_resources["nvidia.com/gpu"] == 5 and p.whole
    assert p.bounds.min_replicas == 1  # the job's own bounds are what it says


def test_worker_only_job_counts_worker_0_in_its_gang() -> None:
    cfg = cfg_of(defaults={"wholeGangUpTo": 4})
    p = plan(b.pytorchjob("ns", "j", workers=4, min_r=2, max_r=4), cfg)
    assert (p.min_member, p.min_task_member) == (4, {"worker": 4})


def test_job_above_the_key_and_the_key_off_keep_their_min() -> None:
    big = b.pytorchjob("ns", "j", workers=8, min_r=2, max_r=8, master=True)
    for cfg in (cfg_of(defaults={"wholeGangUpTo": 4}), ElasticConfig(), cfg_of(defaults={"wholeGangUpTo": 0})):
        p = plan(big, cfg)
        assert (p.min_member, p.gang_workers, p.whole) == (3, 2, False)
    small_job = b.pytorchjob("ns", "s", workers=4, min_r=1, max_r=4)
    small = plan(small_job, cfg_of(defaults={"wholeGangUpTo": 0}))
    assert (small.min_member, small.whole) == (1, False)
    small = plan(small_job, ElasticConfig())  # the default (4, issue 38's judge): admitted whole
    assert (small.min_member, small.whole, small.whole_up_to) == (4, True, 4)
    rigid = plan(b.pytorchjob("ns", "r", workers=3, elastic=False), cfg_of(defaults={"wholeGangUpTo": 4}))
    assert (rigid.min_member, rigid.whole) == (3, False)


def test_the_jobs_queue_decides() -> None:
    cfg = cfg_of(defaults={"wholeGangUpTo": 0}, queues={"small": {"wholeGangUpTo": 4}})
    job = b.pytorchjob("ns", "j", workers=4, min_r=1, max_r=4, queue="small")
    assert plan(job, cfg).min_member == 4
    # a namespace bound to another queue wins over the job's own (resolve_queue)
    assert plan(job, cfg, ns_queue="default").min_member == 1
    assert plan(b.pytorchjob("ns", "k", workers=4, min_r=1, max_r=4), cfg).min_member == 1


# ---------------------------------------------------------------- the controller


def gated_pods(ns: str, job: str, n: int, min_r: int, *, master: bool) -> list[dict[str, Any]]:
    out = []
    if master:
        out.append(b.job_pod(ns, job, "master", 0, nnodes=f"{min_r}:{n}", master_replica=True))
    for i in range(n):
        out.append(b.job_pod(ns, job, "worker", i, nnodes=f"{min_r}:{n}", master_replica=master,
                             gates=[GATE] if i >= min_r else []))
    return out


def pod_gates(kube: Any, name: str) -> list[str]:
    return [g["name"] for g in kube.get(PODS, name, "ns")["spec"].get("schedulingGates") or []]


def test_controller_writes_the_whole_gang_and_lifts_its_gates() -> None:
    cfg = cfg_of(queues={"small": {"wholeGangUpTo": 4}})
    job = b.pytorchjob("ns", "j", workers=4, min_r=1, max_r=4, master=True, queue="small")
    kube, ctl, _ = make(job, b.queue("small"), *gated_pods("ns", "j", 4, 1, master=True), cfg=cfg)
    ctl.reconcile("ns/j")
    spec = kube.get(PODGROUPS, "j", "ns")["spec"]
    assert spec["minMember"] == 5 and spec["minTaskMember"] == {"master": 1, "worker": 4}
    assert spec["minResources"]["nvidia.com/gpu"] == "5"
    assert all(pod_gates(kube, f"j-worker-{i}") == [] for i in range(4))
    assert kube.get(PODS, "j-worker-3", "ns")["metadata"]["annotations"][keys.TARGET_WORKERS] == "5"


def test_controller_leaves_a_job_above_the_key_gated() -> None:
    cfg = cfg_of(defaults={"wholeGangUpTo": 4})
    job = b.pytorchjob("ns", "j", workers=6, min_r=2, max_r=6, master=True)
    kube, ctl, _ = make(job, *gated_pods("ns", "j", 6, 2, master=True), cfg=cfg)
    ctl.reconcile("ns/j")
    assert kube.get(PODGROUPS, "j", "ns")["spec"]["minMember"] == 3
    assert [pod_gates(kube, f"j-worker-{i}") for i in range(6)] == [[], [], [GATE], [GATE], [GATE], [GATE]]
    assert not [c for c in kube.calls if c[0].startswith("patch") and c[1] == "pods" and "worker" in c[3]
                and c[3] != "j-worker-0" and c[3] != "j-worker-1"]


def test_controller_default_changes_nothing() -> None:
    job = b.pytorchjob("ns", "j", workers=4, min_r=1, max_r=4, master=True)
    kube, ctl, _ = make(job, *gated_pods("ns", "j", 4, 1, master=True))
    ctl.reconcile("ns/j")
    assert kube.get(PODGROUPS, "j", "ns")["spec"]["minMember"] == 2
    assert [pod_gates(kube, f"j-worker-{i}") for i in range(4)] == [[], [GATE], [GATE], [GATE]]
    assert kube.get(QUEUES, "default") is not None


# ---------------------------------------------------------------- the webhook


def gated_after(p: dict[str, Any], cfg: ElasticConfig) -> bool:
    after = apply(p, review_pod(review(p), cfg).response)
    return GATE in [g["name"] for g in after["spec"].get("schedulingGates") or []]


def test_whole_up_to_is_known_only_when_every_queue_agrees() -> None:
    assert whole_up_to(ElasticConfig()) == 4  # the default
    assert whole_up_to(cfg_of(defaults={"wholeGangUpTo": 0})) == 0
    assert whole_up_to(cfg_of(defaults={"wholeGangUpTo": 4}, queues={"a": {"cooldownSeconds": 10}})) == 4
    assert whole_up_to(cfg_of(defaults={"wholeGangUpTo": 4}, queues={"a": {"wholeGangUpTo": 2}})) is None


@pytest.mark.parametrize(("doc", "nnodes", "gated"), [
    ({}, "2:4", [False, False, False, False]),  # the default (4): whole, no gate
    ({"defaults": {"wholeGangUpTo": 0}}, "2:4", [False, False, True, True]),  # off: as before
    ({"defaults": {"wholeGangUpTo": 4}}, "2:4", [False, False, False, False]),  # whole: no gate
    ({"defaults": {"wholeGangUpTo": 4}}, "2:8", [False, False, True, True]),  # above the key
    # the queue decides and the pod does not say it: gated here, lifted by the controller
    ({"defaults": {"wholeGangUpTo": 0}, "queues": {"small": {"wholeGangUpTo": 4}}}, "2:4",
     [False, False, True, True]),
    ({"queues": {"small": {"wholeGangUpTo": 2}}}, "2:4", [False, False, True, True]),
])
def test_webhook_gates_below_the_gang_never(doc: dict[str, Any], nnodes: str, gated: list[bool]) -> None:
    cfg = cfg_of(**doc)
    assert [gated_after(pod(index=i, nnodes=nnodes), cfg) for i in range(4)] == gated


# ---------------------------------------------------------------- the agent


def whole(objs: list[dict[str, Any]], workers: int) -> list[dict[str, Any]]:
    """An ``elastic_job``'s objects with its PodGroup's minMember at ``workers`` (as the controller
    writes it for a job admitted whole; no Master replica: worker-0 counts)."""
    for obj in objs:
        if obj["kind"] == "PodGroup":
            obj["spec"]["minMember"] = workers
    return objs


def crowded(a_whole: bool, b_whole: bool) -> list[dict[str, Any]]:
    """n0 (8 GPUs) full with jobs a and b (1..4 workers, all 4 running) and gang g (2 GPUs) starving."""
    a = b.elastic_job("ns", "a", min_r=1, max_r=4, nodes=["n0"])
    bb = b.elastic_job("ns", "b", min_r=1, max_r=4, nodes=["n0"])
    return [b.node("n0"), b.queue("default"), *(whole(a, 4) if a_whole else a), *(whole(bb, 4) if b_whole else bb),
            *b.gang("ns", "g", members=1, gpus=2)]


def test_agent_never_takes_a_whole_jobs_workers() -> None:
    cfg = cfg_of(defaults={"wholeGangUpTo": 4})
    before = {e.job for e in b.plan_of(*crowded(False, False)).evictions}
    assert before  # the gang is served from the elastic workers above min
    one = b.plan_of(*crowded(True, False), cfg=cfg)
    assert {e.job for e in one.evictions} == {"ns/b"}
    both = b.plan_of(*crowded(True, True), cfg=cfg)
    assert not both.evictions and [d.decision for d in both.starving] == ["wait"]


def test_status_says_why_a_job_is_never_shrunk() -> None:
    cfg = cfg_of(defaults={"wholeGangUpTo": 4})
    objs = b.items(*crowded(True, False))
    objs += [b.pytorchjob("ns", "a", workers=4, min_r=1, max_r=4), b.pytorchjob("ns", "b", workers=8, min_r=1, max_r=8)]
    rows = {r["job"]: r for r in build_rows(objs, cfg, b.NOW)["default"]}
    assert rows["ns/a"]["admittedWhole"] == {
        "wholeGangUpTo": 4, "gang": 4,
        "message": "admitted whole (wholeGangUpTo 4): its gang is its max, 4 workers; it starts whole and is "
                   "never shrunk"}
    assert rows["ns/b"]["admittedWhole"] is None  # max 8: above the key
    table = render(build_rows(objs, cfg, b.NOW))
    assert [line.split()[4] for line in table.splitlines() if line.split()[:1] == ["ns/a"]] == ["whole"]
    assert build_rows(objs, cfg_of(defaults={"wholeGangUpTo": 0}), b.NOW)["default"][0]["admittedWhole"] is None
    by_default = {r["job"]: r for r in build_rows(objs, ElasticConfig(), b.NOW)["default"]}
    assert by_default["ns/a"]["admittedWhole"] == rows["ns/a"]["admittedWhole"]  # the default is 4


def test_agent_bounds_of_a_whole_job_are_the_simulators() -> None:
    """The simulator gives a job admitted whole the bounds max..max (``engine._arrive``); the agent reads
    the same from the PodGroup's gang (``world.current_bounds``: minMember less the master is the
    floor), the job's own elasticPolicy and its pods' PET_NNODES saying 1..4."""
    cfg = cfg_of(defaults={"wholeGangUpTo": 4})
    objs = [b.node("n0"), b.queue("default"), *whole(b.elastic_job("ns", "a", min_r=1, max_r=4, nodes=["n0"],
                                                                    master=True), 5),
            b.pytorchjob("ns", "a", workers=4, min_r=1, max_r=4, master=True),
            *b.elastic_job("ns", "c", min_r=1, max_r=4, nodes=["n0"]), b.pytorchjob("ns", "c", workers=4, min_r=1,
                                                                                 max_r=4)]
    world = build_world(b.snapshot_of(*objs, cfg=cfg), cfg, b.NOW)
    assert world.jobs["ns/a"].bounds == ElasticBounds(4, 4)
    assert world.jobs["ns/c"].bounds == ElasticBounds(1, 4)  # its PodGroup says its min: as before
