"""bench/fairness_frontier.py: issue 38's judge for candidate rules, on hand-made job CSVs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import fairness_frontier as bench

HEAD = ("name,queue,submit,start,finish,jct,queueing,min,max,minSeen,maxSeen,restarts,evictions,work,"
        "heldGpuSeconds,lostWork")


def _csv(path: Path, rows: list[tuple[str, float, float, int, int, int]]) -> None:
    """rows: (name, jct, queueing, min, max, restarts)."""
    lines = [HEAD] + [f"{n},q,0,{q:g},{j:g},{j:g},{q:g},{lo},{hi},{lo},{hi},{r},0,1,1,0" for n, j, q, lo, hi, r in rows]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def _runs(tmp_path: Path) -> tuple[Path, Path]:
    ref, cand = tmp_path / "ref", tmp_path / "cand"
    for t in bench.TRACES:
        # static-max: a (rigid 4) 100 s, b (elastic 1..2) 100 s, c (elastic 1..8) 400 s
        _csv(ref / t / "jobs-static-max.csv", [("a", 100, 10, 4, 4, 0), ("b", 100, 10, 2, 2, 0),
                                               ("c", 400, 300, 8, 8, 0)])
        _csv(ref / t / "jobs-elastic.csv", [("a", 1, 0, 4, 4, 0), ("b", 1, 0, 1, 2, 0), ("c", 1, 0, 1, 8, 0)])
        # the candidate: a 130 s (1.3x: over 1.2x), b 110 s (1.1x), c 160 s, after 3 restarts in all;
        # it reports b as rigid (a rule changed its bounds): its class stays the trace's
        _csv(cand / t / "jobs-elastic.csv", [("a", 130, 40, 4, 4, 0), ("b", 110, 10, 2, 2, 1),
                                             ("c", 160, 20, 1, 8, 2)])
    return ref, cand


def test_every_cell(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ref, cand = _runs(tmp_path)
    got = bench.judge(bench._load(ref / "ex" / "jobs-static-max.csv"), bench._load(cand / "ex" / "jobs-elastic.csv"),
                      bench._load(ref / "ex" / "jobs-elastic.csv"))
    assert got["avg"] == pytest.approx(400 / 600)
    assert got["median"] == pytest.approx(130 / 100)
    assert got["over"] == pytest.approx(100 / 3)
    assert got["restarts"] == pytest.approx(1.0)
    (kind, hi), worst = got["worst"]  # type: ignore[misc]
    assert (kind, hi) == ("rigid", 4) and worst["ratio"] == pytest.approx(1.3)
    assert set(got["classes"]) == {("rigid", 4), ("elastic", 2), ("elastic", 8)}  # type: ignore[arg-type]
    assert bench.main([str(ref), f"cand={cand}"]) == 0
    row = capsys.readouterr().out
    assert row.startswith("| cand | 0.667 / 0.667 / 0.667 / 0.667 | 1.30 / ") and "1.30 (rigid 4)" in row


def test_a_bad_candidate_is_refused(tmp_path: Path) -> None:
    ref, _ = _runs(tmp_path)
    with pytest.raises(SystemExit):
        bench.main([str(ref), "no-folder"])
