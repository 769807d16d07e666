"""A real elastic training run, drawn: world size and loss over time, scale events marked.

    python -m hack.training_plot RESULT.json [--svg OUT.svg] [--width 100] [--label TEXT]

RESULT.json is what ``bench/real_training.py --out`` writes (its ``log`` is the job's progress log,
plus the run's outcome), or the job's ``progress.jsonl`` itself (one JSON object a line:
``{"event": "start", "from", "world", "t", "restart"}`` when torchrun (re)starts the workers,
``{"step", "world", "loss", "t", "restart"}`` per training step, ``{"event": "checkpoint", ...}``,
``{"event": "done", ...}``). Prints a terminal chart (plain characters, no colour, ``--width``
columns) and with ``--svg`` writes a hand-written SVG with two stacked panels.

What a scale event, its stall and its redone steps are is defined in ``hack/training_log.py`` (the
measurement; this module only draws it). Standard library only.
"""

from __future__ import annotations

import argparse
import math
import sys
import textwrap
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

# The measurement (steps, scale events, stalls) is hack.training_log's; re-exported for this module's users.
from hack.training_log import LogError as PlotError
from hack.training_log import Run as Run
from hack.training_log import ScaleEvent as ScaleEvent
from hack.training_log import Step as Step
from hack.training_log import load as load
from hack.training_log import parse as parse

LOSS_FLOOR = 1e-6  # the log's losses are rounded to 6 decimals: 0.0 means "below 1e-6"
WORLD_ROWS_MAX = 10
LOSS_ROWS = 7
LOSS_ROWS_MAX = 10
TRAIN, STALL, LOSS = "#", ".", "*"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


# ---------------------------------------------------------------------------- words
def outcome(run: Run) -> str:
    m = run.meta
    done = m.get("stepsDone", max((s.step for s in run.steps), default=0))
    target = m.get("stepsTarget")
    steps = f"{done} of {target} steps" if target is not None else f"{done} steps"
    state = m.get("state") or ("Succeeded" if m.get("succeeded") else "")
    took = f" in {m['seconds']:.0f} s" if isinstance(m.get("seconds"), int | float) else ""
    return f"{state or 'outcome unknown'}: {steps}{took}"


def torch_version(run: Run) -> str:
    return str(run.meta.get("torch") or "torch version not recorded")


def recorded_when(run: Run) -> str:
    """When and where the run was recorded: the file's own fields if it has them, else the log's clock."""
    m = run.meta
    when = m.get("date") or time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(run.t0_epoch))
    where = m.get("machine") or m.get("host")
    return f"{when}" + (f" on {where}" if where else "")


def describe_event(e: ScaleEvent, max_restarts: Any = None) -> str:
    what = {"grow": "grow", "shrink": "shrink", "restart": "restart at the same size"}[e.kind]
    head = f"{what} {e.from_workers} -> {e.to_workers} workers"
    started = f"the {e.to_workers} workers started at {e.t_start:.1f} s"
    if e.stall_seconds is not None and e.last_step_t is not None and e.first_step_t is not None:
        parts = [f"{head}: training stalled {e.stall_seconds:.1f} s (no step from {e.last_step_t:.1f} s "
                 f"to {e.first_step_t:.1f} s; {started})"]
    else:
        parts = [f"{head}: no step at this size ({started}; another restart came first)"]
    parts.append(f"resumed from the checkpoint at step {e.resumed_from}: {e.steps_redone} step(s) done again")
    budget = f"{e.restart_budget_used} of {max_restarts}" if max_restarts is not None else str(e.restart_budget_used)
    parts.append(f"torchrun restarts used: {budget}")
    return "; ".join(parts)


def event_short(e: ScaleEvent) -> str:
    stall = f" {e.stall_seconds:.1f}s" if e.stall_seconds is not None else ""
    return f"{e.kind} {e.from_workers}->{e.to_workers}{stall}"


# ---------------------------------------------------------------------------- the terminal chart
def terminal(run: Run, width: int = 100, label: str | None = None) -> str:
    """The chart as plain text, every line at most ``width`` characters."""
    width = max(width, 40)
    gutter = 9  # "  1e-03 |"
    n = width - gutter
    span = max(run.end_t, 1e-9)

    def col(t: float) -> int:
        return min(n - 1, max(0, int(t / span * n)))

    # columns with no training step inside an event's stall: shaded in both panels
    stalled = [False] * n
    for e in run.events:
        if e.last_step_t is None:
            continue
        a = col(e.last_step_t) + 1
        b = col(e.first_step_t) if e.first_step_t is not None else col(e.t_start) + 1
        for c in range(a, max(a, b)):
            stalled[c] = True
    trained = {col(s.t) for s in run.steps}
    for c in trained:
        stalled[c] = False

    lines: list[str] = []
    if label:
        lines += textwrap.wrap(label, width, break_on_hyphens=False, break_long_words=False)
    lines += textwrap.wrap(f"Elastic training on real nodes: {outcome(run)}; torch: {torch_version(run)}"
                           + _setup(run), width)
    lines.append("")

    # the marker row: a letter (and a short label where there is room) where each event's stall begins
    marks = [" "] * n
    starts = []
    for e in run.events:
        c = col(e.last_step_t) + 1 if e.last_step_t is not None else col(e.t_start)
        starts.append(min(c, n - 1))
    for i, (e, c) in enumerate(zip(run.events, starts, strict=True)):
        text = f"{LETTERS[i % 26]} {event_short(e)}"
        room = (starts[i + 1] if i + 1 < len(starts) else n) - c - 1
        if len(text) > room:
            text = text[:max(1, room)]
        for k, ch in enumerate(text):
            if c + k < n:
                marks[c + k] = ch
    lines.append(" " * (gutter - 2) + "  " + "".join(marks).rstrip())

    # world size: one row per size (rows scaled above WORLD_ROWS_MAX), '#' where steps ran at it
    top = run.max_world
    rows = min(top, WORLD_ROWS_MAX)
    values = [round(top * (rows - i) / rows) for i in range(rows)]
    for w in sorted({s.world for s in run.steps}):  # the sizes trained at get rows of their own, exactly
        values[min(range(rows), key=lambda i: abs(values[i] - w))] = w
    grid = [[STALL if stalled[c] else " " for c in range(n)] for _ in range(rows)]
    for s in run.steps:
        r = min(range(rows), key=lambda i: abs(values[i] - s.world))
        grid[r][col(s.t)] = TRAIN
    lines.append(f"workers  ({TRAIN} = training at that size, {STALL} = stalled by a scale event)")
    for i in range(rows):
        lines.append(f"{values[i]:>7} |" + "".join(grid[i]).rstrip())
    lines.append(" " * (gutter - 1) + "+" + "-" * n)

    # loss: log scale when it spans two decades or more
    losses = [s for s in run.steps if s.loss is not None]
    if losses:
        scale = _loss_scale([s.loss for s in losses if s.loss is not None], LOSS_ROWS)
        lgrid = [[STALL if stalled[c] else " " for c in range(n)] for _ in range(scale.rows)]
        for s in losses:
            assert s.loss is not None
            lgrid[scale.row(s.loss)][col(s.t)] = LOSS
        lines.append(f"loss  ({scale.name})")
        for i in range(scale.rows):
            lines.append(f"{scale.label(i):>7} |" + "".join(lgrid[i]).rstrip())
    else:
        lines.append("loss: none in the log")
    axis = [" "] * n
    ticks = [" "] * n
    step = _tick_step(span, n)
    t = 0.0
    while t <= span + 1e-9:
        c = col(t)
        text = f"{t:.0f}s"
        if c + len(text) <= n and all(ch == " " for ch in axis[max(0, c - 1):c + len(text)]):
            ticks[c] = "+"
            for k, ch in enumerate(text):
                axis[c + k] = ch
        t += step
    ticks[0] = "-"  # the corner is the tick at 0
    lines.append(" " * (gutter - 1) + "+" + "".join(ticks).replace(" ", "-"))
    lines.append(" " * gutter + "".join(axis).rstrip())
    lines.append("")
    if not run.events:
        lines.append("no scale event in this run")
    for i, e in enumerate(run.events):
        lines += textwrap.wrap(describe_event(e, run.meta.get("maxRestarts")), width,
                               initial_indent=f"{LETTERS[i % 26]}  ", subsequent_indent="   ")
    return "\n".join(line.rstrip() for line in lines)


def _setup(run: Run) -> str:
    m = run.meta
    bits = []
    if "baseline" in m:
        bits.append("plain torchrun (baseline)" if m["baseline"] else "the job kit's rendezvous")
    if "maxRestarts" in m:
        bits.append(f"maxRestarts {m['maxRestarts']}")
    if "gangs" in m:
        bits.append(f"{m['gangs']} gang(s) given room")
    return ("; " + ", ".join(bits)) if bits else ""


@dataclass(frozen=True)
class _Scale:
    name: str
    lo: float  # log10 bounds, or linear bounds
    hi: float
    log: bool
    rows: int

    def pos(self, v: float) -> float:
        """0 at the bottom, 1 at the top."""
        x = math.log10(max(v, LOSS_FLOOR)) if self.log else v
        return 0.0 if self.hi == self.lo else min(1.0, max(0.0, (x - self.lo) / (self.hi - self.lo)))

    def row(self, v: float) -> int:
        return self.rows - 1 - round(self.pos(v) * (self.rows - 1))

    def label(self, i: int) -> str:
        x = self.hi - (self.hi - self.lo) * i / max(1, self.rows - 1)
        if self.log:
            return f"1e{x:+03.0f}" if abs(x - round(x)) < 1e-9 else ""
        return f"{x:.3g}"


def _loss_scale(values: list[float], rows: int) -> _Scale:
    top = max(values)
    low = min(values)
    if top > 0 and top / max(low, LOSS_FLOOR) >= 100:
        hi = math.ceil(math.log10(top))
        lo = math.floor(math.log10(max(low, LOSS_FLOOR)))
        # one row a decade up to LOSS_ROWS_MAX rows, then labels on the rows that fall on a decade
        rows = hi - lo + 1 if hi - lo + 1 <= LOSS_ROWS_MAX else rows
        return _Scale(f"log scale; 0 is drawn at {LOSS_FLOOR:g}", float(lo), float(hi), True, rows)
    return _Scale("linear", min(0.0, low), top if top > 0 else 1.0, False, rows)


def _tick_step(span: float, n: int) -> float:
    for s in (1, 2, 5, 10, 15, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600):
        if span / s * 10 <= n:  # ticks at least 10 columns apart
            return float(s)
    return float(math.ceil(span / (n / 10)))


# ---------------------------------------------------------------------------- the SVG
SVG_W, SVG_H = 960, 560
LEFT, RIGHT = 90, 30
WORLD_Y, WORLD_H = 110, 160
LOSS_Y, LOSS_H = 300, 180
COLOURS = {"shrink": "#d9534f", "grow": "#2e8b57", "restart": "#888888"}


def svg(run: Run, label: str | None = None) -> str:
    """Two stacked panels (world size, loss) over time, each scale event's stall shaded and annotated."""
    span = max(run.end_t, 1e-9)
    pw = SVG_W - LEFT - RIGHT

    def x(t: float) -> float:
        return round(LEFT + t / span * pw, 2)

    top = run.max_world

    def yw(w: float) -> float:
        return round(WORLD_Y + WORLD_H - w / top * WORLD_H, 2)

    losses = [s.loss for s in run.steps if s.loss is not None]
    scale = _loss_scale(losses, LOSS_ROWS) if losses else _Scale("linear", 0.0, 1.0, False, LOSS_ROWS)

    def yl(v: float) -> float:
        return round(LOSS_Y + LOSS_H - scale.pos(v) * LOSS_H, 2)

    out: list[str] = []
    add = out.append
    add(f'<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_W}" height="{SVG_H}" '
        f'viewBox="0 0 {SVG_W} {SVG_H}" font-family="sans-serif" font-size="12">')
    title = f"Elastic training on real nodes: {outcome(run)}"
    add(f"<title>{escape(title)}; torch: {escape(torch_version(run))}</title>")
    add(f'<rect width="{SVG_W}" height="{SVG_H}" fill="white"/>')
    add(f'<text id="title" x="{LEFT}" y="24" font-size="16" font-weight="bold">{escape(title)}</text>')
    add(f'<text id="subtitle" x="{LEFT}" y="44" fill="#444">'
        f"{escape('torch: ' + torch_version(run) + _setup(run))}</text>")
    if label:
        add(f'<text id="label" x="{LEFT}" y="62" fill="#a00" font-weight="bold">{escape(label)}</text>')

    # events: a shaded band over both panels for each stall, annotated above the world panel
    add('<g id="events">')
    for i, e in enumerate(run.events):
        a = e.last_step_t if e.last_step_t is not None else e.t_start
        b = e.first_step_t if e.first_step_t is not None else e.t_start
        colour = COLOURS[e.kind]
        add(f'<g class="event {e.kind}" data-from="{e.from_workers}" data-to="{e.to_workers}" '
            f'data-stall-seconds="{e.stall_seconds if e.stall_seconds is not None else ""}" '
            f'data-steps-redone="{e.steps_redone}">')
        for y0, h in ((WORLD_Y, WORLD_H), (LOSS_Y, LOSS_H)):
            add(f'<rect x="{x(a)}" y="{y0}" width="{max(1.0, round(x(b) - x(a), 2))}" height="{h}" '
                f'fill="{colour}" fill-opacity="0.15"/>')
        add(f'<line x1="{x(e.t_start)}" y1="{WORLD_Y}" x2="{x(e.t_start)}" y2="{LOSS_Y + LOSS_H}" '
            f'stroke="{colour}" stroke-dasharray="4 3"/>')
        stall = f"stall {e.stall_seconds:.1f} s" if e.stall_seconds is not None else "no step"
        note = (f"{LETTERS[i % 26]}: {e.kind} {e.from_workers}\u2192{e.to_workers}, {stall}, "
                f"{e.steps_redone} steps redone, restarts used {e.restart_budget_used}")
        anchor = "end" if x(a) > LEFT + pw * 0.6 else "start"
        add(f'<text x="{x(a)}" y="{WORLD_Y - 8 - 14 * (i % 2)}" fill="{colour}" text-anchor="{anchor}">'
            f"{escape(note)}</text>")
        add("</g>")
    add("</g>")

    # the world panel: a step line per stretch of training, the restart as a dashed jump
    add('<g id="panel-world">')
    _frame(add, WORLD_Y, WORLD_H, "workers")
    for w in range(0, top + 1, max(1, top // 5)):
        add(f'<text x="{LEFT - 8}" y="{yw(w) + 4}" text-anchor="end">{w}</text>')
        add(f'<line x1="{LEFT}" y1="{yw(w)}" x2="{LEFT + pw}" y2="{yw(w)}" stroke="#eee"/>')
    for seg in _segments(run):
        pts: list[str] = []
        for s in seg:
            if pts:
                pts.append(f"{x(s.t)},{pts[-1].split(',')[1]}")
            pts.append(f"{x(s.t)},{yw(s.world)}")
        add(f'<polyline class="world" points="{" ".join(pts)}" fill="none" stroke="#1f5fa8" stroke-width="2"/>')
    for e in run.events:
        if e.last_step_t is not None and e.first_step_t is not None:
            add(f'<polyline class="jump" points="{x(e.last_step_t)},{yw(e.from_workers)} '
                f'{x(e.t_start)},{yw(e.from_workers)} {x(e.t_start)},{yw(e.to_workers)} '
                f'{x(e.first_step_t)},{yw(e.to_workers)}" fill="none" stroke="#1f5fa8" '
                f'stroke-dasharray="3 3"/>')
    for ct, cstep in run.checkpoints:
        add(f'<line class="checkpoint" x1="{x(ct)}" y1="{WORLD_Y + WORLD_H}" x2="{x(ct)}" '
            f'y2="{WORLD_Y + WORLD_H - 5}" stroke="#555"><title>checkpoint at step {cstep}</title></line>')
    add("</g>")

    # the loss panel
    add('<g id="panel-loss">')
    _frame(add, LOSS_Y, LOSS_H, "loss (log scale)" if scale.log else "loss")
    for i in range(scale.rows):
        text = scale.label(i)
        if text:
            y = round(LOSS_Y + LOSS_H * i / (scale.rows - 1), 2)
            add(f'<text x="{LEFT - 8}" y="{y + 4}" text-anchor="end">{escape(text)}</text>')
            add(f'<line x1="{LEFT}" y1="{y}" x2="{LEFT + pw}" y2="{y}" stroke="#eee"/>')
    for seg in _segments(run):
        pts = [f"{x(s.t)},{yl(s.loss)}" for s in seg if s.loss is not None]
        if pts:
            add(f'<polyline class="loss" points="{" ".join(pts)}" fill="none" stroke="#b8620b" '
                f'stroke-width="1.5"/>')
    add("</g>")

    # the time axis
    add('<g id="axis-time">')
    every = _tick_step(span, 60)
    tick = 0.0
    while tick <= span + 1e-9:
        add(f'<line x1="{x(tick)}" y1="{LOSS_Y + LOSS_H}" x2="{x(tick)}" y2="{LOSS_Y + LOSS_H + 5}" '
            'stroke="black"/>')
        add(f'<text x="{x(tick)}" y="{LOSS_Y + LOSS_H + 18}" text-anchor="middle">{tick:.0f}</text>')
        tick += every
    add(f'<text x="{LEFT + pw / 2}" y="{LOSS_Y + LOSS_H + 38}" text-anchor="middle">'
        "seconds since the job's first record</text>")
    add("</g>")
    legend = ("shaded: training stalled by a scale event (last step before it to first step after it); "
              "ticks: checkpoints" + (f"; a loss of 0 is drawn at {LOSS_FLOOR:g}" if scale.log else ""))
    add(f'<text x="{LEFT}" y="{SVG_H - 14}" fill="#444" font-size="11">{escape(legend)}</text>')
    add("</svg>")
    doc = "\n".join(out) + "\n"
    ET.fromstring(doc)  # never write a file a browser cannot read
    return doc


def _frame(add: Any, y: float, h: float, title: str) -> None:
    pw = SVG_W - LEFT - RIGHT
    add(f'<rect class="frame" x="{LEFT}" y="{y}" width="{pw}" height="{h}" fill="none" stroke="black"/>')
    add(f'<text x="{LEFT - 62}" y="{y + h / 2}" text-anchor="middle" '
        f'transform="rotate(-90 {LEFT - 62} {y + h / 2})">{escape(title)}</text>')


def _segments(run: Run) -> list[list[Step]]:
    """The steps split at each scale event (one stretch of training per worker group)."""
    cuts = sorted(e.t_start for e in run.events)
    segs: list[list[Step]] = [[]]
    k = 0
    for s in run.steps:
        while k < len(cuts) and s.t >= cuts[k]:
            segs.append([])
            k += 1
        segs[-1].append(s)
    return [s for s in segs if s]


# ---------------------------------------------------------------------------- the command
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hack.training_plot", description=__doc__.splitlines()[0],
                                 epilog=__doc__.split("\n\n", 2)[2],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("result", type=Path, help="bench/real_training.py's JSON result, or a progress.jsonl")
    ap.add_argument("--svg", type=Path, help="also write the chart as SVG here")
    ap.add_argument("--width", type=int, default=100, help="terminal chart width in columns (default 100)")
    ap.add_argument("--label", help="a line above the chart (e.g. where the run was recorded)")
    a = ap.parse_args(argv)
    try:
        run = load(a.result)
    except PlotError as e:
        print(f"training_plot: {e}", file=sys.stderr)
        return 2
    print(terminal(run, a.width, a.label))
    if a.svg:
        a.svg.parent.mkdir(parents=True, exist_ok=True)
        a.svg.write_text(svg(run, a.label))
        print(f"\nSVG: {a.svg}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
