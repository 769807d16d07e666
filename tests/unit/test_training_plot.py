"""hack/training_plot.py: a real training run's world size and loss over time, scale events marked."""

from __future__ import annotations

import itertools
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from hack import training_plot as tp

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "bench" / "results" / "real_training-kit.json"
SVG = "{http://www.w3.org/2000/svg}"


def synthetic(stall_a: float = 6.0, stall_b: float = 3.0) -> list[dict[str, Any]]:
    """4 workers for steps 1..30 (checkpoint at 20), shrink to 2 resuming at 20, 2 workers to step 60
    (checkpoint at 55), grow to 4 resuming at 55, 4 workers to step 80. 0.5 s a step, loss halving."""
    log: list[dict[str, Any]] = []
    t = 1000.0
    loss = 8.0

    def steps(first: int, last: int, world: int, restart: int) -> None:
        nonlocal t, loss
        for s in range(first, last + 1):
            t += 0.5
            loss /= 2
            log.append({"step": s, "world": world, "loss": round(loss, 6), "t": t, "restart": restart})
            if s % 20 == 0 or s == 55:
                log.append({"event": "checkpoint", "step": s, "why": "interval", "t": t + 0.01})

    log.append({"event": "start", "from": 0, "world": 4, "t": t, "restart": 0})
    steps(1, 30, 4, 0)
    t += stall_a - 0.5
    log.append({"event": "start", "from": 20, "world": 2, "t": t - 0.2, "restart": 1})
    steps(21, 60, 2, 1)
    t += stall_b - 0.5
    log.append({"event": "start", "from": 55, "world": 4, "t": t - 0.2, "restart": 1})
    steps(56, 80, 4, 1)
    log.append({"event": "done", "steps": 80, "t": t + 0.1})
    return log


def result(log: list[dict[str, Any]], **meta: Any) -> dict[str, Any]:
    return {"succeeded": True, "state": "Succeeded", "stepsTarget": 80, "stepsDone": 80, "baseline": False,
            "gangs": 1, "maxRestarts": 10, "torch": "torch 9.9 (test)", "seconds": 60.0, "events": [],
            "log": log, **meta}


def training_columns(chart: str) -> tuple[dict[int, int], dict[int, str], list[str]]:
    """From the chart: column -> the world size trained there, column -> marker letter, legend lines."""
    lines = chart.splitlines()
    head = lines.index(next(line for line in lines if line.startswith("workers")))
    marker_row = lines[head - 1]
    world_at: dict[int, int] = {}
    i = head + 1
    sizes: list[int] = []
    while re.match(r"^\s*\d+ \|", lines[i]):
        size, row = lines[i].split("|", 1)
        sizes.append(int(size))
        for c, ch in enumerate(row):
            if ch == "#":
                assert c not in world_at, f"two sizes trained in column {c}"
                world_at[c] = int(size)
        i += 1
    assert sizes == sorted(sizes, reverse=True) and len(set(sizes)) == len(sizes), f"world rows {sizes}"
    gutter = lines[head + 1].index("|") + 1
    marks = {c - gutter: ch for c, ch in enumerate(marker_row) if c >= gutter and ch.isupper()
             and (c == gutter or marker_row[c - 1] == " ") and (c + 1 >= len(marker_row) or marker_row[c + 1] == " ")}
    legend = [line for line in lines if re.match(r"^[A-Z]  ", line)]
    return world_at, marks, legend


def changes(world_at: dict[int, int]) -> list[tuple[int, int, int, int]]:
    """(last column at the old size, first column at the new, old size, new size) for each change."""
    cols = sorted(world_at)
    return [(a, b, world_at[a], world_at[b]) for a, b in itertools.pairwise(cols)
            if world_at[a] != world_at[b]]


def test_events_from_a_synthetic_log() -> None:
    run = tp.parse(synthetic(), {})
    assert [(e.kind, e.from_workers, e.to_workers) for e in run.events] == [("shrink", 4, 2), ("grow", 2, 4)]
    shrink, grow = run.events
    assert shrink.stall_seconds == pytest.approx(6.0, abs=0.01)
    assert grow.stall_seconds == pytest.approx(3.0, abs=0.01)
    assert (shrink.resumed_from, shrink.steps_redone, shrink.restart_budget_used) == (20, 10, 1)
    assert (grow.resumed_from, grow.steps_redone) == (55, 5)
    assert run.steps[0].t == pytest.approx(0.5)  # times from the first record
    assert [s for _, s in run.checkpoints] == [20, 40, 55, 60, 60, 80]  # 56..60 trained again


def test_the_recorded_run_gives_the_events_bench_real_training_recorded() -> None:
    doc = json.loads(RECORDED.read_text())
    run = tp.load(RECORDED)
    assert doc["events"], "the recorded run has scale events"
    got = [{"kind": e.kind, "fromWorkers": e.from_workers, "toWorkers": e.to_workers,
            "stallSeconds": e.stall_seconds, "stepsRedone": e.steps_redone,
            "restartBudgetUsed": e.restart_budget_used, "restartSeconds": e.restart_seconds} for e in run.events]
    assert got == [{k: e[k] for k in got[0]} for e in doc["events"]]
    assert all(e.restart_seconds is not None and 0 < e.restart_seconds < (e.stall_seconds or 0) for e in run.events)


@pytest.mark.parametrize("source", ["synthetic", "recorded"])
@pytest.mark.parametrize("width", [100, 80])
def test_the_terminal_chart_marks_the_shrink_and_the_grow_at_their_sizes(source: str, width: int) -> None:
    run = tp.parse(synthetic(), result([])) if source == "synthetic" else tp.load(RECORDED)
    chart = tp.terminal(run, width=width)
    assert max(len(line) for line in chart.splitlines()) <= width
    assert "\x1b" not in chart  # no colour
    world_at, marks, legend = training_columns(chart)
    found = changes(world_at)
    assert [(old, new) for _, _, old, new in found] == [(4, 2), (2, 4)]
    assert sorted(marks.values()) == ["A", "B"]
    for (last, first, old, new), letter in zip(found, "AB", strict=True):
        col = next(c for c, ch in marks.items() if ch == letter)
        assert last < col <= first, f"{letter} at column {col}, not between {last} and {first}"
        kind = "shrink" if new < old else "grow"
        (line,) = [line for line in legend if line.startswith(letter)]
        assert f"{kind} {old} -> {new} workers" in line
    flat = " ".join(chart.split())  # the legend wraps at the width
    for e in run.events:
        assert f"stalled {e.stall_seconds:.1f} s" in flat
        assert f"checkpoint at step {e.resumed_from}: {e.steps_redone} step(s) done again" in flat


def test_the_stall_is_shaded_where_no_step_ran() -> None:
    run = tp.parse(synthetic(stall_a=20.0), result([]))
    world_at, _, _ = training_columns(tp.terminal(run))
    (last, first, _, _), _ = changes(world_at)
    rows = [line.split("|", 1)[1] for line in tp.terminal(run).splitlines() if re.match(r"^\s*\d+ \|", line)]
    assert first - last > 5
    for c in range(last + 1, first):
        assert {row[c] if c < len(row) else " " for row in rows} == {tp.STALL}


def test_the_outcome_and_the_torch_version_are_in_the_header() -> None:
    failed = tp.parse(synthetic(), result([], state="Failed", succeeded=False, stepsDone=61))
    head = tp.terminal(failed, label="RECORDED RUN from x.json").splitlines()[:3]
    assert head[0] == "RECORDED RUN from x.json"
    assert "Failed: 61 of 80 steps" in " ".join(head) and "torch 9.9 (test)" in " ".join(head)


def test_a_restart_before_any_step_at_the_new_size_is_said_so() -> None:
    log = synthetic()
    # a shrink and a regrow with no step between: plain torchrun still in its rendezvous
    i = next(i for i, r in enumerate(log) if r.get("world") == 2 and r.get("event") == "start")
    log.insert(i + 1, {"event": "start", "from": 20, "world": 4, "t": log[i]["t"] + 0.1, "restart": 2})
    run = tp.parse(log, {})
    assert [(e.kind, e.stall_seconds is None) for e in run.events][:2] == [("shrink", True), ("grow", False)]
    assert "no step at this size" in " ".join(tp.terminal(run).split())


def svg_tree(run: tp.Run, label: str | None = None) -> ET.Element:
    return ET.fromstring(tp.svg(run, label))


@pytest.mark.parametrize("source", ["synthetic", "recorded"])
def test_the_svg_has_two_panels_and_the_events(source: str) -> None:
    run = tp.parse(synthetic(), result([])) if source == "synthetic" else tp.load(RECORDED)
    root = svg_tree(run, label="RECORDED RUN")
    groups = {g.get("id"): g for g in root.iter(f"{SVG}g") if g.get("id")}
    assert {"panel-world", "panel-loss", "events"} <= set(groups)
    events = [g for g in groups["events"] if (g.get("class") or "").startswith("event")]
    assert [(g.get("class"), g.get("data-from"), g.get("data-to")) for g in events] == [
        ("event shrink", "4", "2"), ("event grow", "2", "4")]
    for g, e in zip(events, run.events, strict=True):
        assert float(g.get("data-stall-seconds") or "nan") == e.stall_seconds
        rects = g.findall(f"{SVG}rect")
        assert len(rects) == 2  # shaded in both panels
        assert all(float(r.get("width") or 0) > 1 for r in rects)
    # the world panel's lines sit at exactly the two sizes trained at; the higher size is drawn higher
    lines = [line for line in groups["panel-world"].iter(f"{SVG}polyline") if line.get("class") == "world"]
    ys = [{float(p.split(",")[1]) for p in (line.get("points") or "").split()} for line in lines]
    assert [len(y) for y in ys] == [1, 1, 1]  # one flat line per worker group: at 4, at 2, at 4
    (y4,), (y2,), (y4_again,) = ys
    assert y4 == y4_again < y2
    assert len(list(groups["panel-loss"].iter(f"{SVG}polyline"))) == 3  # one per worker group
    title = root.find(f"{SVG}title")
    assert title is not None and "torch" in (title.text or "") and "Succeeded" in (title.text or "")
    texts = " ".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "RECORDED RUN" in texts and tp.torch_version(run) in texts


def test_the_command_reads_a_progress_log_and_writes_the_svg(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "progress.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in synthetic()))
    out = tmp_path / "sub" / "chart.svg"
    assert tp.main([str(log), "--svg", str(out), "--width", "90"]) == 0
    printed = capsys.readouterr().out
    assert "shrink 4 -> 2 workers" in printed and "grow 2 -> 4 workers" in printed
    ET.parse(out)


def test_the_command_refuses_what_is_not_a_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "x.json"
    bad.write_text("not json\n")
    assert tp.main([str(bad)]) == 2
    assert "neither a real-training result nor a progress log" in capsys.readouterr().err
    bad.write_text(json.dumps({"log": [{"event": "start", "world": 2, "t": 1.0}]}))
    assert tp.main([str(bad)]) == 2
    assert "no training step" in capsys.readouterr().err


def test_more_sizes_than_rows_still_show_the_sizes_trained_at_exactly() -> None:
    log: list[dict[str, Any]] = [{"event": "start", "from": 0, "world": 16, "t": 0.0, "restart": 0}]
    log += [{"step": i, "world": 16, "loss": 1 / i, "t": float(i), "restart": 0} for i in range(1, 50)]
    log += [{"event": "start", "from": 40, "world": 7, "t": 80.0, "restart": 1}]
    log += [{"step": i, "world": 7, "loss": 1 / i, "t": 40.0 + i, "restart": 1} for i in range(41, 200)]
    chart = tp.terminal(tp.parse(log, {}))
    world_at, marks, _ = training_columns(chart)
    assert [(old, new) for _, _, old, new in changes(world_at)] == [(16, 7)]
    assert sum(1 for line in chart.splitlines() if re.match(r"^\s*\d+ \|", line)) == tp.WORLD_ROWS_MAX
    assert list(marks.values()) == ["A"]
