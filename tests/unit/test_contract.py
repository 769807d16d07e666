"""The annotation contract (``policy/contract.py``): one codec for what we share with the job kit and
for the agent's own records; the kit (standard library only, it imports nothing of ours) mirrors the
keys and formats it reads, and these tests hold the two together."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from volcano_elastic_job import checkpoint as kit_checkpoint
from volcano_elastic_job import podinfo

from elastic_controller.execute.decisions import hold_decision, kind_of
from elastic_controller.policy import contract, keys
from elastic_controller.policy.contract import Decision, Kind, ScaleRecord
from elastic_controller.policy.decisions import HoldNote, HoldReason
from elastic_controller.policy.model import PodGroupView
from elastic_controller.policy.resume import plan_stamp_for
from elastic_controller.policy.times import parse_time

AT = "2026-01-01T13:00:00Z"


# ------------------------------------------------------------------ shared with the job kit

def test_the_kit_reads_the_keys_the_contract_writes() -> None:
    kit = {podinfo.EVICT_AFTER, podinfo.LAST_CHECKPOINT_TIME, podinfo.TARGET_WORKERS}
    assert kit == set(contract.SHARED_WITH_JOB)
    assert podinfo.PREFIX == keys.PREFIX


def _downward_api_file(tmp_path: Path, annotations: dict[str, str]) -> str:
    """The file the kubelet writes for the downward-API volume: ``key="value"`` lines (Go-quoted)."""
    path = tmp_path / "annotations"
    path.write_text("".join(f"{k}={json.dumps(v)}\n" for k, v in annotations.items()))
    return str(path)


@pytest.mark.parametrize("when", [datetime(2026, 1, 1, 13, 0, 0, tzinfo=UTC),
                                  datetime(2026, 7, 1, 23, 59, 59, tzinfo=UTC)])
@pytest.mark.parametrize("size", [1, 4, 128])
def test_what_the_agent_writes_the_kit_reads_back(tmp_path: Path, when: datetime, size: int) -> None:
    path = _downward_api_file(tmp_path, {keys.EVICT_AFTER: contract.encode_time(when),
                                         keys.TARGET_WORKERS: contract.encode_count(size)})
    assert podinfo.eviction_notice(path) == when
    assert podinfo.target_workers(path) == size


def test_what_the_kit_writes_the_agent_reads_back() -> None:
    when = datetime(2026, 3, 4, 5, 6, 7, 890_000, tzinfo=timezone(timedelta(hours=2)))
    written = kit_checkpoint.format_time(when)
    assert written == contract.encode_time(when)  # one format on both sides: whole seconds, UTC, Z
    assert contract.decode_time(written) == when.replace(microsecond=0)
    assert podinfo.parse_time(written) == contract.decode_time(written)


def test_counts() -> None:
    assert contract.decode_count(contract.encode_count(3)) == 3
    assert contract.decode_count(" 7 ") == 7
    assert contract.decode_count("three") is None and contract.decode_count("-1") is None
    assert contract.decode_count(None) is None
    with pytest.raises(ValueError):
        contract.encode_count(-1)


# ------------------------------------------------------------------ the agent's records

DECISIONS = [
    contract.down(AT, 2, "team-b/b"),
    contract.down_notice(AT, 3, "team-b/b"),
    contract.down_preempted(AT),
    contract.up_lifting(AT, 2, "room on n1"),
    contract.up_lifted(AT, 1, 2, "room on n1"),
    contract.held(AT, HoldReason.COOLDOWN, "cooling down until 13:05"),
    contract.gang_waiting(AT, "no room yet"),
    contract.gang_not_executed(AT, 2, "pdb: refused"),
    contract.gang_noticed(AT, 2, "fits once they leave"),
    contract.gang_evicted(AT, 2, "fits now"),
    contract.taken_back(AT, "cooldown of X taken back", "team-b/b"),
    contract.forgotten(AT, "plan to evict for team-b/b dropped", "team-b/b"),
]


@pytest.mark.parametrize("said", DECISIONS, ids=lambda d: d.kind + "-" + (d.path or d.code or "x"))
def test_a_decision_round_trips(said: Decision) -> None:
    raw = said.encode()
    assert Decision.decode(raw) == said
    assert contract.sentence_of(raw) == said.sentence and said.sentence.startswith(f"{AT} ")
    assert len(raw) <= contract.MAX_TEXT


def test_a_long_decision_keeps_its_data_and_is_cut_in_its_sentence() -> None:
    said = contract.gang_waiting(AT, "x" * 2000)
    raw = said.encode()
    assert len(raw) == contract.MAX_TEXT
    back = Decision.decode(raw)
    assert back is not None and back.kind == Kind.WAITING and back.at == AT
    assert said.text.startswith(back.text) and len(back.text) < len(said.text)
    # stored and read back again: the same (a cut text compares equal to its stored self)
    assert Decision.decode(back.encode()) == back


def test_a_hold_s_kind_carries_its_reason_code() -> None:
    note = HoldNote("what fits is not worth a restart", "team-a/a", HoldReason.BELOW_MIN_GAIN)
    raw = hold_decision(AT, note).encode()
    assert kind_of(raw) == "held (BelowMinScaleUpGain)"
    assert Decision.decode(raw) == Decision(AT, Kind.HELD, f"held (BelowMinScaleUpGain): {note}",
                                            code=HoldReason.BELOW_MIN_GAIN)


def test_a_value_not_ours_is_no_decision() -> None:
    for raw in ("", "hello", '{"kind": "nonsense", "at": "x"} words', "{not json", "[1, 2]"):
        assert Decision.decode(raw) is None or Decision.decode(raw).kind == ""  # type: ignore[union-attr]
    assert contract.sentence_of("hello") == "hello"


# The compatibility path: what an agent before the structured format wrote (its f-strings verbatim).
OLD = {
    f"{AT} down: 2 elastic worker(s) evicted to make room for team-b/b": (Kind.DOWN, "team-b/b", 2, "evict"),
    f"{AT} down: eviction notice to 3 elastic worker(s) to make room for team-b/b":
        (Kind.DOWN, "team-b/b", 3, "notice"),
    f"{AT} down: Volcano preempted worker(s) of this job (counted as a scale event)": (Kind.DOWN, "", 0, "preempted"),
    f"{AT} up: lifting 2 gate(s); room on n1": (Kind.UP, "", 2, "lifting"),
    f"{AT} up: 1 of 2 gate(s) lifted; room on n1": (Kind.UP, "", 0, "lifted"),
    f"{AT} held (Cooldown): cooling down": (Kind.HELD, "", 0, ""),
    f"{AT} waiting: plan to evict 2 not executed (pdb: refused)": (Kind.NOT_EXECUTED, "", 0, ""),
    f"{AT} waiting: no room yet": (Kind.WAITING, "", 0, ""),
    f"{AT} eviction notice given to 2 elastic worker(s) for it: why": (Kind.NOTICE, "", 0, ""),
    f"{AT} evicted 2 elastic worker(s) for it: why": (Kind.EVICTED, "", 0, ""),
}


@pytest.mark.parametrize("raw", sorted(OLD))
def test_an_old_prose_decision_is_still_read(raw: str) -> None:
    said = Decision.decode(raw)
    assert said is not None
    assert (said.kind, said.gang, said.n, said.path) == OLD[raw]
    assert said.at == AT and said.sentence == raw


def test_the_old_prose_and_the_new_format_sort_alike() -> None:
    """The write rate (execute/decisions.py) compares kinds: an old stored value and the new one for
    the same decision are the same kind, so the upgrade records no extra Event."""
    assert kind_of(f"{AT} held (Cooldown): cooling down") == kind_of(contract.held(AT, "Cooldown", "x").encode())
    assert kind_of(f"{AT} waiting: no room") == kind_of(contract.gang_waiting(AT, "y").encode()) == Kind.WAITING


def _pg(decision: str, direction: str = "down") -> PodGroupView:
    return PodGroupView(namespace="team-a", name="a", min_member=1, queue="default",
                        annotations={keys.LAST_SCALE_DIRECTION: direction, keys.LAST_DECISION: decision})


@pytest.mark.parametrize("raw", [contract.down(AT, 2, "team-b/b").encode(),
                                 contract.down_notice(AT, 2, "team-b/b").encode(),
                                 f"{AT} down: 2 elastic worker(s) evicted to make room for team-b/b"])
def test_a_plan_s_own_stamp_is_recognised_from_its_data(raw: str) -> None:
    assert plan_stamp_for(_pg(raw), "team-b/b")
    assert not plan_stamp_for(_pg(raw), "team-b/b2") and not plan_stamp_for(_pg(raw), "b/b")
    assert not plan_stamp_for(_pg(raw, "up"), "team-b/b")


def test_the_scale_record_round_trips() -> None:
    rec = ScaleRecord("0123abcd", "agent-1", AT, "evict", "team-b/b", {"team-a/a-worker-5": "u5"},
                      {keys.LAST_SCALE_TIME: "2026-01-01T12:00:00Z"})
    assert ScaleRecord.decode(rec.encode()) == rec
    assert rec.time == parse_time(AT)
    assert ScaleRecord.decode("not json") is None and ScaleRecord.decode('{"id": 1}') is None
