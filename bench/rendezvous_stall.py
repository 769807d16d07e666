"""How long a scale event stalls a torchrun job, per rendezvous option (issue 29, part 2).

    python3 bench/rendezvous_stall.py --out FILE [--python PY] [--options baseline,last-call-5,kit]
        [--reps 3] [--events up2,up3,down4,down3] [--monitor-interval S]
    python3 bench/rendezvous_stall.py --table FILE      # the markdown table of an earlier run

Plain local torchrun processes, no cluster: one torchrun agent per "node" on 127.0.0.1 (``--nnodes
2:4``, c10d rendezvous, gloo, a tiny model on synthetic data, one worker per node, a checkpoint on
a shared directory every 20 steps; node 0 hosts the rendezvous store and is never stopped). The
job starts at 2 nodes; then, each once stable:

- ``up2``: scale-up 2 -> 3 (below max): a third agent starts;
- ``up3``: scale-up 3 -> 4 (reaches max): a fourth agent starts;
- ``down4``: scale-down 4 -> 3: SIGTERM to the fourth agent (as an eviction does);
- ``down3``: scale-down 3 -> 2: SIGTERM to the third.

Before each event every node's downward-API annotations file (``VOLCANO_ELASTIC_PODINFO``) gets
``volcano-elastic.io/target-workers`` = the new size, as the agent announces it. Options:

- ``baseline``: ``python -m torch.distributed.run`` with torchrun's defaults (last call 30 s);
- ``last-call-N``: the same with ``--rdzv_conf last_call_timeout=N`` (what a webhook could set);
- ``kit``: ``python -m volcano_elastic_job.run`` (the kit's rendezvous: a round completes when the
  announced target has joined; a SIGTERMed agent leaves the rendezvous);
- ``kit-no-departures``: ``kit`` with ``VOLCANO_ELASTIC_DEPARTURES=off``: the survivors restart only
  once one of their workers has exited (the kit before issue 39: on torch 2.x a worker whose
  collective failed takes 8-9 s to exit);
- ``kit-entrypoint``: plain ``python -m torch.distributed.run --rdzv_backend=volcano-c10d`` (torch
  finds the kit's rendezvous through the ``torchrun.handlers`` entry point, torch >= 2.4; no leave
  on SIGTERM, no launcher).

``--shared-store`` leaves ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE`` unset (torch's default), which the
webhook sets on elastic pods: with torch 2.x a scale-up then fails (the run records the error).

Per event: the stall (last training step at the old world size to the first at the new one), the
restart part (the earliest worker process start of the new group to its first step: spawn, import
torch, init, checkpoint load) and the rest (detection and rendezvous). ``--python`` is an
interpreter with torch and the kit installed (default: the Debian python3-torch venv,
~/.cache/volcano-elastic/torch/deb-1.13). Writes JSON: the torch version, the machine, every run,
and min / median / max per option and event. Numbers, not pass/fail.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

DEFAULT_PYTHON = Path.home() / ".cache/volcano-elastic/torch/deb-1.13/bin/python"
TARGET = "volcano-elastic.io/target-workers"
STABLE_STEPS = 15  # steps at the new size before the next event
EVENT_TIMEOUT = 240.0

TRAIN = r'''
import json, os, sys, time
T0 = time.time()
import torch
import torch.distributed as dist
T_IMPORT = time.time()
shared, steps_target = sys.argv[1], int(sys.argv[2])
dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
T_INIT = time.time()
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(64, 128), torch.nn.ReLU(), torch.nn.Linear(128, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01 * world / 2)
ckpt = os.path.join(shared, "ckpt.pt")
step = 0
if os.path.exists(ckpt):
    state = torch.load(ckpt)
    model.load_state_dict(state["model"]); opt.load_state_dict(state["opt"]); step = state["step"]
T_LOAD = time.time()
restart = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
log = open(os.path.join(shared, "steps.jsonl"), "a", buffering=1)
log.write(json.dumps({"kind": "start", "rank": rank, "world": world, "t0": T0, "import": T_IMPORT,
                      "init": T_INIT, "load": T_LOAD, "restart": restart, "step": step}) + "\n")
gen = torch.Generator().manual_seed(rank)
while step < steps_target:
    x = torch.randn(32, 64, generator=gen); y = x.sum(dim=1, keepdim=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad(); loss.backward()
    for p in model.parameters():
        dist.all_reduce(p.grad); p.grad /= world
    opt.step(); step += 1
    if rank == 0:
        log.write(json.dumps({"kind": "step", "t": time.time(), "step": step, "world": world,
                              "restart": restart, "loss": round(loss.item(), 4)}) + "\n")
        if step % 20 == 0:
            torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)
    time.sleep(0.05)
dist.destroy_process_group()
'''

KIT_LAUNCHER = ("kit", "kit-no-departures")  # the options run by python -m volcano_elastic_job.run

EVENTS = {  # name -> (kind, from, to)
    "up2": ("grow", 2, 3),
    "up3": ("grow", 3, 4),
    "down4": ("shrink", 4, 3),
    "down3": ("shrink", 3, 2),
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Job:
    """One torchrun job: its agents, its shared directory, its step log."""

    def __init__(self, option: str, python: str, workdir: Path, monitor_interval: float | None,
                 shared_store: bool = False) -> None:
        self.shared_store = shared_store
        self.option = option
        self.python = python
        self.dir = workdir
        self.port = free_port()
        self.monitor_interval = monitor_interval
        self.agents: dict[int, subprocess.Popen[bytes]] = {}
        self.log_pos = 0
        self.steps: list[dict[str, Any]] = []
        self.starts: list[dict[str, Any]] = []
        self.live: set[int] = set()  # the agents meant to be running
        (workdir / "train.py").write_text(TRAIN)

    def announce(self, target: int) -> None:
        for i in range(4):
            path = self.dir / f"node-{i}.annotations"
            tmp = path.with_suffix(".tmp")
            tmp.write_text(f'{TARGET}="{target}"\n')
            os.replace(tmp, path)  # atomic, as the kubelet writes it

    def start_agent(self, i: int) -> None:
        launcher = "volcano_elastic_job.run" if self.option in KIT_LAUNCHER else "torch.distributed.run"
        conf = [f"is_host={1 if i == 0 else 0}"]
        if self.option.startswith("last-call-"):
            conf.append(f"last_call_timeout={self.option.removeprefix('last-call-')}")
        backend = "volcano-c10d" if self.option == "kit-entrypoint" else "c10d"
        cmd = [self.python, "-m", launcher, "--nnodes=2:4", "--nproc_per_node=1", f"--rdzv_backend={backend}",
               f"--rdzv_endpoint=127.0.0.1:{self.port}", "--rdzv_id=bench", f"--rdzv_conf={','.join(conf)}",
               "--max_restarts=100",
               # Debian's torch 1.13 on Python 3.11 reads "0" (the default) as None and fails in
               # start_processes (Std.from_str; Python 3.11 iterates single-bit flags only): 1 for all.
               "--redirects=1", "--tee=1"]
        if self.monitor_interval is not None:
            cmd.append(f"--monitor_interval={self.monitor_interval}")
        cmd += [str(self.dir / "train.py"), str(self.dir), "1000000"]
        env = {**os.environ, "VOLCANO_ELASTIC_PODINFO": str(self.dir / f"node-{i}.annotations"),
               "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        if not self.shared_store:
            env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"  # what the webhook sets on elastic pods
        env.pop("VOLCANO_ELASTIC_DEPARTURES", None)
        if self.option == "kit-no-departures":
            env["VOLCANO_ELASTIC_DEPARTURES"] = "off"
        out = open(self.dir / f"agent-{i}.log", "ab")  # noqa: SIM115 (the agent keeps it)
        self.agents[i] = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=True)

    def read(self) -> None:
        path = self.dir / "steps.jsonl"
        if not path.exists():
            return
        with open(path) as f:
            f.seek(self.log_pos)
            chunk = f.read()
        end = chunk.rfind("\n")
        if end < 0:
            return
        self.log_pos += len(chunk[: end + 1].encode())
        for line in chunk[: end + 1].splitlines():
            rec = json.loads(line)
            (self.steps if rec["kind"] == "step" else self.starts).append(rec)

    def wait_steps(self, world: int, n: int, since: float, timeout: float = EVENT_TIMEOUT) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.read()
            if sum(1 for s in self.steps if s["world"] == world and s["t"] > since) >= n:
                return True
            dead = [i for i, a in self.agents.items() if a.poll() is not None and i in self.live]
            if dead:
                raise RuntimeError(f"agent(s) {dead} exited ({[self.agents[i].returncode for i in dead]})")
            time.sleep(0.2)
        return False

    def stop(self) -> None:
        for a in self.agents.values():
            if a.poll() is None:
                try:
                    os.killpg(a.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                a.wait()


def measure(job: Job, name: str) -> dict[str, Any]:
    kind, old, new = EVENTS[name]
    job.read()
    t_event = time.time()
    job.announce(new)
    if kind == "grow":
        job.start_agent(new - 1)
        job.live.add(new - 1)
    else:
        job.live.discard(old - 1)
        job.agents[old - 1].send_signal(signal.SIGTERM)
    ok = job.wait_steps(new, 3, t_event)
    rec: dict[str, Any] = {"event": name, "kind": kind, "fromWorkers": old, "toWorkers": new, "ok": ok}
    if kind == "shrink":
        try:
            rec["stoppedAgentExit"] = job.agents[old - 1].wait(timeout=30)
        except subprocess.TimeoutExpired:
            rec["stoppedAgentExit"] = None
    if not ok:
        return rec
    before = [s for s in job.steps if s["t"] <= t_event and s["world"] == old]
    after = [s for s in job.steps if s["t"] > t_event and s["world"] == new]
    last_old = max((s["t"] for s in job.steps if s["world"] == old and s["t"] < after[0]["t"]),
                   default=before[-1]["t"] if before else t_event)
    first_new = after[0]["t"]
    starts = [s for s in job.starts if s["world"] == new and s["t0"] > last_old - 1 and s["load"] <= first_new]
    spawn = min((s["t0"] for s in starts), default=None)
    rec.update({
        "stallSeconds": round(first_new - last_old, 2),
        "eventToFirstStepSeconds": round(first_new - t_event, 2),
        "restartSeconds": round(first_new - spawn, 2) if spawn else None,
        "waitSeconds": round(spawn - last_old, 2) if spawn else None,
        "importSeconds": round(max(s["import"] - s["t0"] for s in starts), 2) if starts else None,
        "restartCount": after[0]["restart"],
        "stepsRedone": max(0, before[-1]["step"] - after[0]["step"] + 1) if before else None,
    })
    return rec


def run_once(option: str, python: str, events: list[str], monitor_interval: float | None,
             shared_store: bool = False, keep_logs: Path | None = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix=f"rdzv-{option}-") as tmp:
        job = Job(option, python, Path(tmp), monitor_interval, shared_store)
        job.live = {0, 1}
        out: dict[str, Any] = {"option": option, "events": []}
        try:
            job.announce(2)
            t = time.time()
            job.start_agent(0)
            job.start_agent(1)
            if not job.wait_steps(2, STABLE_STEPS, 0):
                out["error"] = "the job did not start at 2"
                return out
            job.read()
            out["firstStepSeconds"] = round(job.steps[0]["t"] - t, 2)
            for name in events:
                rec = measure(job, name)
                out["events"].append(rec)
                print(f"  {option:12s} {name:6s} {json.dumps({k: v for k, v in rec.items() if k != 'event'})}",
                      flush=True)
                if not rec["ok"]:
                    out["error"] = f"{name}: no step at the new size within {EVENT_TIMEOUT:.0f} s"
                    break
                job.wait_steps(rec["toWorkers"], STABLE_STEPS, time.time() - 0.01)
        except RuntimeError as exc:
            out["error"] = str(exc)
        finally:
            job.stop()
            out["agentLogTail"] = {i: (Path(tmp) / f"agent-{i}.log").read_text()[-1500:]
                                   for i in job.agents if "error" in out}
            if keep_logs is not None:  # every agent's log and the step log, for a look at the timeline
                where = keep_logs / f"{option}-{int(time.time())}"
                where.mkdir(parents=True, exist_ok=True)
                for f in [*Path(tmp).glob("agent-*.log"), Path(tmp) / "steps.jsonl"]:
                    if f.exists():
                        (where / f.name).write_bytes(f.read_bytes())
        return out


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for r in runs:
        for e in r["events"]:
            if e.get("stallSeconds") is None:
                continue
            d = out.setdefault(r["option"], {}).setdefault(e["event"], {"stall": [], "restart": [], "wait": []})
            d["stall"].append(e["stallSeconds"])
            d["restart"].append(e["restartSeconds"])
            d["wait"].append(e["waitSeconds"])
    for events in out.values():
        for name, d in events.items():
            events[name] = {k: {"min": min(v), "median": statistics.median(v), "max": max(v), "n": len(v)}
                            for k, v in d.items() if v and None not in v}
    return out


EVENT_NAMES = {"up2": "scale-up 2 -> 3 (max 4)", "up3": "scale-up 3 -> 4 (reaches max)",
               "down4": "scale-down 4 -> 3 (SIGTERM)", "down3": "scale-down 3 -> 2 (SIGTERM)"}


def table(result: dict[str, Any]) -> str:
    """A markdown table: stall min / median / max per event and option, each option's median against
    the baseline's (the ratio side by side, from the same run), and the median wait (stall minus the
    restart part: detection and rendezvous) per option."""
    summary = result.get("summary") or {}
    options = list(summary)
    others = [o for o in options if o != "baseline"]
    head = ("| event | " + " | ".join(f"{o} stall (s)" for o in options) + " | " +
            " | ".join(f"{o} / baseline" for o in others) + " | " +
            " | ".join(f"{o} wait (s)" for o in options) + " |")
    lines = [head, "|" + "---|" * (1 + 2 * len(options) + len(others))]
    for ev in result.get("events") or []:
        cells, ratios, waits = [], [], []
        base = (summary.get("baseline", {}).get(ev) or {}).get("stall")
        for o in options:
            st = (summary[o].get(ev) or {}).get("stall")
            wt = (summary[o].get(ev) or {}).get("wait")
            cells.append(f"{st['min']:.1f} / {st['median']:.1f} / {st['max']:.1f}" if st else "-")
            waits.append(f"{wt['median']:.1f}" if wt else "-")
            if o != "baseline":
                ratios.append(f"{st['median'] / base['median']:.2f}" if st and base else "-")
        lines.append(f"| {EVENT_NAMES.get(ev, ev)} | " + " | ".join(cells + ratios + waits) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", help="the JSON file to write (required unless --table)")
    p.add_argument("--python", default=str(DEFAULT_PYTHON), help="an interpreter with torch and the kit")
    p.add_argument("--options", default="baseline,last-call-5,kit",
                   help="comma-separated: baseline, last-call-N, kit (default: %(default)s)")
    p.add_argument("--reps", type=int, default=3, help="runs per option, interleaved (default: %(default)s)")
    p.add_argument("--events", default="up2,up3,down4,down3", help=f"from {','.join(EVENTS)}")
    p.add_argument("--monitor-interval", type=float, default=None,
                   help="torchrun --monitor_interval for every option (default: torchrun's)")
    p.add_argument("--shared-store", action="store_true",
                   help="leave TORCH_DISABLE_SHARE_RDZV_TCP_STORE unset (torch's default; the webhook sets it)")
    p.add_argument("--keep-logs", metavar="DIR", type=Path, help="copy each run's agent logs and step log here")
    p.add_argument("--table", metavar="FILE", help="print the markdown table of a FILE this script wrote, and exit")
    args = p.parse_args(argv)
    if args.table:
        print(table(json.loads(Path(args.table).read_text())))
        return 0
    options = [o for o in args.options.split(",") if o]
    for o in options:
        known = o in ("baseline", "kit-entrypoint", *KIT_LAUNCHER)
        if not known and not (o.startswith("last-call-") and o[10:].isdigit()):
            p.error(f"unknown option {o!r}")
    if not args.out:
        p.error("--out is required")
    events = [e for e in args.events.split(",") if e]
    if any(e not in EVENTS for e in events):
        p.error(f"--events: choose from {','.join(EVENTS)}")
    probe = subprocess.run([args.python, "-c", "import torch, volcano_elastic_job as k; "
                            "print(torch.__version__, k.__version__)"], capture_output=True, text=True)
    if probe.returncode:
        p.error(f"{args.python} cannot import torch and volcano_elastic_job: {probe.stderr.strip()[-300:]}")
    torch_version, kit_version = probe.stdout.split()
    result: dict[str, Any] = {
        "torch": torch_version, "kit": kit_version, "python": args.python,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform()},
        "monitorInterval": args.monitor_interval, "sharedStore": args.shared_store, "events": events, "runs": [],
    }
    print(f"torch {torch_version}, {os.cpu_count()} CPUs; options {options}, {args.reps} rep(s)", flush=True)
    for rep in range(args.reps):
        for option in options:
            run = run_once(option, args.python, events, args.monitor_interval, args.shared_store, args.keep_logs)
            run["rep"] = rep
            result["runs"].append(run)
            result["summary"] = summarize(result["runs"])
            Path(args.out).write_text(json.dumps(result, indent=1))  # after every run: nothing lost
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
