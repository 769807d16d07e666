"""The controller's ``elasticMinShare`` check at cluster size: milliseconds per reconcile of a job,
with the key at 1 (off: no check) and below 1, side by side in one run.

    .venv/bin/python bench/minshare_check.py [--nodes 1000] [--jobs 1000] [--share 0.5]

In process, on the unit tier's fake API server (``tests/harness/controllerworld``): N nodes of 8 GPUs,
M PyTorchJobs in 4 queues (half elastic 2..8 x 2 GPUs, half rigid 2 x 4 GPUs), each reconciled once
in creation order (a burst of M new jobs). The fake's store copies every object it hands out; the
real informer cache does not, so the copies are switched off here (what is measured is our check,
not the fake), and the controller's pod index is on, as after ``start()``. Prints one line per
setting; the ratio is the result (this machine drifts)."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from elastic_controller.policy.settings import ElasticConfig, QueuePolicy  # noqa: E402
from tests.harness import builders as b  # noqa: E402
from tests.harness.controllerworld import make  # noqa: E402


def run(nodes: int, jobs: int, share: float) -> tuple[float, dict[str, int]]:
    objs: list[Any] = [b.node(f"n{i}", gpus=8) for i in range(nodes)]
    queues = [b.queue(f"q{i}") for i in range(4)]
    for i in range(jobs):
        q = f"q{i % 4}"
        objs.append(b.pytorchjob("ns", f"j{i}", workers=8, min_r=2, max_r=8, gpus=2, queue=q) if i % 2 else
                    b.pytorchjob("ns", f"j{i}", workers=2, gpus=4, queue=q, elastic=False))
    cfg = ElasticConfig(queues={f"q{i}": replace(QueuePolicy(), elasticMinShare=share) for i in range(4)})
    with mock.patch("elastic_controller.kube.fake.copy.deepcopy", lambda x, memo=None: x):
        _, ctl, _ = make(*queues, objs, cfg=cfg)
        ctl._pods_by_job = {}  # the pod index start() keeps (no pods here)
        actions: dict[str, int] = {}
        t = time.perf_counter()
        for i in range(jobs):
            a = ctl.reconcile(f"ns/j{i}").action
            actions[a] = actions.get(a, 0) + 1
        return (time.perf_counter() - t) / jobs * 1000, actions


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--share", type=float, default=0.5, help="elasticMinShare of the 4 queues (0.5)")
    args = ap.parse_args(argv)
    if not 0 < args.share < 1:
        ap.error("--share must be in (0, 1): 1 is the baseline, run in any case")
    for share in (1.0, args.share):
        ms, actions = run(args.nodes, args.jobs, share)
        print(f"{args.jobs} jobs, {args.nodes} nodes, elasticMinShare {share:g}: {ms:.2f} ms per reconcile {actions}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
