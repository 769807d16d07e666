"""Gate releases (scale up): ARCHITECTURE.md, "The agent's cycle", step 5."""

from __future__ import annotations

from typing import Any

import pytest

from elastic_controller.policy.decisions import CyclePlan
from elastic_controller.policy.settings import ElasticConfig, GatingConfig, QueuePolicy
from tests.harness.builders import ago, elastic_job, gang, node, over_share, plan_of, pod, pytorchjob, queue, ts

GATE = "volcano-elastic.io/scale-up"


def released(plan: CyclePlan) -> list[str]:
    return [g.pod.split("/", 1)[1] for g in plan.gate_releases]


def cfg(**defaults: Any) -> ElasticConfig:
    return ElasticConfig(defaults=QueuePolicy(**defaults))


def job(name: str = "j", **kw: Any) -> list[Any]:
    args: dict[str, Any] = {"min_r": 2, "max_r": 6, "nodes": ["n0"], "running": 3}
    args.update(kw)
    return elastic_job("ns", name, **args)


def test_releases_lowest_index_first_up_to_max() -> None:
    plan = plan_of(node("n0"), *job())
    assert released(plan) == ["j-worker-3", "j-worker-4", "j-worker-5"]
    rel = plan.gate_releases[0]
    assert (rel.job, rel.node, rel.queue) == ("ns/j", "n0", "default") and rel.reason


def test_only_where_it_fits_now() -> None:
    half = cfg(minScaleUpGain=0.5)  # 3 -> 5 workers: +67 %
    assert released(plan_of(node("n0", gpus=5), *job(), cfg=half)) == ["j-worker-3", "j-worker-4"]
    assert released(plan_of(node("n0", gpus=3), *job(), cfg=half)) == []


def test_capacity_promised_to_earlier_releases_is_taken() -> None:
    objs = [node("n0", gpus=4), *job("a", min_r=1, max_r=2, running=1, gpus=2),
            *job("b", min_r=1, max_r=2, running=1, gpus=1)]
    # a: 2 GPUs used, b: 1 -> 1 free; a's gated pod needs 2 (no), b's needs 1 (yes).
    assert released(plan_of(*objs)) == ["b-worker-1"]


def test_releases_on_other_nodes() -> None:
    plan = plan_of(node("n0", gpus=3), node("n1", gpus=2), *job(), cfg=cfg(minScaleUpGain=0.5))
    assert sorted(released(plan)) == ["j-worker-3", "j-worker-4"]
    assert {g.node for g in plan.gate_releases} == {"n1"}


@pytest.mark.parametrize(
    ("limit", "expected"),
    [pytest.param(0, [], id="zero"), pytest.param(1, ["b-worker-1", "b-worker-2", "b-worker-3"], id="one"),
     pytest.param(2, ["b-worker-1", "b-worker-2", "b-worker-3", "a-worker-2", "a-worker-3"], id="two")],
)
def test_max_scale_up_per_cycle_counts_jobs_each_grown_in_full(limit: int, expected: list[str]) -> None:
    objs = [node("n0"), *job("a", min_r=1, max_r=4, running=2), *job("b", min_r=1, max_r=4, running=1)]
    assert released(plan_of(*objs, cfg=cfg(maxScaleUpPerCycle=limit))) == expected


def test_grows_to_the_largest_size_that_fits_in_one_event() -> None:
    # 2 of max 8 running on an 8-GPU node: the six others in one cycle (one restart, not three).
    plan = plan_of(node("n0"), *job(min_r=2, max_r=8, running=2), cfg=cfg(maxScaleUpPerCycle=2))
    assert released(plan) == [f"j-worker-{i}" for i in range(2, 8)]
    assert "grows from 2 to 8 of max 8 workers in one scale event" in plan.gate_releases[0].reason


@pytest.mark.parametrize(
    ("free", "gain", "expected"),
    [pytest.param(1, 0.5, 0, id="+25%-below-0.5"), pytest.param(2, 0.5, 2, id="+50%-at-0.5"),
     pytest.param(1, 0.25, 1, id="+25%-at-0.25"), pytest.param(1, 0.0, 1, id="off")],
)
def test_growth_must_be_worth_a_restart(free: int, gain: float, expected: int) -> None:
    plan = plan_of(node("n0", gpus=4 + free), *job(min_r=2, max_r=8, running=4), cfg=cfg(minScaleUpGain=gain))
    assert len(released(plan)) == expected


def test_room_not_worth_a_restart_goes_to_the_next_job() -> None:
    # a (4 of 4..8, least fulfilled, first) could take n0's free GPU: +25 %, not worth a restart at 0.3;
    # c (3 of 2..4, n1 full) takes it instead: +33 %.
    objs = [node("n0", gpus=5), *job("a", min_r=4, max_r=8, running=4), node("n1", gpus=3),
            *job("c", min_r=2, max_r=4, running=3, nodes=["n1"])]
    plan = plan_of(*objs, cfg=cfg(minScaleUpGain=0.3))
    assert released(plan) == ["c-worker-3"] and plan.gate_releases[0].node == "n0"


def test_first_rendezvous_takes_elastic_workers_without_minimum_gain() -> None:
    # Just placed (10 s ago), never scaled: +1 worker (+25 %) joins its first rendezvous for free.
    objs = [node("n0", gpus=5), *job(min_r=4, max_r=8, running=4, scheduled_at=ago(10))]
    plan = plan_of(*objs)
    assert released(plan) == ["j-worker-4"] and "first rendezvous" in plan.gate_releases[0].reason
    objs = [node("n0", gpus=5), *job(min_r=4, max_r=8, running=4, scheduled_at=ago(60))]
    assert released(plan_of(*objs)) == []  # its rendezvous is over: +25 % is not worth a restart
    objs = [node("n0", gpus=5), *job(min_r=4, max_r=8, running=4, scheduled_at=ago(60))]
    assert released(plan_of(*objs, cfg=cfg(firstRendezvousSeconds=90))) == ["j-worker-4"]


def test_first_rendezvous_goes_first() -> None:
    # b is more fulfilled, but its growth costs no restart.
    objs = [node("n0", gpus=4), *job("a", min_r=1, max_r=2, running=1),
            *job("b", min_r=1, max_r=4, running=2, scheduled_at=ago(5))]
    assert released(plan_of(*objs)) == ["b-worker-2"]


@pytest.mark.parametrize(
    ("direction", "since", "settings", "releases"),
    [
        pytest.param("down", 400, {}, True, id="down-after-cooldown"),
        pytest.param("down", 400, {"scaleUpSnoozeSeconds": 900}, False, id="down-snoozed"),
        pytest.param("up", 400, {"scaleUpSnoozeSeconds": 900}, True, id="up-not-snoozed"),
        pytest.param("down", 1000, {"scaleUpSnoozeSeconds": 900}, True, id="snooze-over"),
    ],
)
def test_snooze_after_a_shrink(direction: str, since: int, settings: dict[str, Any], releases: bool) -> None:
    objs = job(last_scale=ago(since))
    objs[0]["metadata"]["annotations"]["volcano-elastic.io/last-scale-direction"] = direction
    assert bool(plan_of(node("n0"), *objs, cfg=cfg(**settings)).gate_releases) is releases


def test_max_scale_up_is_per_queue() -> None:
    objs = [node("n0"), node("n1"), *job("a", queue="qa"), *job("b", queue="qb", nodes=["n1"])]
    plan = plan_of(*objs, cfg=cfg(maxScaleUpPerCycle=1))
    assert sorted(released(plan)) == ["a-worker-3", "a-worker-4", "a-worker-5",
                                      "b-worker-3", "b-worker-4", "b-worker-5"]
    objs = [node("n0"), node("n1"), *job("a", queue="q"), *job("b", queue="q", nodes=["n1"])]
    assert {r.job for r in plan_of(*objs, cfg=cfg(maxScaleUpPerCycle=1)).gate_releases} == {"ns/a"}


@pytest.mark.parametrize(
    ("last_scale", "settings", "releases"),
    [
        pytest.param(60, {}, False, id="cooling"),
        pytest.param(300, {}, True, id="cooldown-over"),
        pytest.param(60, {"cooldownSeconds": 30}, True, id="short-cooldown"),
        pytest.param(60, {"preemptDuringCooldown": True}, False, id="preempt-flag-does-not-affect-scale-up"),
    ],
)
def test_cooldown(last_scale: int, settings: dict[str, Any], releases: bool) -> None:
    plan = plan_of(node("n0"), *job(last_scale=ago(last_scale)), cfg=cfg(**settings))
    assert bool(plan.gate_releases) is releases


def test_least_fulfilled_job_first() -> None:
    # a: 1..4 running 3 (0.67), b: 1..4 running 1 (0): the one free GPU goes to b.
    objs = [node("n0", gpus=5), *job("a", min_r=1, max_r=4, running=3), *job("b", min_r=1, max_r=4, running=1)]
    assert released(plan_of(*objs)) == ["b-worker-1"]


def test_each_job_grows_to_its_largest_size_least_fulfilled_first() -> None:
    objs = [node("n0"), *job("a", min_r=1, max_r=3, running=1), *job("b", min_r=1, max_r=3, running=1)]
    # Each job grows to its largest size at once, least fulfilled (then lowest index, name) first.
    assert released(plan_of(*objs)) == ["a-worker-1", "a-worker-2", "b-worker-1", "b-worker-2"]


def test_running_jobs_only() -> None:
    # j's min set is not placed (worker-1 is too big to ever fit, so it does not block scale-up either).
    objs = [node("n0"), *job(running=1)]
    big = next(o for o in objs if o["metadata"]["name"] == "j-worker-1")
    big["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "64"
    plan = plan_of(*objs)
    assert released(plan) == [] and plan.scale_up_blocked_by == ()


def test_blocked_while_a_waiting_gang_could_be_placed_by_evicting() -> None:
    # Not yet starving (10 s), but would fit if elastic workers went: no growth at all.
    objs = [node("n0"), *job(running=6), *gang("ns", "g", members=1, gpus=6, waiting_since=ago(10)), node("n1", gpus=1)]
    objs += job("k", min_r=1, max_r=2, running=1, nodes=["n1"], gpus=0)
    plan = plan_of(*objs)
    assert plan.gate_releases == () and plan.scale_up_blocked_by == ("ns/g",)


def test_room_of_a_waiting_gang_that_fits_now_is_set_aside() -> None:
    # 5 GPUs free; the gang's pod takes 4 of them: one gate is lifted around it, nothing blocks.
    plan = plan_of(node("n0"), *job(), *gang("ns", "g", members=1, gpus=4, waiting_since=ago(10)),
                   cfg=cfg(minScaleUpGain=0))
    assert released(plan) == ["j-worker-3"] and plan.scale_up_blocked_by == ()


def test_blocked_while_a_waiting_gang_fits_only_once_terminating_pods_are_gone() -> None:
    objs = [node("n0"), *job(running=5), *gang("ns", "g", members=1, gpus=4, waiting_since=ago(10))]
    for o in objs:
        if o["metadata"]["name"] in ("j-worker-3", "j-worker-4"):  # 3 GPUs free now, 5 once they are gone
            o["metadata"]["deletionTimestamp"] = ago(5)
    plan = plan_of(*objs)
    assert plan.gate_releases == () and plan.scale_up_blocked_by == ("ns/g",)


def test_gang_that_cannot_fit_even_by_evicting_does_not_block() -> None:
    plan = plan_of(node("n0"), *job(), *gang("ns", "g", members=1, gpus=16))
    assert released(plan) == ["j-worker-3", "j-worker-4", "j-worker-5"] and plan.scale_up_blocked_by == ()


def test_gang_missing_pods_does_not_block() -> None:
    g = gang("ns", "g", members=2, gpus=1)
    plan = plan_of(node("n0"), *job(), *g[:2])
    assert len(released(plan)) == 3


def test_gating_disabled() -> None:
    c = ElasticConfig(gating=GatingConfig(enabled=False))
    assert plan_of(node("n0"), *job(), cfg=c).gate_releases == ()


def test_only_our_gate() -> None:
    c = ElasticConfig(gating=GatingConfig(gateName="example.io/other"))
    assert plan_of(node("n0"), *job(), cfg=c).gate_releases == ()
    assert len(released(plan_of(node("n0"), *job(gate="example.io/other"), cfg=c))) == 3


def test_terminating_pods_do_not_count_as_free_now() -> None:
    objs = [node("n0", gpus=4), *job(min_r=1, max_r=2, running=1)]
    objs.append(pod("ns", "leaving", gpus=3, node_name="n0", deleting=True))
    assert released(plan_of(*objs)) == []


def test_gated_pod_without_elastic_role_is_never_released() -> None:
    objs = [node("n0"), *job()]
    for o in objs:
        if o["kind"] == "Pod":
            o["spec"]["containers"][0]["env"] = []  # no PET_NNODES: bounds unknown -> core
    assert released(plan_of(*objs)) == []


def test_job_that_lost_victims_this_cycle_is_not_scaled_up() -> None:
    # The starving gang blocks every release in the cycle it gets its victims.
    objs = [node("n0"), *job(running=5), *gang("ns", "g", members=1, gpus=4)]
    plan = plan_of(*objs)
    assert plan.evictions and plan.gate_releases == ()


def test_gang_its_queue_share_keeps_out_does_not_block() -> None:
    # qa holds its whole deserved share with a fixed-size job: Volcano will not place g (whatever is
    # evicted elsewhere) until a finishes, so b grows into the idle GPUs meanwhile.
    plan = plan_of(*over_share(a_elastic=False))
    assert plan.scale_up_blocked_by == ()
    assert released(plan) == ["b-worker-4", "b-worker-5", "b-worker-6", "b-worker-7"]
    assert [d.decision for d in plan.starving] == ["wait"]


def test_gang_its_own_queue_can_make_room_for_has_its_room_set_aside() -> None:
    # a (qa) is cooling down: g waits for its victims; its 2 GPUs on n1 are kept free for it.
    plan = plan_of(*over_share(a_last_scale=ago(60)), cfg=cfg(minScaleUpGain=0.5))  # b: 4 -> 6
    assert plan.scale_up_blocked_by == ()
    assert released(plan) == ["b-worker-4", "b-worker-5"]



def test_released_only_within_the_queue_share_volcano_admits() -> None:
    # Volcano's view: qa requests 14 (a2's gated pods count), qb 6 -> qb deserves 6, qa 10, which it
    # holds: a2's pods would stay pending, so only b grows (into n1's 4 free GPUs).
    objs = [node("n0"), node("n1"), queue("qa"), queue("qb"),
            *elastic_job("ns", "a", min_r=8, max_r=8, nodes=["n0"], queue="qa"),
            *elastic_job("ns", "a2", min_r=2, max_r=6, running=2, nodes=["n1"], queue="qa"),
            *elastic_job("ns", "b", min_r=2, max_r=6, running=2, nodes=["n1"], queue="qb")]
    assert released(plan_of(*objs)) == ["b-worker-2", "b-worker-3", "b-worker-4", "b-worker-5"]
    without_b = [o for o in objs if not o["metadata"]["name"].startswith("b")]
    assert released(plan_of(*without_b)) == ["a2-worker-2", "a2-worker-3", "a2-worker-4", "a2-worker-5"]


@pytest.mark.parametrize(
    ("annotation", "free", "expected"),
    [pytest.param({"volcano-elastic.io/worker-counts": "2,4,8"}, 4, 2, id="counts-2-4-8-at-2-room-for-4"),
     pytest.param({"volcano-elastic.io/worker-counts": "2,4,8"}, 6, 6, id="counts-to-8"),
     pytest.param({"volcano-elastic.io/worker-counts": "2,8"}, 5, 0, id="counts-no-valid-size-fits"),
     pytest.param({"volcano-elastic.io/worker-step": "3"}, 4, 3, id="step-3"),
     pytest.param({}, 4, 4, id="unconstrained")],
)
def test_grows_only_to_an_allowed_world_size(annotation: dict[str, str], free: int, expected: int) -> None:
    objs = job(min_r=2, max_r=8, running=2)
    objs[0]["metadata"]["annotations"].update(annotation)
    plan = plan_of(node("n0", gpus=2 + free), *objs)
    assert released(plan) == [f"j-worker-{i}" for i in range(2, 2 + expected)]
    if expected and annotation:
        assert "allowed counts" in plan.gate_releases[0].reason


def test_room_a_valid_size_leaves_goes_to_the_next_job() -> None:
    # a (counts 2,4) could place 3 more but takes 2 (to 4); the third pod's GPU goes to b.
    a = job("a", min_r=2, max_r=6, running=2)
    a[0]["metadata"]["annotations"]["volcano-elastic.io/worker-counts"] = "2,4"
    objs = [node("n0", gpus=5), *a, node("n1", gpus=3), *job("b", min_r=3, max_r=4, running=3, nodes=["n1"])]
    plan = plan_of(*objs, cfg=cfg(minScaleUpGain=0.3))
    assert released(plan) == ["a-worker-2", "a-worker-3", "b-worker-3"]
    assert [r.node for r in plan.gate_releases] == ["n0", "n0", "n0"]


@pytest.mark.parametrize(
    ("checkpoint_age", "window", "releases"),
    [pytest.param(600, 300, False, id="checkpointed-10min-ago-window-5min"),
     pytest.param(120, 300, True, id="checkpointed-2min-ago"),
     pytest.param(None, 300, True, id="no-checkpoint-published"),
     pytest.param(600, None, True, id="no-window")],
)
def test_growth_waits_for_a_fresh_checkpoint(checkpoint_age: int | None, window: int | None, releases: bool) -> None:
    objs = job(min_r=2, max_r=6, running=2)
    if checkpoint_age is not None:
        objs[0]["metadata"]["annotations"]["volcano-elastic.io/last-checkpoint-time"] = ts(ago(checkpoint_age))
    plan = plan_of(node("n0"), *objs, cfg=cfg(scaleUpAfterCheckpointSeconds=window))
    assert bool(plan.gate_releases) is releases
    if releases and window is not None and checkpoint_age is not None:
        assert "scaleUpAfterCheckpointSeconds" in plan.gate_releases[0].reason


def test_first_rendezvous_does_not_wait_for_a_checkpoint() -> None:
    objs = job(min_r=2, max_r=6, running=2, scheduled_at=ago(5))
    objs[0]["metadata"]["annotations"]["volcano-elastic.io/last-checkpoint-time"] = ts(ago(3600))
    assert len(plan_of(node("n0"), *objs, cfg=cfg(scaleUpAfterCheckpointSeconds=60)).gate_releases) == 4


# Issue 19: `plan` explains every choice. A job with gated pods that the gates pass over gets a note
# saying why (one per job at most); the notes change no decision.

def notes_of(plan: CyclePlan, job_key: str = "ns/j") -> list[str]:
    return [n for n in plan.notes if n.startswith(f"job {job_key} ")]


def shrunk(since: int, direction: str = "down", **kw: Any) -> list[Any]:
    objs = job(last_scale=ago(since), **kw)
    objs[0]["metadata"]["annotations"]["volcano-elastic.io/last-scale-direction"] = direction
    return objs


def test_a_snoozed_job_says_until_when() -> None:
    # Shrunk 400 s ago (NOW is 13:00:00), snooze 900 s: not before 13:08:20; its cooldown (300 s) is over.
    plan = plan_of(node("n0"), *shrunk(400), cfg=cfg(scaleUpSnoozeSeconds=900))
    assert plan.gate_releases == ()
    (note,) = notes_of(plan)
    assert note.startswith("job ns/j stays at 3 of max 6 workers: snoozed until 2026-01-01T13:08:20Z "
                           "(shrunk at 2026-01-01T12:53:20Z; scaleUpSnoozeSeconds 900:"), note
    # Unset, the snooze is the cooldown (both end at 13:01:40): the snooze is named, and where it comes from.
    (note,) = notes_of(plan_of(node("n0"), *shrunk(200)))
    assert "snoozed until 2026-01-01T13:01:40Z" in note
    assert "scaleUpSnoozeSeconds 300 (unset: its queue's cooldownSeconds)" in note, note


def test_a_cooling_job_says_until_when() -> None:
    plan = plan_of(node("n0"), *shrunk(60, "up"))
    assert plan.gate_releases == ()
    assert notes_of(plan) == ["job ns/j stays at 3 of max 6 workers: in cooldown until 2026-01-01T13:04:00Z "
                              "(cooldownSeconds 300 after its last scale event)"]
    # A snooze shorter than the cooldown: the cooldown is what holds it, and it is named.
    (note,) = notes_of(plan_of(node("n0"), *shrunk(60), cfg=cfg(scaleUpSnoozeSeconds=120)))
    assert "in cooldown until 2026-01-01T13:04:00Z" in note, note


def test_a_cooldown_stamped_on_the_podgroup_says_until_when() -> None:
    # Only the PodGroup's stamp is read (issue 36, T4): the job's copy in 2099 changes nothing.
    objs = [node("n0"), pytorchjob("ns", "j", workers=6, min_r=2, max_r=6), *job()]
    objs[1]["metadata"]["annotations"] = {"volcano-elastic.io/last-scale-time": "2099-01-01T00:00:00Z"}
    assert plan_of(*objs).gate_releases != ()
    pg = next(o for o in objs if o["kind"] == "PodGroup")
    pg["metadata"].setdefault("annotations", {})["volcano-elastic.io/last-scale-time"] = ts(ago(100))
    plan = plan_of(*objs)
    assert plan.gate_releases == ()
    (note,) = notes_of(plan)
    assert "in cooldown until 2026-01-01T13:03:20Z" in note, note


def test_a_job_held_by_its_queues_scale_up_limit_says_so() -> None:
    objs = [node("n0"), node("n1"), *job("a", queue="q"), *job("b", queue="q", nodes=["n1"])]
    plan = plan_of(*objs, cfg=cfg(maxScaleUpPerCycle=1))
    assert {r.job for r in plan.gate_releases} == {"ns/a"} and notes_of(plan, "ns/a") == []
    assert notes_of(plan, "ns/b") == ["job ns/b stays at 3 of max 6 workers: queue q already grew "
                                      "maxScaleUpPerCycle 1 job(s) this cycle (in scale-up order); it is "
                                      "considered again next cycle"]
    off = plan_of(*objs, cfg=cfg(maxScaleUpPerCycle=0))
    assert off.gate_releases == () and [n.split(": ", 1)[1] for n in off.notes] == [
        "queue q has maxScaleUpPerCycle 0 (its jobs do not grow)"] * 2


def test_a_job_waiting_for_its_next_checkpoint_says_so() -> None:
    objs = job(min_r=2, max_r=6, running=2)
    objs[0]["metadata"]["annotations"]["volcano-elastic.io/last-checkpoint-time"] = ts(ago(600))
    plan = plan_of(node("n0"), *objs, cfg=cfg(scaleUpAfterCheckpointSeconds=300))
    assert plan.gate_releases == ()
    assert notes_of(plan) == [f"job ns/j stays at 2 of max 6 workers: its last checkpoint, at {ts(ago(600))}, is "
                              "older than scaleUpAfterCheckpointSeconds 300: growing now would lose the work since; "
                              "it waits for its next checkpoint"]


def test_a_growth_to_no_allowed_count_says_so() -> None:
    # At 2 with counts 2,4,8: one more worker fits (3), but 3 is no allowed count and 4 does not fit.
    objs = job(min_r=2, max_r=8, running=2)
    objs[0]["metadata"]["annotations"]["volcano-elastic.io/worker-counts"] = "2,4,8"
    plan = plan_of(node("n0", gpus=3), *objs)
    assert plan.gate_releases == ()
    assert notes_of(plan) == ["job ns/j stays at 2 of max 8 workers: 3 fit now, but no count from 3 to 3 is one "
                              "of its allowed counts (2,4,8); the room goes to the next job"]


def test_one_note_per_job_and_none_without_room_to_grow_or_when_nothing_fits() -> None:
    # In cooldown and with an old checkpoint: only the cooldown is said (the checkpoint is not reached).
    objs = shrunk(60, "up")
    objs[0]["metadata"]["annotations"]["volcano-elastic.io/last-checkpoint-time"] = ts(ago(3600))
    assert len(plan_of(node("n0"), *objs).notes) == 1
    # Running at its max (no gated pod), or nothing fits: nothing to explain beyond "nothing fits",
    # whether it is in cooldown, past its queue's limit or waiting for a checkpoint (a full cluster
    # would otherwise get a note for every job).
    assert plan_of(node("n0"), *shrunk(60, "up", running=6)).notes == ()
    assert plan_of(node("n0", gpus=3), *job()).notes == ()
    assert plan_of(node("n0", gpus=3), *shrunk(60, "up")).notes == ()
    old = job(min_r=2, max_r=6, running=3)
    old[0]["metadata"]["annotations"]["volcano-elastic.io/last-checkpoint-time"] = ts(ago(3600))  # > the window
    assert plan_of(node("n0", gpus=3), *old).notes == () and len(plan_of(node("n0"), *old).notes) == 1
    full = [node("n0", gpus=6), *job("a", queue="q", running=3), node("n1", gpus=3),
            *job("b", queue="q", nodes=["n1"], running=3)]  # a takes n0's room; b's would not fit on n1
    plan = plan_of(*full, cfg=cfg(maxScaleUpPerCycle=1, minScaleUpGain=0))
    assert {r.job for r in plan.gate_releases} == {"ns/a"} and plan.notes == ()
