"""PNG plots (GPU allocation over time, JCT CDF, JCT per class), through the optional ``plot`` extra.

One colour (and line style) per policy in every plot, from the Okabe-Ito palette, which stays
distinguishable with the common colour-vision deficiencies (no red/green pair); times in hours,
minutes or days, never in powers of ten."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .engine import SimResult

MISSING = ("plots skipped: matplotlib is not installed (pip install matplotlib, or `pip install -e '.[plot]'` in a "
           "checkout, to get allocation.png, jct_cdf.png and jct_by_class.png)")


# Okabe & Ito (2008), "Color Universal Design": one per policy, the same in every plot.
POLICY_STYLE: dict[str, tuple[str, str]] = {
    "elastic": ("#0072B2", "-"),  # blue
    "volcano-gang": ("#E69F00", "--"),  # orange
    "static-max": ("#009E73", "-."),  # bluish green
    "static-min": ("#CC79A7", ":"),  # reddish purple
    "tiresias": ("#D55E00", "--"),  # vermillion
}
SPARE = ("#56B4E9", "#F0E442", "#000000")  # sky blue, yellow, black
# Where the log-scaled JCT axis gets a tick, in hours, and how it is labelled.
TIME_TICKS = ((1 / 60, "1 min"), (5 / 60, "5 min"), (15 / 60, "15 min"), (0.5, "30 min"), (1, "1 h"),
              (2, "2 h"), (6, "6 h"), (12, "12 h"), (24, "1 d"), (48, "2 d"), (168, "1 w"), (720, "30 d"))


def policy_style(policy: str) -> tuple[str, str]:
    """(colour, line style) of ``policy``: fixed for the four policies, a spare colour for others."""
    if policy in POLICY_STYLE:
        return POLICY_STYLE[policy]
    return SPARE[sum(map(ord, policy)) % len(SPARE)], "-"


def time_ticks(low: float, high: float) -> list[tuple[float, str]]:
    """The ticks of ``TIME_TICKS`` within [low, high] hours (with one beyond each end, so that a
    narrow range still gets two)."""
    inside = [t for t in TIME_TICKS if low <= t[0] <= high]
    below = [t for t in TIME_TICKS if t[0] < low][-1:]
    above = [t for t in TIME_TICKS if t[0] > high][:1]
    return inside if len(inside) >= 2 else below + inside + above


def have_matplotlib() -> bool:
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _resample(timeline: Sequence[tuple[float, int]], end: float, points: int = 2000) -> tuple[
        list[float], list[float]]:
    """Time-averaged allocation in ``points`` equal bins (keeps big traces plottable)."""
    if not timeline or end <= 0:
        return [], []
    width = end / points
    xs: list[float] = []
    ys: list[float] = []
    idx = 0
    current = 0
    for b in range(points):
        lo, hi = b * width, (b + 1) * width
        area = 0.0
        t = lo
        while idx < len(timeline) and timeline[idx][0] < hi:
            at, value = timeline[idx]
            if at > t:
                area += current * (at - t)
                t = at
            current = value
            idx += 1
        area += current * (hi - t)
        xs.append((lo + hi) / 2)
        ys.append(area / width)
    return xs, ys


def _save(plt: Any, fig: Any, path: Path) -> Path:
    """Lay ``fig`` out, write it to ``path`` (100 dpi) and close it."""
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_plots(results: Sequence[SimResult], out: Path,
                summaries: dict[str, dict[str, Any]] | None = None) -> list[Path]:
    plt = _pyplot()
    written = []
    if summaries is not None:
        path = _class_plot(plt, results, summaries, out)
        if path is not None:
            written.append(path)
    fig, ax = plt.subplots(figsize=(10, 4))
    for r in results:
        xs, ys = _resample(r.timeline, r.span[1])
        colour, style = policy_style(r.policy)
        ax.plot([x / 3600 for x in xs], [100 * y / r.total_gpus for y in ys], label=r.policy, linewidth=1.2,
                color=colour, linestyle=style)
    ax.set_xlabel("time (hours)")
    ax.set_ylabel("GPUs allocated (%)")
    ax.set_ylim(0, 105)
    ax.set_title("GPU allocation over time")
    ax.legend()
    ax.grid(alpha=0.3)
    written.append(_save(plt, fig, out / "allocation.png"))

    fig, ax = plt.subplots(figsize=(6, 4))
    span: list[float] = []
    for r in results:
        jcts = sorted(j.jct / 3600 for j in r.jobs if j.finished)
        if jcts:
            colour, style = policy_style(r.policy)
            ax.step(jcts, [(i + 1) / len(jcts) for i in range(len(jcts))], where="post", label=r.policy,
                    color=colour, linestyle=style)
            span += [jcts[0], jcts[-1]]
    ax.set_xscale("log")
    if span:
        from matplotlib.ticker import FixedFormatter, FixedLocator, NullLocator

        ticks = time_ticks(min(span), max(span))
        ax.xaxis.set_major_locator(FixedLocator([t for t, _ in ticks]))
        ax.xaxis.set_major_formatter(FixedFormatter([label for _, label in ticks]))
        ax.xaxis.set_minor_locator(NullLocator())
    ax.set_xlabel("job completion time (log scale)")
    ax.set_ylabel("fraction of jobs")
    ax.set_title("JCT CDF")
    ax.legend()
    ax.grid(alpha=0.3)
    written.append(_save(plt, fig, out / "jct_cdf.png"))
    return written


def _class_plot(plt: Any, results: Sequence[SimResult], summaries: dict[str, dict[str, Any]],
                out: Path) -> Path | None:
    """jct_by_class.png: each class's average JCT against static-max's, one bar per policy."""
    policies = [r.policy for r in results if r.policy != "static-max"]
    classes: list[tuple[str, int]] = []
    for p in policies:
        for e in summaries[p].get("perClass", []):
            key = (e["kind"], e["maxWorkers"])
            if key not in classes:
                classes.append(key)
    if not policies or not classes:
        return None
    classes.sort(key=lambda k: (k[0] != "elastic", k[1]))
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(classes)), 4))
    width = 0.8 / len(policies)
    for i, p in enumerate(policies):
        by = {(e["kind"], e["maxWorkers"]): e["avgJctRatioVsStaticMax"] for e in summaries[p]["perClass"]}
        colour, _ = policy_style(p)
        ax.bar([c + i * width for c in range(len(classes))], [by.get(k) or 0.0 for k in classes], width,
               label=p, color=colour)
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks([c + width * (len(policies) - 1) / 2 for c in range(len(classes))])
    counts = {(e["kind"], e["maxWorkers"]): e["jobs"] for p in policies for e in summaries[p]["perClass"]}
    ax.set_xticklabels([f"{k} {n}\n{counts[(k, n)]} jobs" for k, n in classes], rotation=30, ha="right")
    ax.set_ylabel("average JCT / static-max's")
    ax.set_title("Who pays: JCT against static-max per class (kind, max workers; jobs averaged)")
    ax.legend()
    ax.grid(alpha=0.3, axis="y")
    return _save(plt, fig, out / "jct_by_class.png")
