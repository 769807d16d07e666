"""Issue 38's judge for candidate rules: elastic runs against the static-max run of the same trace.

Every cell of docs/measurements.md, "Where elasticity's extra time goes", comes from here. Run the
judge once with every policy (the reference), then each candidate with ``--policy elastic --config
FILE`` on the same traces, each trace in a folder named ``ex``, ``g2``, ``g3``, ``g4``::

    volcano-elastic simulate --example --policy all --out REF/ex
    for s in 2 3 4; do volcano-elastic simulate --cluster elastic_controller/examples/sim/cluster.yaml \\
        --generate 500 --load 1.0 --seed $s --policy all --out REF/g$s; done
    (the same with --policy elastic --config cand.yaml --out CAND/...)
    python bench/fairness_frontier.py REF label=CAND ... [--classes]

One markdown row per candidate (each cell: example / seed 2 / seed 3 / seed 4): average and median
JCT over static-max's, the worst class (``perClass[].avgJctRatioVsStaticMax``'s definition), the
percentage of jobs more than 1.2x later than under static-max, restarts per job. A job's class is
its trace's (the reference elastic run's min and max: a rule may change the bounds a run reports).
``--classes``: per class, hours of queueing and of running per job, elastic / static-max.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

TRACES = ("ex", "g2", "g3", "g4")
OVER = 1.2
Row = dict[str, str]


def _load(path: Path) -> dict[str, Row]:
    with path.open() as f:
        return {r["name"]: r for r in csv.DictReader(f)}


def _jct(r: Row) -> float:
    return float(r["jct"])


def judge(ref: dict[str, Row], el: dict[str, Row], kinds: dict[str, Row]) -> dict[str, object]:
    paired = [(el[n], ref[n]) for n in el if _jct(el[n]) >= 0 and n in ref and _jct(ref[n]) >= 0]
    if not paired:
        raise SystemExit("no job finished under both runs")
    avg = sum(_jct(e) for e, _ in paired) / sum(_jct(r) for _, r in paired)
    median = (statistics.median(_jct(e) for e in el.values() if _jct(e) >= 0)
              / statistics.median(_jct(r) for r in ref.values() if _jct(r) >= 0))
    over = 100 * sum(1 for e, r in paired if _jct(e) > OVER * _jct(r) + 1e-9) / len(el)
    restarts = sum(int(e["restarts"]) for e in el.values()) / len(el)
    groups: dict[tuple[str, int], list[tuple[Row, Row]]] = {}
    for e, r in paired:
        k = kinds[e["name"]]
        groups.setdefault(("rigid" if k["min"] == k["max"] else "elastic", int(k["max"])), []).append((e, r))
    classes = {}
    for key, pairs in sorted(groups.items()):
        n = len(pairs)
        classes[key] = {
            "jobs": n,
            "ratio": sum(_jct(e) for e, _ in pairs) / sum(_jct(r) for _, r in pairs),
            "queue": (sum(float(e["queueing"]) for e, _ in pairs) / n / 3600,
                      sum(float(r["queueing"]) for _, r in pairs) / n / 3600),
            "run": (sum(_jct(e) - float(e["queueing"]) for e, _ in pairs) / n / 3600,
                    sum(_jct(r) - float(r["queueing"]) for _, r in pairs) / n / 3600),
            "restarts": sum(int(e["restarts"]) for e, _ in pairs) / n,
        }
    worst = max(classes.items(), key=lambda kv: float(kv[1]["ratio"]))  # type: ignore[arg-type]
    return {"avg": avg, "median": median, "worst": worst, "over": over, "restarts": restarts, "classes": classes}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("ref", type=Path, help="the reference runs (--policy all), one folder per trace")
    ap.add_argument("candidates", nargs="+", help="label=FOLDER: a candidate's elastic runs")
    ap.add_argument("--classes", action="store_true", help="per class: queueing and running hours")
    args = ap.parse_args(argv)
    for item in args.candidates:
        label, _, folder = item.partition("=")
        if not folder:
            ap.error(f"{item!r}: expected label=FOLDER")
        cells: list[tuple[str, dict[str, object]]] = []
        for t in TRACES:
            kinds = _load(args.ref / t / "jobs-elastic.csv")
            cells.append((t, judge(_load(args.ref / t / "jobs-static-max.csv"),
                                   _load(Path(folder) / t / "jobs-elastic.csv"), kinds)))

        def row(fmt: str, key: str, cells: list[tuple[str, dict[str, object]]] = cells) -> str:
            return " / ".join(format(c[key], fmt) for _, c in cells)

        worst = " / ".join(f"{w[1]['ratio']:.2f} ({w[0][0]} {w[0][1]})"  # type: ignore[index]
                           for w in (c["worst"] for _, c in cells))
        print(f"| {label} | {row('.3f', 'avg')} | {row('.2f', 'median')} | {worst} | {row('.0f', 'over')} | "
              f"{row('.2f', 'restarts')} |")
        if args.classes:
            for t, c in cells:
                print(f"  {t}: class, jobs, JCT ratio, queueing h (elastic / static-max), running h, restarts/job")
                for (kind, hi), v in c["classes"].items():  # type: ignore[attr-defined]
                    print(f"    {kind} max {hi}: {v['jobs']}, {v['ratio']:.2f}, {v['queue'][0]:.2f} / "
                          f"{v['queue'][1]:.2f}, {v['run'][0]:.2f} / {v['run'][1]:.2f}, {v['restarts']:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
