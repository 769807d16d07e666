"""The annotation contract, one codec: every annotation shared with the job (the job kit reads some,
the training code writes one) and the agent's own records, written and read only here.

- **Shared with the job** (``SHARED_WITH_JOB``; the kit's ``volcano_elastic_job.podinfo`` mirrors
  the keys and formats it reads, and ``tests/unit/test_contract.py`` holds the two together):
  ``evict-after`` and ``last-checkpoint-time`` (RFC 3339, whole seconds, UTC), ``target-workers``
  (a count); for a job resized in place (``resize: in-place`` on the PyTorchJob) ``resize-generation``,
  ``leaving`` and ``left`` (a generation: a count, ``generation_of``, ``left_at``).
- **The agent's records**: ``last-decision`` and ``scale-record`` are structured data. A scale record
  is JSON (``ScaleRecord``). A ``last-decision`` is a ``Decision``: a JSON object (what it is: kind,
  gang, counts, reason code) followed by the human sentence generated from it, which is what
  ``kubectl describe`` readers read; the agent reads the object back, never the sentence. A
  ``last-decision`` written before this format (plain prose) is still read (``Decision.decode``'s
  compatibility path) so a cluster's stored stamps keep their meaning across the upgrade.
- ``evicted-for`` (``namespace/podgroup``), ``restarts-used``, ``last-scale-time`` and
  ``last-scale-direction`` are plain values with their codecs here.

Every text we store is cut to ``MAX_TEXT`` characters (``bounded``), as written: a longer text would
never compare equal to its stored self.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from . import keys
from .times import format_time, parse_time

MAX_TEXT = 500  # characters of a stored text (last-decision), the structured part included

# The annotations the job kit reads or writes (volcano_elastic_job.podinfo mirrors these names).
SHARED_WITH_JOB = (keys.EVICT_AFTER, keys.LAST_CHECKPOINT_TIME, keys.TARGET_WORKERS, keys.RESIZE,
                   keys.RESIZE_GENERATION, keys.LEAVING, keys.LEFT)


def bounded(text: str, limit: int = MAX_TEXT) -> str:
    return text[:limit]


# ------------------------------------------------------------------ plain values

def encode_time(value: datetime) -> str:
    """``evict-after``, ``last-checkpoint-time``, ``last-scale-time``: RFC 3339, UTC, whole seconds."""
    return format_time(value)


def decode_time(raw: str | None) -> datetime | None:
    return parse_time(raw)


def encode_count(n: int) -> str:
    """``target-workers``, ``restarts-used``: a non-negative integer."""
    if n < 0:
        raise ValueError(f"a count is never negative: {n}")
    return str(n)


def decode_count(raw: str | None) -> int | None:
    """The count, None when absent or not a non-negative integer."""
    if raw is None:
        return None
    text = raw.strip()
    return int(text) if text.isdigit() else None


def in_place(job_annotations: Mapping[str, str] | None) -> bool:
    """Whether a PyTorchJob's annotations opt it in to in-place resizing (``resize: in-place``)."""
    return bool(job_annotations) and (job_annotations or {}).get(keys.RESIZE, "").strip() == keys.RESIZE_IN_PLACE


def generation_of(pod_annotations: Iterable[Mapping[str, str]]) -> int:
    """A job's current in-place generation: the highest ``resize-generation`` its pods carry (0: none
    announced; an unreadable value counts as none)."""
    return max((decode_count(a.get(keys.RESIZE_GENERATION)) or 0 for a in pod_annotations), default=0)


def leaving_at(pod_annotations: Mapping[str, str]) -> int | None:
    """The generation at which a pod leaves its job's group (``leaving``), or None."""
    return decode_count(pod_annotations.get(keys.LEAVING))


def has_left(pod_annotations: Mapping[str, str]) -> bool:
    """Whether a leaving pod says it has left the group at the event it was told to leave at
    (``left`` equal to its ``leaving``)."""
    at = leaving_at(pod_annotations)
    return at is not None and decode_count(pod_annotations.get(keys.LEFT)) == at


# ------------------------------------------------------------------ scale record

@dataclass(frozen=True, slots=True)
class ScaleRecord:
    """The ``scale-record`` annotation: which writer stamped which scale event, on which pods."""

    id: str
    by: str  # the writer's identity
    at: str  # the stamp's last-scale-time, as written
    path: str  # "evict", "notice" or "up"
    gang: str  # the gang evicted for ("" for a scale-up)
    pods: dict[str, str]  # pod ns/name -> uid: the victims, or the pods whose gate is lifted
    before: dict[str, str]  # the scale stamp it replaced (SCALE_KEYS)

    @property
    def time(self) -> datetime | None:
        return parse_time(self.at)

    def encode(self) -> str:
        return json.dumps({"id": self.id, "by": self.by, "at": self.at, "path": self.path, "gang": self.gang,
                           "pods": dict(sorted(self.pods.items())), "before": dict(self.before)},
                          sort_keys=True, separators=(",", ":"))

    @staticmethod
    def decode(text: str | None) -> ScaleRecord | None:
        """The record, or None when absent or not one of ours (a hand-written value is ignored)."""
        if not text:
            return None
        try:
            raw = json.loads(text)
            return ScaleRecord(str(raw["id"]), str(raw["by"]), str(raw["at"]), str(raw["path"]),
                               str(raw.get("gang") or ""), {str(k): str(v) for k, v in dict(raw["pods"]).items()},
                               {str(k): str(v) for k, v in dict(raw.get("before") or {}).items()})
        except (ValueError, KeyError, TypeError, AttributeError):
            return None


# ------------------------------------------------------------------ last-decision

class Kind:
    """What a ``last-decision`` records."""

    DOWN = "down"  # a scale-down stamp (path: evict, notice, preempted)
    UP = "up"  # a scale-up stamp (state: lifting, lifted)
    HELD = "held"  # growth held back (code: a HoldReason)
    WAITING = "waiting"  # a starving gang waits
    EVICTED = "evicted"  # a starving gang's victims were evicted
    NOTICE = "notice"  # a starving gang's victims were put under notice
    NOT_EXECUTED = "not-executed"  # a starving gang's plan was not carried out
    TAKEN_BACK = "taken-back"  # a stamp whose actions never happened was taken back
    FORGOTTEN = "forgotten"  # an interrupted plan was dropped
    ALL = (DOWN, UP, HELD, WAITING, EVICTED, NOTICE, NOT_EXECUTED, TAKEN_BACK, FORGOTTEN)


@dataclass(frozen=True, slots=True)
class Decision:
    """A ``last-decision``: ``at`` (RFC 3339), ``kind`` (``Kind``) and its data; ``text`` is the human
    sentence after the time (generated by the writers' constructors below)."""

    at: str
    kind: str
    text: str
    gang: str = ""
    n: int = 0
    path: str = ""  # DOWN: evict | notice | preempted; UP: lifting | lifted
    code: str = ""  # HELD: the HoldReason; WAITING...: the gang outcome's Event reason
    reason: str = ""  # UP: the plan's reason (said again when the count is corrected)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def sentence(self) -> str:
        """What a person reads: ``<time> <text>``."""
        return f"{self.at} {self.text}"

    @property
    def time(self) -> datetime | None:
        return parse_time(self.at)

    @property
    def sort(self) -> str:
        """The kind as the write rate counts it: a hold's reason code is part of it."""
        return f"{self.kind} ({self.code})" if self.kind == Kind.HELD else self.kind

    def encode(self) -> str:
        """The annotation's value: the data as one JSON object, a space, then the sentence; bounded to
        ``MAX_TEXT`` (the sentence is cut, never the data)."""
        data: dict[str, Any] = {"at": self.at, "kind": self.kind}
        for k in ("gang", "n", "path", "code"):
            v = getattr(self, k)
            if v:
                data[k] = v
        if self.reason:
            data["reason"] = bounded(self.reason, 200)
        data.update(self.extra)
        head = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return bounded(f"{head} {self.sentence}", max(MAX_TEXT, len(head) + 1))

    @staticmethod
    def decode(raw: str | None) -> Decision | None:
        """The decision stored in ``raw``; None when absent or not ours. Reads this format, and (the
        compatibility path) the prose an older agent wrote: ``<time> <text>`` with the kind told by
        the words it starts with."""
        if not raw:
            return None
        if raw.startswith("{"):
            try:
                data, end = json.JSONDecoder().raw_decode(raw)
            except ValueError:
                return None
            if not isinstance(data, dict) or data.get("kind") not in Kind.ALL or not isinstance(data.get("at"), str):
                return None
            sentence = raw[end:].lstrip()
            at = str(data["at"])
            text = sentence[len(at) + 1:] if sentence.startswith(at + " ") else sentence
            known = {"at", "kind", "gang", "n", "path", "code", "reason"}
            n = data.get("n", 0)
            return Decision(at=at, kind=str(data["kind"]), text=text, gang=str(data.get("gang", "")),
                            n=n if isinstance(n, int) else 0, path=str(data.get("path", "")),
                            code=str(data.get("code", "")), reason=str(data.get("reason", "")),
                            extra={k: v for k, v in data.items() if k not in known})
        return _decode_prose(raw)


def sentence_of(raw: str | None) -> str:
    """A stored ``last-decision`` as a person reads it (the sentence; an unreadable value as it is)."""
    d = Decision.decode(raw)
    return d.sentence if d is not None else (raw or "")


# The writers' constructors: each kind's sentence, generated from its data.

def down(at: str, n: int, gang: str, fairness: bool = False) -> Decision:
    """A plan evicting ``n`` of the job's workers for ``gang``; ``fairness``: for the fairness
    scale-down (issue 38), ``gang`` is then the least-served job they give their room to (``"fairness":
    true`` in the data)."""
    if fairness:
        return Decision(at, Kind.DOWN, f"down: {n} elastic worker(s) evicted by the fairness scale-down: their room "
                        f"goes to {gang}, the least-served job of the queue", gang=gang, n=n, path="evict",
                        extra={"fairness": True})
    return Decision(at, Kind.DOWN, f"down: {n} elastic worker(s) evicted to make room for {gang}", gang=gang, n=n,
                    path="evict")


def down_notice(at: str, n: int, gang: str) -> Decision:
    return Decision(at, Kind.DOWN, f"down: eviction notice to {n} elastic worker(s) to make room for {gang}",
                    gang=gang, n=n, path="notice")


def down_in_place(at: str, n: int, gang: str) -> Decision:
    """A shrink in place (issue 39): the victims leave the group, then are evicted; no restart."""
    return Decision(at, Kind.DOWN, f"down: {n} elastic worker(s) leave in place to make room for {gang}", gang=gang,
                    n=n, path="in-place", extra={"inPlace": True})


def down_preempted(at: str) -> Decision:
    return Decision(at, Kind.DOWN, "down: Volcano preempted worker(s) of this job (counted as a scale event)",
                    path="preempted")


def up_lifting(at: str, n: int, reason: str, in_place: bool = False) -> Decision:
    """While a scale-up runs: a plan, not yet a claim."""
    return Decision(at, Kind.UP, f"up: lifting {n} gate(s); {reason}", n=n, path="lifting", reason=reason,
                    extra={"inPlace": True} if in_place else {})


def up_lifted(at: str, lifted: int, n: int, reason: str, how: str = "", in_place: bool = False) -> Decision:
    count = f"{lifted} gate(s)" if lifted == n else f"{lifted} of {n} gate(s)"
    extra: dict[str, Any] = {"lifted": lifted}
    if in_place:
        extra["inPlace"] = True
    return Decision(at, Kind.UP, f"up: {count} lifted{how}; {reason}", n=n, path="lifted", reason=reason,
                    extra=extra)


def held(at: str, code: str, note: str) -> Decision:
    return Decision(at, Kind.HELD, f"held ({code}): {note}", code=code)


def gang_waiting(at: str, reason: str) -> Decision:
    return Decision(at, Kind.WAITING, f"waiting: {reason}")


def gang_not_executed(at: str, victims: int, why: str) -> Decision:
    return Decision(at, Kind.NOT_EXECUTED, f"waiting: plan to evict {victims} not executed ({why})", n=victims)


def gang_noticed(at: str, victims: int, reason: str) -> Decision:
    return Decision(at, Kind.NOTICE, f"eviction notice given to {victims} elastic worker(s) for it: {reason}",
                    n=victims)


def gang_in_place(at: str, victims: int, reason: str) -> Decision:
    return Decision(at, Kind.NOTICE, f"{victims} elastic worker(s) leave in place for it (evicted once they left "
                                     f"the group, no restart): {reason}", n=victims, extra={"inPlace": True})


def gang_evicted(at: str, victims: int, reason: str) -> Decision:
    return Decision(at, Kind.EVICTED, f"evicted {victims} elastic worker(s) for it: {reason}", n=victims)


def taken_back(at: str, text: str, gang: str = "") -> Decision:
    return Decision(at, Kind.TAKEN_BACK, text, gang=gang)


def forgotten(at: str, text: str, gang: str) -> Decision:
    return Decision(at, Kind.FORGOTTEN, text, gang=gang)


# ------------------------------------------------------------------ compatibility: the old prose

_ROOM_FOR = " to make room for "


def _decode_prose(raw: str) -> Decision | None:
    """A ``last-decision`` an agent before the structured format wrote: ``<time> <text>``. Read once
    per stored value, only for what the agent needs of it (kind, gang, count, reason code, stamp)."""
    at, _, text = raw.partition(" ")
    if parse_time(at) is None or not text:
        return None
    if text.startswith("down: "):
        gang = text.rpartition(_ROOM_FOR)[2] if _ROOM_FOR in text else ""
        path = "notice" if text.startswith("down: eviction notice") else "preempted" if not gang else "evict"
        first = text[len("down: "):].split(" ", 1)[0]
        n = int(first) if first.isdigit() else 0
        if path == "notice":
            word = text[len("down: eviction notice to "):].split(" ", 1)[0]
            n = int(word) if word.isdigit() else 0
        return Decision(at, Kind.DOWN, text, gang=gang, n=n, path=path)
    if text.startswith("up: lifting "):
        head, _, reason = text.partition("; ")
        word = head[len("up: lifting "):].split(" ", 1)[0]
        return Decision(at, Kind.UP, text, n=int(word) if word.isdigit() else 0, path="lifting", reason=reason)
    if text.startswith("up: "):
        return Decision(at, Kind.UP, text, path="lifted", reason=text.partition("; ")[2])
    if text.startswith("held ("):
        code = text[len("held ("):].partition(")")[0]
        return Decision(at, Kind.HELD, text, code=code)
    if text.startswith("waiting: plan to evict"):
        return Decision(at, Kind.NOT_EXECUTED, text)
    if text.startswith("waiting"):
        return Decision(at, Kind.WAITING, text)
    if text.startswith("eviction notice"):
        return Decision(at, Kind.NOTICE, text)
    if text.startswith("evicted"):
        return Decision(at, Kind.EVICTED, text)
    if " taken back" in text:
        return Decision(at, Kind.TAKEN_BACK, text)
    return Decision(at, "", text)
