"""bench/judge_noise.py: the jittered copies of a trace move every arrival by at most the jitter, never
before 0, the same way for the same seed, and judge a schedule against itself as exactly even."""

from __future__ import annotations

import csv
from pathlib import Path

from bench.fairness_frontier import judge
from bench.judge_noise import _cells, jitter


def _write(path: Path, submits: list[int]) -> None:
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["name", "submit", "queue", "priority", "min", "max", "gpus", "work"])
        for i, s in enumerate(submits):
            w.writerow([f"job-{i}", s, "q", 0, 1, 4, 1, 1000])


def _submits(path: Path) -> list[int]:
    with path.open() as f:
        return [int(r["submit"]) for r in csv.DictReader(f)]


def test_each_arrival_moves_by_at_most_the_jitter_and_never_before_zero(tmp_path: Path) -> None:
    before = [0, 10, 500, 1000, 5000]
    _write(tmp_path / "t.csv", before)
    jitter(tmp_path / "t.csv", tmp_path / "a.csv", 60, 1)
    jitter(tmp_path / "t.csv", tmp_path / "b.csv", 60, 1)
    jitter(tmp_path / "t.csv", tmp_path / "c.csv", 60, 2)
    after = _submits(tmp_path / "a.csv")
    assert all(s >= 0 and abs(s - b) <= 60 for s, b in zip(after, before, strict=True))
    assert after != before  # moved
    assert _submits(tmp_path / "b.csv") == after  # the same seed, the same copy
    assert _submits(tmp_path / "c.csv") != after


def test_a_schedule_judged_against_itself_is_even() -> None:
    rows = {f"j{i}": {"name": f"j{i}", "jct": str(100.0 * (i + 1)), "queueing": "0", "restarts": "0",
                      "min": "1", "max": str(1 + i % 2)} for i in range(6)}
    cells = _cells(judge(rows, rows, rows))
    assert cells == {"avg": 1.0, "median": 1.0, "over": 0.0, "restarts": 0.0, "worst": 1.0}
    later = {n: r | {"jct": str(float(r["jct"]) * (1.5 if n == "j0" else 1.0))} for n, r in rows.items()}
    assert _cells(judge(rows, later, rows))["over"] == 100 / 6
