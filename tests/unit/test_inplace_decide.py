"""Issue 39, the agent's side of in-place resizing in ``policy.cycle.decide`` (pure): a job whose
PyTorchJob says ``volcano-elastic.io/resize: in-place`` is shrunk by telling its victims to leave
(``ShrinkInPlace``, no restart spent) and told each event's generation (``AnnounceSize``); its
victims are evicted once their pod says ``left`` or their wait ran out; a grow bumps the generation."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from elastic_controller.config import parse_config
from elastic_controller.policy import keys
from elastic_controller.policy.actions import (
    AnnounceSize,
    Evict,
    EvictDueNotice,
    GiveNotice,
    LiftGates,
    ShrinkInPlace,
    SpendRestart,
    WithdrawNotice,
)
from elastic_controller.policy.cycle import decide
from elastic_controller.policy.restart_count import restarts_to_count
from elastic_controller.policy.settings import ElasticConfig
from tests.harness import builders as b
from tests.harness.examples import NOW, example_items, snapshot_of

GANG = "team-nlp/bert"
JOB = "team-vision/resnet"


def _in_place(items: list[Any], *, generation: int = 0, restarts_used: int | None = None) -> None:
    """The example's resnet job opts in (its PyTorchJob, added or annotated), its pods at ``generation``."""
    jobs = [o for o in items if o["kind"] == "PyTorchJob" and o["metadata"]["name"] == "resnet"]
    if not jobs:
        job = b.pytorchjob("team-vision", "resnet", workers=16, min_r=4, max_r=16, queue="vision")
        job["spec"]["elasticPolicy"]["maxRestarts"] = 3
        items.append(job)
        jobs = [job]
    jobs[0]["metadata"].setdefault("annotations", {})[keys.RESIZE] = keys.RESIZE_IN_PLACE
    for o in items:
        if restarts_used is not None and o["kind"] == "PodGroup" and o["metadata"]["name"] == "resnet":
            o["metadata"].setdefault("annotations", {})[keys.RESTARTS_USED] = str(restarts_used)
        if generation and o["kind"] == "Pod" and o["metadata"]["name"].startswith("resnet-"):
            o["metadata"].setdefault("annotations", {})[keys.RESIZE_GENERATION] = str(generation)


def test_a_shrink_in_place_tells_the_victims_to_leave_and_spends_no_restart() -> None:
    items = example_items("scale-down-for-gang")
    _in_place(items, generation=3)
    d = decide(snapshot_of(items), ElasticConfig(), NOW)
    assert d.of(Evict) == () and d.of(GiveNotice) == () and d.of(SpendRestart) == ()
    (shrink,) = d.of(ShrinkInPlace)
    assert shrink.gang == GANG and [n.victim for n in shrink.victims] == list(d.plan.evictions)
    # the bounded wait: inPlaceLeaveSeconds (default 60), whole seconds, like a notice's deadline
    assert {n.evict_after for n in shrink.victims} == {NOW + timedelta(seconds=60)}
    (size,) = [a for a in d.of(AnnounceSize) if a.job == JOB]
    victims = {e.pod for e in d.plan.evictions}
    assert size.generation == 4 and set(size.leaving) == victims and not set(size.pods) & victims
    assert size.size == len(size.pods) == 16 - len(victims)
    # plan -o json and the reasons say so
    shown = d.shown.to_json()["evictions"]
    assert shown and all(e["inPlace"] is True and e["reason"].startswith("in place: ") for e in shown)
    kinds = [type(a).__name__ for a in d.actions]
    assert kinds.index("ShrinkInPlace") < kinds.index("AnnounceSize") < kinds.index("RecordGang")


def test_the_restart_budget_does_not_hold_back_an_in_place_job() -> None:
    spent = example_items("restart-budget-spent")
    assert decide(snapshot_of(spent), ElasticConfig(), NOW).plan.evictions == ()  # 2 of 3 used: no victim
    items = example_items("restart-budget-spent")
    _in_place(items)
    d = decide(snapshot_of(items), ElasticConfig(), NOW)
    (shrink,) = d.of(ShrinkInPlace)
    assert shrink.victims and d.of(SpendRestart) == ()


def _leaving(items: list[Any], *, left: bool, evict_after: datetime, gang: str = GANG) -> None:
    for o in items:
        if o["kind"] == "Pod" and o["metadata"]["name"] == "resnet-worker-15":
            ann = o["metadata"].setdefault("annotations", {})
            ann.update({keys.EVICTED_FOR: gang, keys.EVICT_AFTER: b.ts(evict_after), keys.LEAVING: "4",
                        keys.RESIZE_GENERATION: "4"})
            if left:
                ann[keys.LEFT] = "4"


def test_a_leaving_victim_is_evicted_only_once_it_left_or_its_wait_ended() -> None:
    cfg = ElasticConfig()
    waiting = example_items("scale-down-for-gang")
    _in_place(waiting, generation=3)
    _leaving(waiting, left=False, evict_after=NOW + timedelta(seconds=30))
    d = decide(snapshot_of(waiting), cfg, NOW)
    assert d.of(EvictDueNotice) == () and d.of(WithdrawNotice) == ()
    (pending,) = d.notices.pending
    assert pending.facts.in_place and "in place" in pending.reason
    # a checkpoint does not end the wait (it would for a notice): only the job's own leaving does
    for o in waiting:
        if o["kind"] == "PyTorchJob":
            o["metadata"]["annotations"][keys.LAST_CHECKPOINT_TIME] = b.ts(NOW)
    assert decide(snapshot_of(waiting), cfg, NOW).of(EvictDueNotice) == ()

    left = example_items("scale-down-for-gang")
    _in_place(left, generation=3)
    _leaving(left, left=True, evict_after=NOW + timedelta(seconds=30))
    (due,) = decide(snapshot_of(left), cfg, NOW).of(EvictDueNotice)
    assert due.notice.facts.pod == "team-vision/resnet-worker-15" and "left the group" in due.notice.why

    late = example_items("scale-down-for-gang")
    _in_place(late, generation=3)
    _leaving(late, left=False, evict_after=NOW - timedelta(seconds=1))
    d = decide(snapshot_of(late), cfg, NOW)
    (due,) = d.of(EvictDueNotice)
    assert "did not say it left" in due.notice.why
    assert d.shown.evictions[0].in_place and d.shown.to_json()["evictions"][0]["inPlace"] is True


def test_a_leaving_victim_whose_gang_no_longer_needs_it_is_not_withdrawn() -> None:
    items = example_items("scale-down-for-gang")
    _in_place(items, generation=3)
    _leaving(items, left=False, evict_after=NOW + timedelta(seconds=30), gang="team-nlp/gone")
    d = decide(snapshot_of(items), ElasticConfig(), NOW)
    assert d.of(WithdrawNotice) == ()  # its job already re-forms without it
    assert [p.facts.pod for p in d.notices.pending] == ["team-vision/resnet-worker-15"]


def test_an_in_place_shrink_s_record_counts_no_restart_once_its_victim_left() -> None:
    rec = ('{"at":"2026-01-01T12:59:00Z","before":{},"by":"a","gang":"team-nlp/bert","id":"r1",'
           '"path":"in-place","pods":{"ns/gone":"u"}}')
    for path, counted in (("in-place", 0), ("notice", 1)):
        items = b.items(b.podgroup("ns", "j", min_member=1))
        pg = items[0]
        pg["metadata"]["labels"] = {keys.MANAGED_BY_LABEL: keys.MANAGED_BY}
        pg["metadata"]["annotations"] = {keys.SCALE_RECORD: rec.replace("in-place", path),
                                         keys.LAST_SCALE_TIME: "2026-01-01T12:59:00Z",
                                         keys.LAST_SCALE_DIRECTION: "down"}
        assert len(restarts_to_count(b.snapshot_of(items))) == counted


def test_a_grow_in_place_bumps_the_generation_on_every_pod() -> None:
    plain = decide(snapshot_of(example_items("scale-up-into-idle-gpus")), ElasticConfig(), NOW)
    items = example_items("scale-up-into-idle-gpus")
    _in_place(items, generation=2)
    d = decide(snapshot_of(items), ElasticConfig(), NOW)
    lifts = {a.job: a for a in d.of(LiftGates)}
    assert JOB in lifts
    sizes = {a.job: a for a in d.of(AnnounceSize)}
    grown = sizes[JOB]
    assert grown.generation == 3 and grown.leaving == ()
    assert {r.pod for r in lifts[JOB].releases} <= set(grown.pods)
    # the same size as without in place; only the generation is new; other jobs unchanged
    before = {a.job: a for a in plain.of(AnnounceSize)}
    assert (grown.size, grown.pods) == (before[JOB].size, before[JOB].pods)
    assert {j: a for j, a in sizes.items() if j != JOB} == {j: a for j, a in before.items() if j != JOB}
    assert all(r.in_place for r in d.plan.gate_releases if r.job == JOB)
    assert all(g["inPlace"] is True for g in d.shown.to_json()["gateReleases"] if g["job"] == JOB)


def test_a_queue_with_a_leave_setting_sets_the_deadline() -> None:
    cfg = parse_config({"queues": {"vision": {"inPlaceLeaveSeconds": 15, "noticeSeconds": 90}}})
    items = example_items("scale-down-for-gang")
    _in_place(items)
    d = decide(snapshot_of(items, cfg), cfg, NOW + timedelta(microseconds=1))
    (shrink,) = d.of(ShrinkInPlace)
    assert d.of(GiveNotice) == ()  # the in-place leave replaces the notice
    assert {n.evict_after for n in shrink.victims} == {NOW + timedelta(seconds=16)}


def test_plan_says_an_in_place_event_in_json_and_in_its_table(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from elastic_controller.cli import main

    items = example_items("scale-down-for-gang")
    _in_place(items)
    dump = tmp_path / "dump.json"
    dump.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    assert main(["plan", "--from", str(dump), "--now", "2026-01-01T13:00:00Z", "--output", "json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["evictions"] and all(e["inPlace"] is True for e in got["evictions"])
    assert main(["plan", "--from", str(dump), "--now", "2026-01-01T13:00:00Z", "--output", "table"]) == 0
    assert "in place" in capsys.readouterr().out
