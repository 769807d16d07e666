"""PodGroups for a burst of PyTorchJobs: latency from each job's creation to its PodGroup existing.

    .venv/bin/python bench/controller_burst.py --kubeconfig KC [--jobs 500] [--threads 8] [--workers 4]

Starts ``volcano-elastic controller`` as a process against the cluster, creates the jobs as fast
as ``--threads`` clients can, and watches PodGroups. Latency = PodGroup ADDED seen by our watch minus
the moment the job's POST was sent (both on this machine's monotonic clock: conservative, it
includes the POST itself and the watch delivery). Prints JSON; target p99 < 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from elastic_controller.kube.client import KubeClient  # noqa: E402
from elastic_controller.kube.errors import KubeError  # noqa: E402
from elastic_controller.kube.informer import Informer  # noqa: E402
from elastic_controller.kube.resources import LEASES, NAMESPACES, PODGROUPS, PYTORCHJOBS, QUEUES  # noqa: E402
from tests.harness import builders as b  # noqa: E402


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--jobs", type=int, default=500)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--workers", type=int, default=16, help="controller workers")
    a = ap.parse_args()
    kc = KubeClient.from_kubeconfig(a.kubeconfig)
    ns = f"burst-{uuid.uuid4().hex[:6]}"
    kc.create(NAMESPACES, {"metadata": {"name": ns}})
    try:  # as in a real install (Volcano creates it): no QueueNotFound warning per job
        kc.create(QUEUES, {"metadata": {"name": "default"}, "spec": {"weight": 1, "reclaimable": True}})
    except KubeError:
        pass
    log = open(f"/tmp/{ns}-controller.log", "w")  # noqa: SIM115 - lives as long as the process
    proc = subprocess.Popen(
        [sys.executable, "-m", "elastic_controller", "controller", "--kubeconfig", a.kubeconfig,
         "--lease-namespace", ns, "--http-port", "0", "--workers", str(a.workers), "--log-level", "warning"],
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    seen: dict[str, float] = {}
    lock = threading.Lock()

    def on_pg(_res: Any, kind: str, obj: dict[str, Any]) -> None:
        if kind == "ADDED" and obj["metadata"].get("namespace") == ns:
            with lock:
                seen.setdefault(obj["metadata"]["name"], time.monotonic())

    watcher = Informer(kc, PODGROUPS, namespace=ns)
    watcher.add_handler(on_pg)
    watcher.start()
    watcher.wait_synced(30)
    # Wait until the controller leads (it creates its Lease) so that start-up is not measured.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            kc.get(LEASES, "volcano-elastic-controller", ns)
            break
        except KubeError:
            time.sleep(0.2)
    time.sleep(1.0)
    sent: dict[str, float] = {}

    def create(i: int) -> None:
        name = f"j{i:04d}"
        job = b.pytorchjob(ns, name, workers=4, min_r=2, max_r=4)
        for k in ("uid", "creationTimestamp"):
            job["metadata"].pop(k)
        sent[name] = time.monotonic()
        kc.create(PYTORCHJOBS, job, ns)

    t0 = time.monotonic()
    with ThreadPoolExecutor(a.threads) as pool:
        list(pool.map(create, range(a.jobs)))
    created_in = time.monotonic() - t0
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(seen) < a.jobs:
        time.sleep(0.05)
    all_in = max(seen.values()) - t0 if seen else float("nan")
    lat = [seen[n] - sent[n] for n in sent if n in seen]
    out = {
        "jobs": a.jobs, "podgroups": len(seen), "clientThreads": a.threads, "controllerWorkers": a.workers,
        "burstSeconds": round(created_in, 2), "allPodGroupsWithinSeconds": round(all_in, 2),
        "latencyP50": round(statistics.median(lat), 3), "latencyP90": round(pct(lat, 0.9), 3),
        "latencyP99": round(pct(lat, 0.99), 3), "latencyMax": round(max(lat), 3), "target": "p99 < 1 s",
    }
    print(json.dumps(out, indent=2))
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(20)
    watcher.stop(0)
    try:
        kc.delete(NAMESPACES, ns)
    except KubeError:
        pass
    return 0 if len(seen) == a.jobs else 1


if __name__ == "__main__":
    sys.exit(main())
