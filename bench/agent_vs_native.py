"""The same scenario twice, side by side: our agent (Volcano without preempt/reclaim) versus
Volcano's own preempt/reclaim (no agent, scale-up gating off so that both can grow).

    .venv/bin/python bench/agent_vs_native.py [--out bench-out/agent_vs_native.json]

Each run starts its own full box (hack/localbox, 4 kwok nodes x 8 GPUs): job A (elastic 2..8
workers x 4 GPUs, queue dept-a) fills the cluster, then job B (2 x 4 GPUs, queue dept-b) arrives.
Reported per run: seconds until B's gang runs, evictions of A's pods, evictions of A's master/core
pods (index < min), restarts of A (pods of A that went away and were recreated) and the running
A workers at the end of an observation window.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from elastic_controller.kube.client import KubeClient  # noqa: E402
from elastic_controller.kube.resources import NAMESPACES  # noqa: E402
from hack.localbox import Box, BoxOptions  # noqa: E402
from tests.e2e.test_elastic_scaling import COOLDOWN, Scenario, config_text, start_stack  # noqa: E402


def one_run(mode: str, window: float, native_conf: str = "native", agent_on_native: bool = False) -> dict[str, Any]:
    box = Box(BoxOptions(name=f"bench-{mode}", profile="full", volcano_conf="ours" if mode == "agent" else native_conf,
                         quiet=True))
    box.up()
    tmp = Path(tempfile.mkdtemp(prefix=f"bench-{mode}-"))
    try:
        kc = KubeClient.from_kubeconfig(str(box.kubeconfig))
        ns = f"bench-{mode}"
        kc.create(NAMESPACES, {"metadata": {"name": ns}})
        cfg = tmp / "config.yaml"
        cfg.write_text(config_text(gating=mode == "agent"))
        cert = box.issue_serving_cert(tmp)

        def spawn(name: str, argv: list[str], env: dict[str, str] | None = None) -> Any:
            return box.spawn(name, argv, env)

        start_stack(kc, box, spawn, str(box.kubeconfig), cfg, cert, ns, agent=mode == "agent" or agent_on_native)
        sc = Scenario(kc, ns, tag=mode)
        sc.queues()
        sc.fill_with_a(8, timeout=300)
        if mode == "agent":
            time.sleep(COOLDOWN)  # A was just scaled up: let its cooldown pass, as in steady state
        t0 = sc.start_b()
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline and sc.obs.b_running_at is None:
            time.sleep(0.2)
        b_after = None if sc.obs.b_running_at is None else round(sc.obs.b_running_at - t0, 1)
        time.sleep(window)  # watch for thrashing after B started
        sc.stop()
        deleted = sc.obs.a_deleted
        core = [n for n in deleted if int(n.rsplit("-", 1)[1]) < 2]
        ann = sc.annotations("a")
        return {
            "agentRunning": mode == "agent" or agent_on_native,
            "aLastDecision": ann.get("volcano-elastic.io/last-decision", ""),
            "mode": mode, "volcanoConf": "ours" if mode == "agent" else native_conf,
            "bGangRunsAfterSeconds": b_after, "evictionsOfA": len(deleted),
            "evictionsOfMasterOrCore": len(core), "restartsOfA": len(deleted),
            "masterRestarted": len(sc.obs.master_uids) > 1, "aRunningMin": sc.obs.a_running_min,
            "aRunningAtEnd": len(sc.running("a")), "evicted": sorted(deleted),
        }
    finally:
        box.down(quiet=True)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench-out/agent_vs_native.json")
    ap.add_argument("--window", type=float, default=60.0, help="seconds observed after B runs")
    ap.add_argument("--only", choices=("agent", "native"))
    ap.add_argument("--native-conf", default="native",
                    help="Volcano conf of the native run: native (hack/) or a path, e.g. one without overcommit")
    ap.add_argument("--native-with-agent", action="store_true",
                    help="also run our agent (gating off) in the native run: it must count Volcano's preemptions")
    a = ap.parse_args()
    results = [one_run(m, a.window, a.native_conf, a.native_with_agent)
               for m in ("agent", "native") if a.only in (None, m)]
    text = json.dumps(results, indent=2)
    print(text)
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
