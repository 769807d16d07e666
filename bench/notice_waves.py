"""Eviction notices given, and due victims evicted, one gang (one pod) after the other against the
waves (issue 36, item 3: at 1,000 nodes one cycle gave 10 gangs' notices in 6.6-6.8 s, another
evicted its due victims one by one in 5.6 s).

    .venv/bin/python bench/notice_waves.py [--gangs 1,10,30] [--latency-ms 100] [--latency-spread fixed|exp]
        [--writers 8] [--repeat 3] [--out FILE]

For each number of gangs N: N jobs (elastic 2..6, all running, each filling its node) and N waiting
gangs (2 x 1 GPU); each gang's ``GiveNotice`` puts two workers of its own job under notice (N
independent gangs: one wave). Every API request is answered after ``--latency-ms`` (``agent_cycle.
SlowKube``; Events go out on the recorder's own thread, as the agent's do). Timed, on a fresh world
each, alternately (old, new, old, new, ...; this machine drifts):

- **give**: the decision's ``GiveNotice`` actions, ``give_notice`` one after the other (old) against
  ``give_notices`` (new: the waves, one pool run per wave);
- **due**: once the deadlines passed, ``Notices.act`` on the review with its 2N due victims, one after
  the other (old) against one pool run (new: ``act(review, pooled(ex))``).

Both paths write the same (tests/unit/test_notice_waves.py compares them); this also checks that
each run noticed and evicted every victim. Prints JSON (and writes it to ``--out``): per N and path,
each run's seconds, the median, and new/old.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.agent_cycle import SlowKube  # noqa: E402
from elastic_controller.config import parse_config  # noqa: E402
from elastic_controller.execute.executor import CycleReport, Executor  # noqa: E402
from elastic_controller.execute.metrics import NoMetrics  # noqa: E402
from elastic_controller.execute.notices import give_notice, give_notices, pooled  # noqa: E402
from elastic_controller.kube.events import EventRecorder  # noqa: E402
from elastic_controller.kube.fake import FakeStore  # noqa: E402
from elastic_controller.kube.resources import SNAPSHOT_RESOURCES  # noqa: E402
from elastic_controller.notice import Notices  # noqa: E402
from elastic_controller.policy.actions import GiveNotice  # noqa: E402
from elastic_controller.policy.cycle import decide, shrinks  # noqa: E402
from elastic_controller.policy.decisions import CyclePlan, Eviction  # noqa: E402
from elastic_controller.policy.model import Snapshot  # noqa: E402
from elastic_controller.policy.parse import parse_objects  # noqa: E402
from tests.harness import builders as b  # noqa: E402
from tests.harness.fakecluster import load  # noqa: E402

NS = "team-a"
NOTICE = 120
CFG = parse_config({"defaults": {"noticeSeconds": NOTICE}})


def world(n: int) -> list[Any]:
    objs: list[Any] = [b.queue("default")]
    for i in range(n):
        objs += [b.node(f"n{i}", gpus=6), b.pytorchjob(NS, f"j{i}", workers=6, min_r=2, max_r=6),
                 *b.elastic_job(NS, f"j{i}", min_r=2, max_r=6, nodes=[f"n{i}"]),
                 *b.gang("team-b", f"g{i}", members=2, gpus=1)]
    return b.items(*objs)


def setup(n: int, a: argparse.Namespace) -> tuple[SlowKube, Executor, list[GiveNotice]]:
    """A fresh world of ``n`` gangs, its executor, and the decision's ``GiveNotice`` actions."""
    kube = SlowKube(0.0, a.latency_spread)
    load(kube, world(n))
    store = FakeStore(kube)
    recorder = EventRecorder(kube, background=True)
    ex = Executor(kube, store, CFG, recorder, metrics=NoMetrics(),
                  notices=Notices(kube, store, CFG, recorder, clock=lambda: b.NOW), dry_run=False,
                  identity="bench", writers=a.writers)
    victims = [Eviction(f"{NS}/j{i}-worker-{w}", f"n{i}", f"{NS}/j{i}", "default", f"team-b/g{i}", "bench",
                        f"uid-{NS}-j{i}-worker-{w}") for i in range(n) for w in (4, 5)]
    actions = shrinks(snapshot(ex), CFG, b.NOW, victims)
    assert len(actions) == n and all(isinstance(x, GiveNotice) for x in actions)
    return kube, ex, [x for x in actions if isinstance(x, GiveNotice)]


def snapshot(ex: Executor) -> Snapshot:
    return parse_objects([o for res in SNAPSHOT_RESOURCES for o in ex.store.items(res)], CFG)[0]


def give(n: int, new: bool, a: argparse.Namespace) -> float:
    kube, ex, actions = setup(n, a)
    kube.latency = a.latency_ms / 1000
    report = CycleReport(CyclePlan())
    start = time.monotonic()
    if new:
        give_notices(ex, actions, b.NOW, report)
    else:
        for action in actions:
            give_notice(ex, action, b.NOW, report)
    seconds = time.monotonic() - start
    if report.failed or len(report.noticed) != n:
        raise SystemExit(f"give ({'new' if new else 'old'}, {n} gangs): not every notice given: {report.failed}")
    return seconds


def due(n: int, new: bool, a: argparse.Namespace) -> float:
    kube, ex, actions = setup(n, a)
    report = CycleReport(CyclePlan())
    give_notices(ex, actions, b.NOW, report)  # (no latency: not timed)
    review = decide(snapshot(ex), CFG, b.NOW + timedelta(seconds=NOTICE + 1), given=ex.notices.given,
                    notices_only=True).notices
    if len(review.due) != 2 * n:
        raise SystemExit(f"due ({n} gangs): {len(review.due)} due victims, not {2 * n}")
    kube.latency = a.latency_ms / 1000
    start = time.monotonic()
    done = ex.notices.act(review, pooled(ex)) if new else ex.notices.act(review)
    seconds = time.monotonic() - start
    if len(done.evicted) != 2 * n:
        raise SystemExit(f"due ({'new' if new else 'old'}, {n} gangs): {len(done.evicted)} evicted: {done.failed}")
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gangs", default="1,10,30", help="numbers of independent gangs, comma-separated")
    ap.add_argument("--latency-ms", type=float, default=100.0, help="each API request's latency")
    ap.add_argument("--latency-spread", choices=("fixed", "exp"), default="fixed",
                    help="every request --latency-ms (fixed), or an exponential draw with that mean (exp)")
    ap.add_argument("--writers", type=int, default=8, help="the executor's write concurrency (the agent's default)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per path, old and new alternately")
    ap.add_argument("--out", help="also write the JSON here")
    a = ap.parse_args()
    try:
        counts = [int(x) for x in a.gangs.split(",") if x.strip()]
    except ValueError:
        ap.error(f"--gangs: comma-separated whole numbers, not {a.gangs!r}")
    if not counts or min(counts) < 1 or a.repeat < 1 or a.writers < 1 or a.latency_ms < 0:
        ap.error("--gangs, --repeat and --writers must be at least 1, --latency-ms at least 0")
    rows = []
    for n in counts:
        for name, fn in (("give", give), ("due", due)):
            runs: dict[str, list[float]] = {"old": [], "new": []}
            for _ in range(a.repeat):
                for path in ("old", "new"):
                    runs[path].append(round(fn(n, path == "new", a), 3))
            old, new = statistics.median(runs["old"]), statistics.median(runs["new"])
            rows.append({"gangs": n, "path": name, "old_s": runs["old"], "new_s": runs["new"], "old_median_s": old,
                         "new_median_s": new, "ratio_new_old": round(new / old, 3) if old else None})
            print(f"{name:4} {n:3} gangs: old {old:6.2f} s, new {new:6.2f} s, new/old {new / old:.2f}",
                  file=sys.stderr)
    out = {"latencyMs": a.latency_ms, "latencySpread": a.latency_spread, "writers": a.writers,
           "repeat": a.repeat, "rows": rows}
    text = json.dumps(out, indent=1)
    print(text)
    if a.out:
        Path(a.out).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
