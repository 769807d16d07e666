"""A scale event in place versus a restart, on this machine, without Kubernetes (issue 39).

    python3 bench/inplace_resize.py --out FILE [--python PY] [--steps 150] [--step-seconds 0.1]
        [--scenarios in-place,restart,kill] [--keep]   # a grow must come before the last step

Local processes, one per "pod", run ``examples/training/elastic_train.py`` (gloo on CPU, a tiny
model, one process per pod, a checkpoint in a shared directory every ``--checkpoint-every`` steps).
This script plays volcano-elastic's agent: it writes each pod's downward-API annotations file
(``VOLCANO_ELASTIC_PODINFO``) and evicts (SIGTERM) as the agent would. Three jobs, one after the
other, each starting at 4 pods:

- ``in-place`` (``--in-place``): at step S1 a shrink 4 -> 2 (``resize-generation`` 1 and
  ``target-workers`` 2 on every pod, ``leaving`` 1 on pods 2 and 3; a pod is evicted once it wrote
  ``left``), at step S2 a grow 2 -> 4 (two new pods start, warm up and are admitted);
- ``restart``: the same two events the way a job without in-place resizing takes them at best: an
  eviction notice makes every rank checkpoint at the next boundary (0 steps redone), then every
  process is stopped and the job restarts at the new size from the checkpoint (spawn, import
  torch, init, load; no torchrun, no rendezvous wait: a lower bound of the restart path);
- ``kill``: the in-place job, one of its pods SIGKILLed at step S1 (nobody planned it): the survivors'
  collectives fail, every process ends, the job restarts at 4 from its last checkpoint.

Per event: ``stallSeconds`` (the last training step at the old size to the first at the new one,
from rank 0's progress log), ``stepsRedone``, ``inPlace`` (no process of the job restarted in
between), and per job whether every step was done and what the agent would wait for
(``agentSide``: announcement to the last ``left``; a grow's start of the new pods to the first step
at the new size, their warm-up included). ``--python``: an interpreter with torch
(default: this one if it imports torch, else /usr/bin/python3). Writes JSON.
"""

from __future__ import annotations

import argparse
import itertools
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

ROOT = Path(__file__).resolve().parent.parent
TRAIN = ROOT / "examples" / "training" / "elastic_train.py"
KIT = ROOT / "jobkit" / "src"
EVENT_TIMEOUT = 180.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def torch_python(given: str | None) -> str:
    if given:
        return given
    for candidate in (sys.executable, "/usr/bin/python3"):
        if subprocess.run([candidate, "-c", "import torch"], capture_output=True).returncode == 0:
            return candidate
    raise SystemExit("no python with torch: pass --python (e.g. Debian's python3-torch: /usr/bin/python3)")


def write_annotations(path: Path, values: dict[str, str]) -> None:
    """As the kubelet writes the downward-API file: atomically, ``key="value"`` per line."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(f"{k}={json.dumps(v)}\n" for k, v in sorted(values.items())))
    os.replace(tmp, path)


def read_log(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    out = []
    for line in path.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # a line being written
    return out


def last_step(path: Path) -> int:
    steps = [r["step"] for r in read_log(path) if "step" in r and "event" not in r]
    return max(steps) if steps else 0


JOBS: list[Job] = []  # every job made, so that a failed run leaves no process behind


class Job:
    """The pods of one job: processes, their annotation files, and the agent's side."""

    def __init__(self, name: str, work: Path, python: str, a: argparse.Namespace, in_place: bool) -> None:
        JOBS.append(self)
        self.name, self.dir, self.python, self.a, self.in_place = name, work / name, python, a, in_place
        self.dir.mkdir(parents=True)
        self.progress = self.dir / "progress.jsonl"
        self.pods: dict[str, subprocess.Popen[bytes]] = {}
        self.notes: dict[str, dict[str, str]] = {}
        self.seq = 0
        self.store_port = free_port()
        self.failures = 0
        self.fallbacks: list[dict[str, Any]] = []
        self.agent: list[dict[str, Any]] = []  # what the agent sees: announcement to left / grown

    def podinfo(self, pod: str) -> Path:
        return self.dir / f"{pod}.annotations"

    def annotate(self, pod: str, values: dict[str, str]) -> None:
        self.notes.setdefault(pod, {}).update(values)
        write_annotations(self.podinfo(pod), self.notes[pod])

    def start(self, pod: str, *, rank: int = 0, world: int = 0, master_port: int = 0) -> None:
        env = dict(os.environ, PYTHONPATH=str(KIT), POD_NAME=pod, VOLCANO_ELASTIC_PODINFO=str(self.podinfo(pod)),
                   VOLCANO_ELASTIC_ANNOUNCE_DIR=str(self.dir), PYTHONUNBUFFERED="1")
        env.pop("KUBERNETES_SERVICE_HOST", None)
        if self.in_place:
            env.update(VOLCANO_ELASTIC_STORE=f"127.0.0.1:{self.store_port}", VOLCANO_ELASTIC_STORE_POD="w0")
        else:
            env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(master_port), RANK=str(rank),
                       WORLD_SIZE=str(world), LOCAL_RANK="0")
        if not self.podinfo(pod).exists():
            self.annotate(pod, {})
        cmd = [self.python, str(TRAIN), "--dir", str(self.dir), "--steps", str(self.a.steps),
               "--step-seconds", str(self.a.step_seconds), "--checkpoint-every", str(self.a.checkpoint_every),
               "--notice-every", str(self.a.every), "--timeout", str(self.a.timeout),
               "--momentum", str(self.a.momentum)]
        if self.in_place:
            cmd.append("--in-place")
        out = open(self.dir / f"{pod}.log", "ab")  # noqa: SIM115 - the child's output, closed by the child's end
        self.pods[pod] = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)

    def launch(self, pods: list[str]) -> None:
        """All pods of the job at once (a fresh start or a restart)."""
        self.store_port = free_port()
        port = free_port()
        for pod in pods:
            self.annotate(pod, {"volcano-elastic.io/target-workers": str(len(pods))})
        for i, pod in enumerate(pods):
            self.start(pod, rank=i, world=len(pods), master_port=port)

    def stop(self, pods: list[str], sig: int = signal.SIGTERM, wait: float = 10.0) -> None:
        for pod in pods:
            p = self.pods.get(pod)
            if p is not None and p.poll() is None:
                p.send_signal(sig)
        deadline = time.monotonic() + wait
        for pod in pods:
            p = self.pods.pop(pod, None)
            if p is None:
                continue
            try:
                p.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()

    def wait_for(self, what: str, cond: Any, timeout: float = EVENT_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not cond():
            self.check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"{self.name}: timed out waiting for {what} (logs in {self.dir})\n"
                                   + self.tails())
            time.sleep(0.02)

    def tails(self, lines: int = 15) -> str:
        """Which pods still run, and the end of each pod's log and of rank 0's progress log: a timeout's
        message is all a CI log keeps of this run."""
        alive = sorted(pod for pod, p in self.pods.items() if p.poll() is None)
        out = [f"running: {alive}; exited: {({pod: p.returncode for pod, p in self.pods.items() if pod not in alive})}"]
        for f in [*sorted(self.dir.glob("*.log")), self.progress]:
            if f.exists():
                tail = f.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {f.name} ---\n" + "\n".join(tail))
        return "\n".join(out)

    def check_alive(self) -> None:
        """A pod that failed: the job restarts from its checkpoint at the same pods (the fallback)."""
        failed = [pod for pod, p in self.pods.items() if p.poll() not in (None, 0) and p.returncode != -signal.SIGTERM]
        if not failed:
            return
        if any(r.get("event") == "done" for r in read_log(self.progress)):
            raise RuntimeError(f"{self.name}: pods {failed} failed after the job's last step (logs in {self.dir})\n"
                               + self.tails())
        self.failures += 1
        if self.failures > 3:
            raise RuntimeError(f"{self.name}: pods {failed} failed {self.failures} times (logs in {self.dir})\n"
                               + self.tails())
        pods = sorted(self.pods)
        started = time.monotonic()  # the others must end by themselves (an error, not a hang)
        while any(p.poll() is None for p in self.pods.values()) and time.monotonic() - started < self.a.timeout + 20:
            time.sleep(0.05)
        self.fallbacks.append({"failed": failed, "othersEndedSeconds": round(time.monotonic() - started, 2),
                               "othersHung": [pod for pod, p in self.pods.items() if p.poll() is None],
                               "exitCodes": {pod: p.returncode for pod, p in self.pods.items()}})
        self.stop(pods, signal.SIGKILL, wait=5)
        self.launch(pods)

    def finish(self, timeout: float = EVENT_TIMEOUT * 2) -> bool:
        self.wait_for("the end", lambda: any(r.get("event") == "done" for r in read_log(self.progress))
                      and all(p.poll() is not None for p in self.pods.values()), timeout)
        return all(p.returncode == 0 for p in self.pods.values())


def shrink_in_place(job: Job, leaving: list[str], survivors: list[str], generation: int) -> None:
    target = str(len(survivors))
    for pod in leaving:
        job.annotate(pod, {"volcano-elastic.io/resize-generation": str(generation),
                           "volcano-elastic.io/target-workers": target, "volcano-elastic.io/leaving": str(generation)})
    for pod in survivors:
        job.annotate(pod, {"volcano-elastic.io/resize-generation": str(generation),
                           "volcano-elastic.io/target-workers": target})
    announced = time.monotonic()
    for pod in leaving:  # the agent evicts a leaving pod once it says it left
        left = job.dir / f"{pod}.left"
        job.wait_for(f"{pod} to leave", lambda left=left: left.exists() and left.read_text() == str(generation))
    job.agent.append({"event": generation, "kind": "shrink", "announcedToLeftSeconds":
                      round(time.monotonic() - announced, 3)})
    job.stop(leaving)


def grow_in_place(job: Job, members: list[str], new: list[str], generation: int) -> None:
    target = str(len(members) + len(new))
    for pod in [*members, *new]:
        job.annotate(pod, {"volcano-elastic.io/resize-generation": str(generation),
                           "volcano-elastic.io/target-workers": target})
    announced, before = time.monotonic(), len(read_log(job.progress))
    for pod in new:
        job.start(pod)
    job.wait_for("the grow", lambda: any(r.get("world") == int(target) and "step" in r and "event" not in r
                                         for r in read_log(job.progress)[before:]))
    job.agent.append({"event": generation, "kind": "grow", "announcedToGrownSeconds":
                      round(time.monotonic() - announced, 3)})


def restart_event(job: Job, victim: str, pods_after: list[str]) -> None:
    """The best restart: a notice, every rank checkpoints at the next boundary, then all restart."""
    checkpoints = sum(1 for r in read_log(job.progress) if r.get("why") == "notice")
    job.annotate(victim, {"volcano-elastic.io/evict-after": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                          time.gmtime(time.time() + 60))})
    job.wait_for("the notice's checkpoint",
                 lambda: sum(1 for r in read_log(job.progress) if r.get("why") == "notice") > checkpoints)
    job.stop(sorted(job.pods))
    for pod in list(job.notes):
        job.notes[pod].pop("volcano-elastic.io/evict-after", None)
    job.launch(pods_after)


def events_of(records: list[dict[str, Any]], kinds: list[str]) -> list[dict[str, Any]]:
    """Each scale event (or restart) in rank 0's log: the step records around it."""
    out: list[dict[str, Any]] = []
    prev: dict[str, Any] | None = None
    restarted = False
    for r in records:
        if r.get("event") == "start" and prev is not None:
            restarted = True
        if "step" not in r or "event" in r:
            continue
        if prev is not None and (r["world"] != prev["world"] or restarted):
            kind = kinds[len(out)] if len(out) < len(kinds) else "event"
            out.append({"kind": kind, "from": prev["world"], "to": r["world"], "inPlace": not restarted,
                        "atStep": prev["step"], "stallSeconds": round(r["t"] - prev["t"], 3),
                        "stepsRedone": max(0, prev["step"] - (r["step"] - 1))})
        prev, restarted = r, False
    return out


def job_summary(job: Job, ok: bool, kinds: list[str]) -> dict[str, Any]:
    records = read_log(job.progress)
    steps = [r["step"] for r in records if "step" in r and "event" not in r]
    gaps = [b["t"] - a["t"] for a, b in itertools.pairwise(records)
            if "step" in a and "step" in b and "event" not in a and "event" not in b and a["world"] == b["world"]]
    done = [r for r in records if r.get("event") == "done"]
    return {"job": job.name, "inPlace": job.in_place, "succeeded": ok, "failures": job.failures,
            "fallbacks": job.fallbacks, "agentSide": job.agent,
            "everyStepDone": sorted(set(steps)) == list(range(1, job.a.steps + 1)),
            "stepsLogged": len(steps), "stepSecondsMedian": round(statistics.median(gaps), 4) if gaps else None,
            "resizes": done[-1].get("resizes", []) if done else [],
            "events": [dict(e, job=job.name) for e in events_of(records, kinds)]}


def run_in_place(work: Path, py: str, a: argparse.Namespace) -> dict[str, Any]:
    job = Job("in-place", work, py, a, in_place=True)
    job.launch(["w0", "w1", "w2", "w3"])
    job.wait_for("step S1", lambda: last_step(job.progress) >= a.shrink_at)
    shrink_in_place(job, ["w2", "w3"], ["w0", "w1"], 1)
    job.wait_for("step S2", lambda: last_step(job.progress) >= a.grow_at)
    grow_in_place(job, ["w0", "w1"], ["w4", "w5"], 2)
    return job_summary(job, job.finish(), ["shrink", "grow"])


def run_restart(work: Path, py: str, a: argparse.Namespace) -> dict[str, Any]:
    job = Job("restart", work, py, a, in_place=False)
    job.launch(["w0", "w1", "w2", "w3"])
    job.wait_for("step S1", lambda: last_step(job.progress) >= a.shrink_at)
    restart_event(job, "w3", ["w0", "w1"])
    job.wait_for("step S2", lambda: last_step(job.progress) >= a.grow_at)
    restart_event(job, "w1", ["w0", "w1", "w2", "w3"])
    return job_summary(job, job.finish(), ["shrink", "grow"])


def run_kill(work: Path, py: str, a: argparse.Namespace) -> dict[str, Any]:
    job = Job("kill", work, py, a, in_place=True)
    job.launch(["w0", "w1", "w2", "w3"])
    job.wait_for("step S1", lambda: last_step(job.progress) >= a.shrink_at)
    job.pods["w3"].send_signal(signal.SIGKILL)
    return job_summary(job, job.finish(), ["kill"])


SCENARIOS = {"in-place": run_in_place, "restart": run_restart, "kill": run_kill}


def compare(jobs: list[dict[str, Any]]) -> dict[str, Any]:
    """In place against the restart, per event kind: stalls and their ratio."""
    by: dict[tuple[str, str], float] = {}
    for j in jobs:
        for e in j["events"]:
            by[(j["job"], e["kind"])] = e["stallSeconds"]
    out = {}
    for kind in ("shrink", "grow"):
        ip, rs = by.get(("in-place", kind)), by.get(("restart", kind))
        if ip is not None and rs is not None:
            out[kind] = {"inPlaceStallSeconds": ip, "restartStallSeconds": rs, "ratio": round(ip / rs, 4)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--python")
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--step-seconds", type=float, default=0.1)
    ap.add_argument("--checkpoint-every", type=int, default=20)
    ap.add_argument("--every", type=int, default=2, help="steps between the in-place (and notice) looks")
    ap.add_argument("--timeout", type=float, default=10.0, help="the process group's timeout")
    ap.add_argument("--momentum", type=float, default=0.9, help="SGD momentum: optimizer state to send")
    ap.add_argument("--shrink-at", type=int, default=25)
    ap.add_argument("--grow-at", type=int, default=55)
    ap.add_argument("--scenarios", default="in-place,restart,kill")
    ap.add_argument("--keep", action="store_true", help="keep the jobs' directories (logs)")
    a = ap.parse_args(argv)
    py = torch_python(a.python)
    version = subprocess.run([py, "-c", "import torch; print(torch.__version__)"], capture_output=True,
                             text=True, check=True).stdout.strip()
    work = Path(tempfile.mkdtemp(prefix="inplace-resize-"))
    jobs = []
    try:
        for name in a.scenarios.split(","):
            started = time.monotonic()
            summary = SCENARIOS[name](work, py, a)
            summary["wallSeconds"] = round(time.monotonic() - started, 1)
            jobs.append(summary)
            print(json.dumps(summary), file=sys.stderr)
    finally:
        for job in JOBS:
            job.stop(sorted(job.pods), signal.SIGKILL, wait=5)
        if not a.keep:
            subprocess.run(["rm", "-rf", str(work)], check=False)
        else:
            print(f"kept: {work}", file=sys.stderr)
    result = {"bench": "inplace_resize", "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
              "torch": version, "python": py, "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                                                          "loadavg": os.getloadavg()},
              "config": {k: v for k, v in vars(a).items() if k not in ("out",)},
              "events": [e for j in jobs for e in j["events"]], "jobs": jobs, "compare": compare(jobs)}
    Path(a.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result["compare"], indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
