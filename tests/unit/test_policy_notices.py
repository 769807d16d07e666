"""Eviction notices already given: due, pending or withdrawn (policy.notices, pure)."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from elastic_controller.config import parse_config
from elastic_controller.policy import keys
from elastic_controller.policy.notices import notice_deadline, review_notices
from elastic_controller.policy.settings import ElasticConfig
from tests.harness.builders import NOW, ago, elastic_job, gang, node, pod, pytorchjob, queue, snapshot_of, ts

CFG = parse_config({"queues": {"research": {"noticeSeconds": 120}}})
VICTIM = "ns/a-worker-3"


def cluster(*, evict_after: str | None = ts(NOW + timedelta(seconds=60)), evicted_for: str | None = "ns/g",
            victim_checkpoint: datetime | None = None, sibling_checkpoint: datetime | None = None,
            job_checkpoint: datetime | None = None, gang_placed: int = 0, with_gang: bool = True,
            victim_deleting: bool = False) -> list[Any]:
    """Job a (research queue, 4 workers running on n0) whose worker-3 is under notice for gang g (2 pods)."""
    objs: list[Any] = [node("n0"), node("n1"), queue("research"), queue("default"),
                       *elastic_job("ns", "a", min_r=2, max_r=4, nodes=["n0"], queue="research")]
    for o in objs:
        meta = o.get("metadata", {})
        ann = meta.get("annotations")
        if o["kind"] == "Pod" and meta["name"] == "a-worker-3":
            if evict_after is not None:
                ann[keys.EVICT_AFTER] = evict_after
            if evicted_for is not None:
                ann[keys.EVICTED_FOR] = evicted_for
            if victim_checkpoint is not None:
                ann[keys.LAST_CHECKPOINT_TIME] = ts(victim_checkpoint)
            if victim_deleting:
                meta["deletionTimestamp"] = ts(NOW)
        if o["kind"] == "Pod" and meta["name"] == "a-worker-0" and sibling_checkpoint is not None:
            ann[keys.LAST_CHECKPOINT_TIME] = ts(sibling_checkpoint)
    if job_checkpoint is not None:
        job = pytorchjob("ns", "a", workers=4, min_r=2, max_r=4, queue="research")
        job["metadata"]["annotations"] = {keys.LAST_CHECKPOINT_TIME: ts(job_checkpoint)}
        objs.append(job)
    if with_gang:
        g = gang("ns", "g", members=2, gpus=1)
        for o in g[1:1 + gang_placed]:
            o["spec"]["nodeName"] = "n1"
            o["status"]["phase"] = "Running"
        objs += g
    return objs


def review(objs: list[Any], cfg: ElasticConfig = CFG, now: datetime = NOW,
           given_deadlines: dict[str, datetime] | None = None) -> Any:
    return review_notices(snapshot_of(objs, cfg=cfg), cfg, now, given_deadlines)


def outcome(r: Any) -> tuple[str, str]:
    for kind in ("due", "pending", "withdrawn"):
        entries = getattr(r, kind)
        if entries:
            (e,) = entries
            assert e.facts.pod == VICTIM
            return kind, getattr(e, "why", "") or getattr(e, "reason", "")
    return "none", ""


# notice began at NOW + 60 - 120 = NOW - 60
CASES = [
    ("running notice", {}, "pending", "until 2026-01-01T13:01:00Z (60s left"),
    ("notice ended", {"evict_after": ts(NOW)}, "due", "notice ended at 2026-01-01T13:00:00Z"),
    ("notice long over", {"evict_after": ts(ago(600))}, "due", "notice ended"),
    ("checkpoint after the notice began, on the victim", {"victim_checkpoint": ago(30)}, "due",
     "checkpointed at 2026-01-01T12:59:30Z, after the notice began at 2026-01-01T12:59:00Z"),
    ("checkpoint after the notice began, on a sibling pod", {"sibling_checkpoint": ago(1)}, "due", "checkpointed"),
    ("checkpoint after the notice began, on the PyTorchJob", {"job_checkpoint": ago(59)}, "due", "checkpointed"),
    # Found on real nodes: the job answered 0.5 s after the notice, in the second it began.
    ("checkpoint exactly when the notice began", {"victim_checkpoint": ago(60)}, "due", "checkpointed"),
    ("checkpoint in the second before (rounding)", {"victim_checkpoint": ago(61)}, "due", "checkpointed"),
    ("checkpoint before the notice", {"victim_checkpoint": ago(62), "job_checkpoint": ago(3600)}, "pending",
     "60s left"),
    ("newest of several wins", {"victim_checkpoint": ago(3600), "sibling_checkpoint": ago(10),
                                "job_checkpoint": ago(7200)}, "due", "checkpointed at 2026-01-01T12:59:50Z"),
    ("unreadable evict-after", {"evict_after": "soon"}, "due", "'soon' cannot be read"),
    ("gang placed otherwise", {"gang_placed": 2}, "withdrawn", "gang ns/g is placed (2 of minMember 2"),
    ("gang half placed still needs it", {"gang_placed": 1}, "pending", ""),
    ("gang deleted", {"with_gang": False}, "withdrawn", "gang ns/g is gone"),
    ("evicted-for removed", {"evicted_for": None}, "withdrawn", "evicted-for is gone"),
    ("withdrawal wins over due", {"gang_placed": 2, "evict_after": ts(ago(600))}, "withdrawn", "placed"),
    ("victim already terminating", {"victim_deleting": True}, "none", ""),
    ("no notice (an interrupted plan: execute/resume.py resumes those)", {"evict_after": None}, "none", ""),
]


@pytest.mark.parametrize(("kw", "kind", "needle"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_review(kw: dict[str, Any], kind: str, needle: str) -> None:
    got_kind, text = outcome(review(cluster(**kw)))
    assert got_kind == kind
    assert needle in text


def test_facts_and_the_gang_wait_reason() -> None:
    r = review(cluster())
    (p,) = r.pending
    assert (p.facts.gang, p.facts.job, p.facts.queue, p.facts.node) == ("ns/g", "ns/a", "research", "n0")
    assert p.seconds_left == 60 and r.pending_for("ns/g") == (p,) and r.pending_for("ns/x") == ()
    assert p.reason == ("victim ns/a-worker-3 is under an eviction notice until 2026-01-01T13:01:00Z (60s left; "
                        "sooner if job ns/a records a checkpoint)")


def test_the_queues_notice_decides_when_it_began() -> None:
    # the same pod and checkpoint; a 30 s notice began 30 s before its end, after the checkpoint
    short = parse_config({"queues": {"research": {"noticeSeconds": 30}}})
    assert outcome(review(cluster(victim_checkpoint=ago(45)), cfg=short))[0] == "pending"
    assert outcome(review(cluster(victim_checkpoint=ago(45))))[0] == "due"


def test_the_agents_own_deadline_wins_over_a_later_one_on_the_pod() -> None:
    uid = "uid-ns-a-worker-3"
    pushed = cluster(evict_after=ts(NOW + timedelta(hours=5)))  # the job moved its own notice back
    assert outcome(review(pushed, given_deadlines={uid: NOW - timedelta(seconds=1)}))[0] == "due"
    # an earlier time on the pod is not lengthened by the agent's memory
    assert outcome(review(cluster(evict_after=ts(ago(1))), given_deadlines={uid: NOW + timedelta(hours=1)}))[0] == "due"
    # and an unreadable one is read from memory
    got = review(cluster(evict_after="garbage"), given_deadlines={uid: NOW + timedelta(seconds=5)})
    assert got.pending[0].seconds_left == 5


def test_nothing_under_notice_is_cheap_and_empty() -> None:
    objs = [node("n0"), *elastic_job("ns", "a", min_r=2, max_r=4, nodes=["n0"]), pod("ns", "x")]
    r = review(objs)
    assert (r.due, r.pending, r.withdrawn) == ((), (), ())


@pytest.mark.parametrize(("now", "seconds", "want"), [
    (NOW, 120, NOW + timedelta(seconds=120)),
    (NOW + timedelta(microseconds=1), 10, NOW + timedelta(seconds=11)),
    (NOW + timedelta(milliseconds=999), 0, NOW + timedelta(seconds=1)),
])
def test_notice_deadline_rounds_up_to_whole_seconds(now: datetime, seconds: int, want: datetime) -> None:
    assert notice_deadline(now, seconds) == want
    assert ts(want) == ts(notice_deadline(now, seconds))  # survives the annotation's format


# ---------------------------------------------------------------------- properties
@settings(max_examples=300, deadline=None)
@given(
    notice=st.integers(0, 600),
    left=st.integers(-900, 900),  # evict-after relative to now
    checkpoint=st.one_of(st.none(), st.integers(-1800, 60)),  # relative to now
    placed=st.integers(0, 2),
)
def test_a_notice_is_never_shortened_except_by_a_newer_checkpoint(notice: int, left: int, checkpoint: int | None,
                                                                  placed: int) -> None:
    cfg = parse_config({"queues": {"research": {"noticeSeconds": notice}}})
    deadline = NOW + timedelta(seconds=left)
    cp = NOW + timedelta(seconds=checkpoint) if checkpoint is not None else None
    r = review(cluster(evict_after=ts(deadline), victim_checkpoint=cp, gang_placed=placed), cfg=cfg)
    kind, _ = outcome(r)
    began = deadline - timedelta(seconds=notice + 1)  # a second of rounding
    if placed >= 2:
        assert kind == "withdrawn"  # the gang does not need it any more
    elif kind == "due":
        assert deadline <= NOW or (cp is not None and cp >= began)
    else:
        assert kind == "pending"
        assert deadline > NOW and (cp is None or cp < began)
        assert r.pending[0].seconds_left == left


def _partly_executed(counts: str, running: int, notice_left: int) -> list[Any]:
    """v (counts ``counts``) was at 8; four victims (w4..w7) were noticed for g; w5..w7 were evicted, w4's
    eviction was refused (a PodDisruptionBudget); g is placed on the freed GPUs."""
    from tests.harness.builders import constrained

    v = constrained(elastic_job("ns", "v", min_r=2, max_r=8, nodes=["n0"], running=running, gated_rest=False),
                    counts=counts)
    for o in v:
        if o["metadata"]["name"] == "v-worker-4":
            o["metadata"]["annotations"].update({keys.EVICTED_FOR: "ns/g",
                                                 keys.EVICT_AFTER: ts(NOW + timedelta(seconds=notice_left))})
    v = [o for o in v if o["metadata"]["name"] not in ("v-worker-5", "v-worker-6", "v-worker-7")]
    g = gang("ns", "g", members=1, gpus=1)
    g[1]["spec"]["nodeName"] = "n0"
    g[1]["status"]["phase"] = "Running"
    return [node("n0", gpus=8), *v, *g]


def test_the_rest_of_a_partly_executed_victim_group_is_not_withdrawn() -> None:
    # v runs 5 (not an allowed count of 2,4,8); evicting w4 brings it to 4: its notice runs on although
    # g no longer needs it (withdrawing it left v at 5 for good), due when it ends, pending before.
    cfg = ElasticConfig(defaults=CFG.queue_policy("research"))
    due = review_notices(snapshot_of(*_partly_executed("2,4,8", 5, -5), cfg=cfg), cfg, NOW)
    assert [d.facts.pod for d in due.due] == ["ns/v-worker-4"] and due.withdrawn == ()
    pending = review_notices(snapshot_of(*_partly_executed("2,4,8", 5, 30), cfg=cfg), cfg, NOW)
    assert [p.facts.pod for p in pending.pending] == ["ns/v-worker-4"] and pending.withdrawn == ()
    # At an allowed count (counts 2,5,8: 5 is one), the notice is withdrawn as usual.
    usual = review_notices(snapshot_of(*_partly_executed("2,5,8", 5, -5), cfg=cfg), cfg, NOW)
    assert [w.facts.pod for w in usual.withdrawn] == ["ns/v-worker-4"] and usual.due == ()


def test_a_lost_nodes_pod_does_not_count_toward_the_rest_of_a_victim_group() -> None:
    # As above (v at 5 of 2,4,8; w4 noticed), but w3 runs on n9, which is not Ready: a ghost. v has 4
    # live workers, an allowed count: w4's notice is withdrawn as usual (counting the ghost, it ran on
    # and left v at 3 live workers).
    cfg = ElasticConfig(defaults=CFG.queue_policy("research"))
    objs = _partly_executed("2,4,8", 5, 30)
    for o in objs:
        if o["metadata"]["name"] == "v-worker-3":
            o["spec"]["nodeName"] = "n9"
    r = review_notices(snapshot_of(*objs, node("n9", gpus=8, ready=False), cfg=cfg), cfg, NOW)
    assert [w.facts.pod for w in r.withdrawn] == ["ns/v-worker-4"] and r.pending == () and r.due == ()
