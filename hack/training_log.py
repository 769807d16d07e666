"""What a training run's progress log says, measured: its steps, its scale events and each event's stall
(the definition every report uses: ``bench/real_training.py``'s ``stallSeconds``, ``hack.training_plot``'s
charts, ``make demo``).

The log is the job's ``progress.jsonl`` (one JSON object a line: ``{"event": "start", "from", "world",
"t", "restart"}`` when torchrun (re)starts the workers, ``{"step", "world", "loss", "t", "restart"}`` per
training step, ``{"event": "checkpoint", ...}``, ``{"event": "done", ...}``), or a real-training result
(``bench/real_training.py --out``) holding it as ``log``.

A **scale event** is a restart of the workers after the first start (torchrun restarts every worker at
each membership change). Its **stall** runs from the last training step before it to the first step
after it; of that, ``restart_seconds`` is the new processes' start to their first step (the rest is
waiting). Its **redone steps** are the steps trained again after resuming from the checkpoint.
Standard library only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class LogError(Exception):
    """The input is not a real-training result or a progress log."""


@dataclass(frozen=True)
class Step:
    t: float  # seconds since the run's first record
    step: int
    world: int
    loss: float | None
    restart: int


@dataclass(frozen=True)
class ScaleEvent:
    kind: str  # grow | shrink | restart (the same size again)
    from_workers: int
    to_workers: int
    t_start: float  # the new group's start record
    last_step_t: float | None  # the last training step before the event
    first_step_t: float | None  # the first step after it (None: another restart came first, or none)
    stall_seconds: float | None
    resumed_from: int
    steps_redone: int
    restart_budget_used: int
    spawned_t: float | None = None  # the new processes' start (the start record's `spawned`), if logged

    @property
    def restart_seconds(self) -> float | None:
        """The new processes' start to their first step; the rest of the stall is waiting."""
        if self.spawned_t is None or self.first_step_t is None:
            return None
        return round(self.first_step_t - self.spawned_t, 2)


@dataclass
class Run:
    steps: list[Step]
    events: list[ScaleEvent]
    checkpoints: list[tuple[float, int]]
    end_t: float
    t0_epoch: float
    meta: dict[str, Any] = field(default_factory=dict)  # the result's fields other than log / events

    @property
    def max_world(self) -> int:
        return max([s.world for s in self.steps] + [max(e.from_workers, e.to_workers) for e in self.events] + [1])


def load(path: Path) -> Run:
    """A run from a real-training result JSON or a progress.jsonl."""
    try:
        text = path.read_text()
    except OSError as e:
        raise LogError(f"cannot read {path}: {e}") from e
    try:
        doc = json.loads(text)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and "log" in doc:
        log = doc["log"]
        if not isinstance(log, list):
            raise LogError(f"{path}: 'log' is not a list")
        return parse(log, {k: v for k, v in doc.items() if k not in ("log", "events")})
    if isinstance(doc, dict):  # a progress.jsonl of one line
        return parse([doc], {})
    records = []
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as e:
            raise LogError(f"{path}:{n}: neither a real-training result nor a progress log line: {e}") from e
        if not isinstance(rec, dict):
            raise LogError(f"{path}:{n}: a progress log line is a JSON object")
        records.append(rec)
    return parse(records, {})


def parse(log: Sequence[Any], meta: dict[str, Any]) -> Run:
    """The steps, scale events and checkpoints of a progress log (times relative to its first record)."""
    recs = [r for r in log if isinstance(r, dict) and isinstance(r.get("t"), int | float)]
    if not any(_is_step(r) for r in recs):
        raise LogError("the progress log has no training step")
    t0 = min(float(r["t"]) for r in recs)
    steps: list[Step] = []
    events: list[ScaleEvent] = []
    checkpoints: list[tuple[float, int]] = []
    world: int | None = None
    last_step: Step | None = None  # the last step since the latest start
    before: Step | None = None  # the last step of all, for the stall
    for r in recs:
        t = float(r["t"]) - t0
        if r.get("event") == "start":
            new = int(r["world"])
            if world is not None:
                kind = "grow" if new > world else "shrink" if new < world else "restart"
                resumed = int(r.get("from", 0))
                events.append(ScaleEvent(
                    kind=kind, from_workers=world, to_workers=new, t_start=t,
                    last_step_t=before.t if before else None, first_step_t=None, stall_seconds=None,
                    resumed_from=resumed, steps_redone=max(0, last_step.step - resumed) if last_step else 0,
                    restart_budget_used=int(r.get("restart", 0)),
                    spawned_t=float(r["spawned"]) - t0 if isinstance(r.get("spawned"), int | float) else None))
            world = new
            last_step = None
        elif r.get("event") == "checkpoint" and "step" in r:
            checkpoints.append((t, int(r["step"])))
        elif _is_step(r):
            loss = r.get("loss")
            s = Step(t=t, step=int(r["step"]), world=int(r["world"]),
                     loss=float(loss) if isinstance(loss, int | float) else None, restart=int(r.get("restart", 0)))
            if events and events[-1].first_step_t is None and last_step is None:
                e = events[-1]
                stall = round(s.t - e.last_step_t, 2) if e.last_step_t is not None else None
                events[-1] = ScaleEvent(**{**e.__dict__, "first_step_t": s.t, "stall_seconds": stall})
            steps.append(s)
            last_step = before = s
    end_t = max(float(r["t"]) for r in recs) - t0
    return Run(steps=steps, events=events, checkpoints=checkpoints, end_t=end_t, t0_epoch=t0, meta=dict(meta))


def _is_step(r: dict[str, Any]) -> bool:
    return "step" in r and "event" not in r and "world" in r
