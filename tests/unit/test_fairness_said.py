"""Issue 38, the reporting gap: a fairness scale-down is said as one everywhere, not as room made for
a gang. The evictions carry their kind (``EvictionKind.FAIRNESS``, a field, never read back from the
reason's text); the giver's ``ScalingDown`` / ``ScaledDown`` Events and its ``last-decision`` name
the least-served job it gives to; ``status`` shows the giver's ``victimOf.kind`` and the taker's
gated pods as ``Growing`` (workers are being freed for it), not ``NoRoom``, in that cycle."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from elastic_controller.cli.status import build_rows
from elastic_controller.cli.victims import victim_text
from elastic_controller.execute.evictions import execute_evictions
from elastic_controller.execute.executor import CycleReport
from elastic_controller.kube.resources import EVENTS, PODGROUPS
from elastic_controller.policy import keys
from elastic_controller.policy.contract import Decision, Kind, down, sentence_of
from elastic_controller.policy.decisions import CyclePlan, Eviction, EvictionKind
from elastic_controller.policy.model import PodGroupView
from elastic_controller.policy.resume import plan_stamp_for
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.executeworld import evict_action, executor


def _cfg(**changes: Any) -> ElasticConfig:
    base = ElasticConfig()
    return replace(base, defaults=replace(base.defaults, **changes))


def _cluster() -> list[dict[str, Any]]:
    """n0 (8 GPUs) full with ``rich`` (8 of max 8, 10 hours); n1 (2 GPUs) full with ``poor`` (2 of max 4,
    10 minutes): the fairness scale-down gives two of rich's workers to poor."""
    return b.items(b.node("n0", gpus=8), b.node("n1", gpus=2),
                   b.elastic_job("ns", "rich", min_r=1, max_r=8, running=8, nodes=["n0"], scheduled_at=b.ago(36_000)),
                   b.elastic_job("ns", "poor", min_r=1, max_r=4, running=2, nodes=["n1"], scheduled_at=b.ago(600)))


def test_the_fairness_scale_downs_evictions_are_of_their_kind() -> None:
    plan = b.plan_of(*_cluster(), cfg=_cfg())
    assert [(e.pod, e.for_gang, e.kind, e.fairness) for e in plan.evictions] == [
        ("ns/rich-worker-7", "ns/poor", EvictionKind.FAIRNESS, True),
        ("ns/rich-worker-6", "ns/poor", EvictionKind.FAIRNESS, True)]
    assert [e["kind"] for e in plan.to_json()["evictions"]] == ["fairness", "fairness"]
    # a gang's victim is as before, field for field (no "kind" in its JSON)
    gang = Eviction("ns/a-worker-3", "n0", "ns/a", "default", "ns/g", "starving", "uid")
    assert gang.kind == EvictionKind.GANG and not gang.fairness and "kind" not in gang.to_json()


def test_the_givers_last_decision_says_fairness() -> None:
    said = down("2026-01-01T12:00:00Z", 2, "ns/poor", fairness=True).encode()
    back = Decision.decode(said)
    assert back is not None and back.kind == Kind.DOWN and back.gang == "ns/poor" and back.n == 2
    assert back.extra == {"fairness": True}
    sentence = sentence_of(said)
    assert "fairness scale-down" in sentence and "ns/poor, the least-served job" in sentence, sentence
    assert "make room for" not in sentence
    # an interrupted plan's stamp is still recognised as one (the data, not the sentence)
    pg = PodGroupView("ns", "rich", 1, "default", annotations={
        keys.LAST_DECISION: said, keys.LAST_SCALE_DIRECTION: keys.Direction.DOWN.value})
    assert plan_stamp_for(pg, "ns/poor")
    # a gang's stays as it was
    assert sentence_of(down("2026-01-01T12:00:00Z", 2, "ns/g").encode()) == \
        "2026-01-01T12:00:00Z down: 2 elastic worker(s) evicted to make room for ns/g"


def test_the_givers_events_and_stamp_name_the_least_served_job() -> None:
    kube, ex = executor(b.items(b.node("n1"), b.queue("default"),
                                b.pytorchjob("team-a", "a", workers=6, min_r=2, max_r=6),
                                b.elastic_job("team-a", "a", min_r=2, max_r=6, nodes=["n1"])))
    why = "fairness: job team-a/poor waits to grow with 1 of max 4 workers and has had 0.1 GPU-hours"
    evictions = [Eviction(f"team-a/a-worker-{i}", "n1", "team-a/a", "default", "team-a/poor", why,
                          f"uid-team-a-a-worker-{i}", EvictionKind.FAIRNESS) for i in (4, 5)]
    action = evict_action(ex, evictions)
    assert action.fairness
    report = CycleReport(CyclePlan())
    execute_evictions(ex, action, b.NOW, report)
    assert sorted(report.evicted) == ["team-a/a-worker-4", "team-a/a-worker-5"]
    events = {(e["involvedObject"]["kind"], e["reason"]): e["message"] for e in kube.of(EVENTS)}
    for reason in ("ScalingDown", "ScaledDown"):
        said = events[("PyTorchJob", reason)]
        assert "team-a/poor, the least-served job of the queue (fairness scale-down)" in said, said
        assert "gang" not in said, said
    assert why in events[("PyTorchJob", "ScalingDown")]  # its attained service, as the plan said it
    pod = events[("Pod", "EvictedForGang")]
    assert "for the fairness scale-down: its room goes to team-a/poor, the least-served job" in pod, pod
    assert "gang" not in pod and why in pod, pod
    pg = kube.get(PODGROUPS, "a", "team-a")["metadata"]["annotations"]
    decision = Decision.decode(pg[keys.LAST_DECISION])
    assert decision is not None and decision.extra.get("fairness") is True and decision.gang == "team-a/poor"
    assert "fairness scale-down" in decision.text


def test_status_shows_the_giver_and_the_taker_of_a_fairness_scale_down() -> None:
    rows = {r["job"]: r for q in build_rows(_cluster(), _cfg(), b.NOW).values() for r in q}
    victim = rows["ns/rich"]["victimOf"]
    assert victim["for"] == "ns/poor" and victim["kind"] == "fairness" and victim["evicting"] == 2, victim
    assert victim_text(victim) == "SHRINKING 2 for ns/poor (fairness scale-down)"
    gated = rows["ns/poor"]["gatedReason"]
    assert gated["reason"] == "Growing", gated  # not NoRoom: the plan frees room for it this cycle
    assert "being freed for it by the fairness scale-down (from ns/rich)" in gated["message"], gated
    # without the fairness scale-down: no victim, and poor's gated pods have no room
    rows = {r["job"]: r for q in build_rows(_cluster(), _cfg(fairnessScaleDown=False), b.NOW).values() for r in q}
    assert rows["ns/rich"]["victimOf"] is None and rows["ns/poor"]["gatedReason"]["reason"] == "NoRoom"
