"""The restart count as a rule of the cycle's decision (issue 36 F2 kept through issue 37's seam): a
down scale record one of whose victims left, not yet ``restart-counted``, yields ``SpendRestart(job,
used + 1, record)``; a notice given, pending or withdrawn yields none; the same cycle's plan counts
the pending restart already (the budget rule), and so do the restarts its shrinks spend."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from elastic_controller.policy import contract, keys
from elastic_controller.policy.actions import Evict, SpendRestart
from elastic_controller.policy.cycle import decide
from elastic_controller.policy.model import Snapshot
from elastic_controller.policy.parse import parse_objects
from elastic_controller.policy.times import format_time
from tests.harness import builders as b
from tests.harness.legacy import legacy_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "plan"
NOW = datetime.fromisoformat("2026-01-01T13:00:00+00:00")
VICTIM_JOB = "team-vision/resnet"


def example(name: str, edit: Any) -> Snapshot:
    items = json.loads((EXAMPLES / f"{name}.json").read_text())["items"]
    edit(items)
    return parse_objects(items, legacy_config())[0]


RECORD_ID = "0123456789abcdef"
LONG_AGO = format_time(NOW - timedelta(hours=2))  # the record's stamp: its cooldown long over


def recorded(pods: dict[str, str], *, used: str | None = "1", counted: str | None = None, path: str = "notice",
             at: str = LONG_AGO, max_restarts: int = 10) -> Any:
    """An edit of the example: resnet's PodGroup carries a down record on ``pods`` (ns/name -> uid)."""
    rec = contract.ScaleRecord(RECORD_ID, "agent-1", LONG_AGO, path, "team-nlp/other", pods, {})

    def edit(items: list[Any]) -> None:
        for o in items:
            if o["kind"] == "PodGroup" and o["metadata"]["name"] == "resnet":
                ann = o["metadata"].setdefault("annotations", {})
                ann.update({keys.LAST_SCALE_TIME: at, keys.LAST_SCALE_DIRECTION: "down",
                            keys.SCALE_RECORD: rec.encode()})
                if used is not None:
                    ann[keys.RESTARTS_USED] = used
                if counted is not None:
                    ann[keys.RESTART_COUNTED] = counted
        job = b.pytorchjob("team-vision", "resnet", workers=16, min_r=4, max_r=16, queue="vision")
        job["spec"]["elasticPolicy"]["maxRestarts"] = max_restarts
        items.append(job)

    return edit


GONE = {"team-vision/resnet-worker-16": "uid-gone"}  # evicted since: no such pod any more


def test_a_victim_gone_counts_one_restart_on_its_record() -> None:
    d = decide(example("scale-down-for-gang", recorded(GONE)), legacy_config(), NOW)
    assert d.of(SpendRestart) == (SpendRestart(VICTIM_JOB, 2, RECORD_ID),)
    kinds = [type(a).__name__ for a in d.actions]
    assert kinds.index("SpendRestart") < kinds.index("Evict")  # counted before this cycle's shrinks
    # this cycle's shrink of the same job counts on from the pending restart
    (evict,) = d.of(Evict)
    assert evict.restarts == (SpendRestart(VICTIM_JOB, 3),)


def test_a_pod_replaced_under_the_same_name_is_a_victim_that_left() -> None:
    d = decide(example("scale-down-for-gang", recorded({"team-vision/resnet-worker-15": "an-older-uid"})),
               legacy_config(), NOW)
    assert d.of(SpendRestart) == (SpendRestart(VICTIM_JOB, 2, RECORD_ID),)


def test_no_restart_while_the_victims_still_run_or_once_counted_or_for_another_stamp() -> None:
    running = {"team-vision/resnet-worker-15": ""}  # under notice, say: nothing restarted yet
    for edit in (recorded(running), recorded(GONE, counted=RECORD_ID),
                 recorded(GONE, at=format_time(NOW - timedelta(hours=1))),  # a later stamp without its record
                 recorded(GONE, path="up")):
        d = decide(example("scale-down-for-gang", edit), legacy_config(), NOW)
        assert d.of(SpendRestart) == ()
    d = decide(example("scale-down-for-gang", recorded(GONE, counted="another-record")), legacy_config(), NOW)
    assert d.of(SpendRestart) == (SpendRestart(VICTIM_JOB, 2, RECORD_ID),)


def test_an_unreadable_count_is_repaired_from_zero() -> None:
    d = decide(example("scale-down-for-gang", recorded(GONE, used="lots")), legacy_config(), NOW)
    assert d.of(SpendRestart) == (SpendRestart(VICTIM_JOB, 1, RECORD_ID),)


def test_the_plan_counts_a_pending_restart_against_the_budget() -> None:
    # maxRestarts 3, 1 counted: one more shrink leaves 1 in reserve, allowed. With a restart that
    # happened and is not counted yet, the job has 2 used: a shrink would leave none in reserve.
    cfg = legacy_config()
    counted = decide(example("scale-down-for-gang", recorded({}, max_restarts=3)), cfg, NOW)
    assert [e.job for e in counted.plan.evictions] and {e.job for e in counted.plan.evictions} == {VICTIM_JOB}
    pending = decide(example("scale-down-for-gang", recorded(GONE, max_restarts=3)), cfg, NOW)
    assert pending.of(SpendRestart) == (SpendRestart(VICTIM_JOB, 2, RECORD_ID),)
    assert VICTIM_JOB not in {e.job for e in pending.plan.evictions}
    assert pending.of(Evict) == ()


def test_status_shows_a_pending_restart_as_the_plan_counts_it() -> None:
    from elastic_controller.cli.status import build_rows

    items = json.loads((EXAMPLES / "scale-down-for-gang.json").read_text())["items"]
    recorded(GONE, max_restarts=3)(items)
    rows = [r for queue in build_rows(items, legacy_config(), NOW).values() for r in queue]
    (resnet,) = [r for r in rows if r["restarts"] is not None]
    assert resnet["restarts"]["used"] == 2 and resnet["restarts"]["max"] == 3
