"""The README's main job: elastic scaling, live, on the local control plane; then ``plan`` and
``simulate`` on the bundled examples; then a real elastic training job on real nodes, drawn.

    python -m hack.demo [--keep] [--skip-live] [--out DIR] [--real-training auto|on|off]

The live part starts a box (real kube-apiserver, etcd, Volcano, kwok 4 x 8 GPU nodes, training
operator), our webhook (certificates from ``volcano-elastic certs``, registered by URL) and our
controller + agent, then tells the story with short timers (cooldown 20 s):

1. a broken elastic PyTorchJob is refused by the validating webhook;
2. job A (team-vision, elastic 2..8 workers x 4 GPUs) starts at its min and grows into idle GPUs in
   one scale event (issue 19: every scale event restarts the torchrun group; before, it took three);
3. job B (team-nlp, 2 workers x 4 GPUs) arrives: A's highest elastic workers are evicted for it;
4. B finishes: A grows back once its cooldown has passed (6 -> 8: +33 %, at least the demo's
   minScaleUpGain of 0.3).

The real-training part (``--real-training``, default ``auto``) runs ``bench/real_training.py``: a box
with two real nodes (kubelet + containerd), our chart, and a torchrun job (torch on CPU) of 2..4
workers that a gang shrinks and that grows back; its world size and loss over time are drawn in the
terminal and in ``OUT/../real-training.svg`` (``hack/training_plot.py``). The demo's own box is down
by then (only one box with real nodes runs at a time, and two boxes would share the CPUs). Where the
host cannot run real nodes (``auto``), or the run fails, the demo says so and draws the recorded run
``bench/results/real_training-kit.json`` instead, labelled as recorded. ``on`` also exits 1 then;
``off`` skips the part.
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from hack import training_plot  # noqa: E402
from hack.localbox import Box, BoxOptions, list_boxes, realnode  # noqa: E402
from hack.localbox import paths as box_paths  # noqa: E402
from hack.localbox.box import free_port  # noqa: E402
from hack.localbox.ours import controller_argv, job_webhook, pod_webhook, start_webhook, webhook_argv  # noqa: E402

COOLDOWN = 20
GPUS = 4
DEMO_BOX = "demo"
REAL_TRAINING = REPO / "bench" / "real_training.py"
RECORDED = REPO / "bench" / "results" / "real_training-kit.json"
CONFIG = f"""\
apiVersion: volcano-elastic.io/v1alpha1
kind: ElasticConfig
namespaceQueues: {{team-vision: vision, team-nlp: nlp}}
agent: {{intervalSeconds: 1}}
defaults: {{cooldownSeconds: {COOLDOWN}, minRuntimeSeconds: 5, starvationSeconds: 3, maxScaleUpPerCycle: 2,
            minScaleUpGain: 0.3, wholeGangUpTo: 0, elasticMinShare: 1, noticeSeconds: 0}}
"""
# minScaleUpGain 0.3 (default 1): in step 4, A's growth from 6 back to 8 workers (+33 %) is worth a
# restart in this story; with the default it would keep its 6 until more room frees up.
# wholeGangUpTo 0, elasticMinShare 1, noticeSeconds 0 (defaults 4, 0.5, 60): the story shows A's
# workers evicted at once for B, not after a minute's notice.
T0 = time.monotonic()


def say(msg: str) -> None:
    print(f"[{time.monotonic() - T0:6.1f}s] {msg}", flush=True)


def banner(msg: str) -> None:
    print(f"\n=== {msg}", flush=True)


def wait_until(what: str, fn: Callable[[], Any], timeout: float, every: float = 1.0,
               progress: Callable[[], str] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    last_line = ""
    while time.monotonic() < deadline:
        result = fn()
        if result:
            return result
        if progress:
            line = progress()
            if line != last_line:
                say(line)
                last_line = line
        time.sleep(every)
    raise SystemExit(f"demo: timed out after {timeout:.0f}s waiting for {what}")


def cli(*args: str, check: bool = True, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "elastic_controller", *args], text=True, capture_output=True,
                          check=check, env=env)


def pytorchjob(name: str, ns: str, workers: int, elastic: tuple[int, int] | None) -> dict[str, Any]:
    template = {"spec": {"containers": [{
        "name": "pytorch", "image": "docker.io/pytorch/pytorch:2.5.1-cuda12.4-cudnn9-runtime",
        "command": ["torchrun", "train.py"],
        "resources": {"limits": {"nvidia.com/gpu": str(GPUS), "cpu": "1", "memory": "1Gi"}}}]}}
    spec: dict[str, Any] = {"pytorchReplicaSpecs": {"Worker": {"replicas": workers, "restartPolicy": "OnFailure",
                                                               "template": template}}}
    if elastic:
        spec["elasticPolicy"] = {"minReplicas": elastic[0], "maxReplicas": elastic[1], "rdzvBackend": "c10d",
                                 "maxRestarts": 100}
    return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


class Live:
    def __init__(self, box: Box, work: Path) -> None:
        self.box = box
        self.work = work
        self.env = {**os.environ, "KUBECONFIG": str(box.kubeconfig)}

    def kubectl(self, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        return self.box.kubectl(*args, input=input, check=check)

    def apply(self, obj: dict[str, Any] | list[dict[str, Any]]) -> subprocess.CompletedProcess[str]:
        doc = {"apiVersion": "v1", "kind": "List", "items": obj if isinstance(obj, list) else [obj]}
        return self.kubectl("apply", "-f", "-", input=json.dumps(doc), check=False)

    def pods(self, ns: str, job: str) -> list[dict[str, Any]]:
        out = self.kubectl("get", "pods", "-n", ns, "-l", f"training.kubeflow.org/job-name={job}", "-o", "json")
        return list(json.loads(out.stdout)["items"])

    def counts(self, ns: str, job: str) -> dict[str, int]:
        c = {"running": 0, "gated": 0, "pending": 0, "terminating": 0}
        for p in self.pods(ns, job):
            if p["metadata"].get("deletionTimestamp"):
                c["terminating"] += 1
            elif p["spec"].get("schedulingGates"):
                c["gated"] += 1
            elif p.get("status", {}).get("phase") == "Running":
                c["running"] += 1
            else:
                c["pending"] += 1
        return c

    def scale_ups(self, ns: str, job: str) -> list[str]:
        """The messages of the ScaledUp Events the agent recorded for ``job`` (one per scale event)."""
        out = self.kubectl("get", "events", "-n", ns, "--field-selector",
                           f"reason=ScaledUp,involvedObject.name={job}", "-o", "json", check=False)
        if out.returncode != 0:
            return []
        items = json.loads(out.stdout).get("items", [])
        return [str(e.get("message", "")) for e in items for _ in range(max(1, int(e.get("count") or 1)))]

    def describe(self, ns: str, job: str) -> str:
        c = self.counts(ns, job)
        return f"{job}: " + ", ".join(f"{v} {k}" for k, v in c.items() if v)

    def start_stack(self) -> None:
        banner("our webhook and controller, as local processes against the box")
        certs = self.work / "certs"
        cli("certs", "generate", "--service", "volcano-elastic-webhook", "--namespace", "volcano-elastic-system",
            "--ip", "127.0.0.1", "--out", str(certs))
        say(f"certificates from `volcano-elastic certs generate --ip 127.0.0.1` in {certs}")
        cfg = self.work / "config.yaml"
        cfg.write_text(CONFIG)
        port = free_port()
        start_webhook(self.box.spawn, webhook_argv(certs / "tls.crt", certs / "tls.key", port, cfg), port,
                      name="demo-webhook")
        import base64
        bundle = base64.b64encode((certs / "ca.crt").read_bytes()).decode()
        hooks = [pod_webhook("volcano-elastic-demo", port, bundle, timeout=5),
                 job_webhook("volcano-elastic-demo", port, bundle, timeout=5)]
        out = self.apply(hooks)
        if out.returncode:
            raise SystemExit(f"demo: registering the webhooks failed: {out.stderr}")
        say(f"webhook serving https://127.0.0.1:{port} (TLS), registered with failurePolicy Fail")
        self.box.spawn("demo-controller", controller_argv(self.box.kubeconfig, cfg, "default"))
        say(f"controller + agent started (cooldown {COOLDOWN}s, logs in {self.box.logs_dir})")

    def departments(self) -> None:
        objs: list[dict[str, Any]] = []
        for team, q in (("team-vision", "vision"), ("team-nlp", "nlp")):
            objs.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue", "metadata": {"name": q},
                         "spec": {"weight": 1, "reclaimable": True}})
            objs.append({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": team, "annotations": {"scheduling.volcano.sh/queue-name": q}}})
        out = self.apply(objs)
        if out.returncode:
            raise SystemExit(f"demo: creating queues failed: {out.stderr}")

        def opened() -> bool:
            got = self.kubectl("get", "queues", "vision", "nlp", "-o", "jsonpath={.items[*].status.state}",
                               check=False)
            return got.stdout.split() == ["Open", "Open"]

        wait_until("queues vision and nlp Open", opened, 60)
        say("queues vision and nlp (weight 1 each) are Open; namespaces team-vision, team-nlp mapped to them")

    def story(self) -> None:
        banner("1. a broken elastic job is refused with a clear message")
        bad = pytorchjob("broken", "team-vision", 3, (4, 2))
        out = self.apply(bad)
        print("   $ kubectl apply -f broken.yaml\n   " + (out.stderr or out.stdout).strip().replace("\n", "\n   "))
        if out.returncode == 0:
            raise SystemExit("demo: the validating webhook let a job with minReplicas > maxReplicas through")

        banner("2. job A (team-vision, elastic 2..8 workers x 4 GPUs) grows into the idle cluster")
        self.apply(pytorchjob("a", "team-vision", 8, (2, 8)))
        wait_until("A to run 8 workers", lambda: self.counts("team-vision", "a")["running"] >= 8, 240,
                   progress=lambda: self.describe("team-vision", "a"))
        say(self.describe("team-vision", "a") + "  (32 of 32 GPUs busy)")
        ups = self.scale_ups("team-vision", "a")
        say(f"A reached 8 workers in {len(ups)} scale event(s): " + " | ".join(ups))
        if len(ups) != 1:
            raise SystemExit(f"demo: A took {len(ups)} scale events to reach 8 workers, expected one")
        self.status()

        banner("3. job B (team-nlp, 2 workers x 4 GPUs) arrives: A's elastic workers make room")
        self.apply(pytorchjob("b", "team-nlp", 2, None))
        wait_until("B to run", lambda: self.counts("team-nlp", "b")["running"] >= 2, 180,
                   progress=lambda: self.describe("team-vision", "a") + " | " + self.describe("team-nlp", "b"))
        say(self.describe("team-vision", "a") + " | " + self.describe("team-nlp", "b"))
        ev = self.kubectl("get", "events", "-n", "team-vision", "--field-selector", "reason=EvictedForGang",
                          "-o", "custom-columns=POD:.involvedObject.name,MESSAGE:.message", check=False)
        print("   " + ev.stdout.strip().replace("\n", "\n   "))
        self.status()

        banner(f"4. B finishes; A grows back once its {COOLDOWN}s cooldown has passed")
        for p in self.pods("team-nlp", "b"):
            status = {"status": {"phase": "Succeeded", "containerStatuses": [{
                "name": "pytorch", "ready": False, "restartCount": 0, "image": "pytorch", "imageID": "",
                "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]}}
            self.kubectl("patch", "pod", "-n", "team-nlp", p["metadata"]["name"], "--subresource=status",
                         "--type=merge", "-p", json.dumps(status), check=False)
        say("B's pods marked Succeeded")
        wait_until("A to grow back to 8", lambda: self.counts("team-vision", "a")["running"] >= 8,
                   COOLDOWN + 180, progress=lambda: self.describe("team-vision", "a"))
        say(self.describe("team-vision", "a"))
        self.status()

    def status(self) -> None:
        out = cli("status", "--kubeconfig", str(self.box.kubeconfig), "--config", str(self.work / "config.yaml"),
                  check=False)
        print("   $ volcano-elastic status\n   " + (out.stdout or out.stderr).strip().replace("\n", "\n   "))


def live(keep: bool) -> None:
    banner("a control plane in a box: kube-apiserver, etcd, Volcano, kwok (4 nodes x 8 GPUs), training operator")
    box = Box(BoxOptions(name=DEMO_BOX, nodes=4, gpus_per_node=8))
    box.up()
    say(f"box up; kubeconfig {box.kubeconfig}")
    work = Path(tempfile.mkdtemp(prefix="volcano-elastic-demo-"))
    demo = Live(box, work)
    try:
        demo.start_stack()
        demo.departments()
        demo.story()
    finally:
        if keep:
            print(f"\n--keep: the box is still running. export KUBECONFIG={box.kubeconfig}; "
                  f"kubectl at {box_paths.binary('kubectl')}; stop it with hack/local-down.sh --name demo")
        else:
            box.down()
            say("box stopped")


def offline(out: Path) -> None:
    examples = REPO / "examples" / "plan"
    banner("volcano-elastic plan on a bundled snapshot (examples/plan/scale-down-for-gang.json)")
    res = cli("plan", "--from", str(examples / "scale-down-for-gang.json"), "--now", "2026-01-01T13:00:00Z")
    print(res.stdout.rstrip())
    banner("volcano-elastic simulate --example (64 nodes / 512 GPUs, 500 jobs; elastic vs static policies)")
    sim = subprocess.run([sys.executable, "-m", "elastic_controller", "simulate", "--example", "--policy", "all",
                          "--out", str(out)], text=True)
    if sim.returncode:
        raise SystemExit(f"demo: simulate failed with exit code {sim.returncode}")
    print(f"summary: {out / 'summary.json'}")
    tree = REPO / "examples" / "simulate" / "department-tree.yaml"
    banner("volcano-elastic simulate --shares capacity --hierarchy (examples/simulate/department-tree.yaml: "
           "256 GPUs in a department tree, 150 generated jobs)")
    cap_out = out.with_name(out.name + "-capacity")
    sim = subprocess.run([sys.executable, "-m", "elastic_controller", "simulate", "--cluster", str(tree),
                          "--generate", "150", "--shares", "capacity", "--hierarchy", "--policy", "all",
                          "--out", str(cap_out)], text=True)
    if sim.returncode:
        raise SystemExit(f"demo: simulate --shares capacity failed with exit code {sim.returncode}")
    print(f"summary: {cap_out / 'summary.json'}")


# ---------------------------------------------------------------------------- real training
Runner = Callable[[Path], tuple[int, str]]


def shout(lines: Sequence[str]) -> None:
    """A message nobody scrolls past (no colour needed)."""
    bar = "!" * 100
    print("\n" + bar)
    for line in "\n".join(lines).splitlines():
        for part in textwrap.wrap(line, 96, subsequent_indent="    " if line.startswith("    ") else "",
                                  break_on_hyphens=False) or [""]:
            print("!!  " + part)
    print(bar, flush=True)


def real_node_boxes() -> list[str]:
    """Running boxes with real nodes (their bridge is one per machine)."""
    found = []
    for name in list_boxes():
        b = Box(name=name)
        if b.load() and (b.opts.real_nodes or int(b.state.get("real_nodes", 0) or 0)):
            found.append(name)
    return found


def real_training_blockers(problems: Sequence[str], boxes: Sequence[str], real_boxes: Sequence[str],
                           keep: bool) -> list[str]:
    """Why the real-training run cannot start now (empty: it can)."""
    why = []
    if problems:
        why.append("this host cannot run real nodes: " + "; ".join(problems))
    if keep:
        why.append("--keep leaves the demo's box running, and the real-node box must not share the machine "
                   "with it (run again with --skip-live once you have stopped it: hack/local-down.sh --name demo)")
    elif DEMO_BOX in boxes:
        why.append(f"the demo's box {DEMO_BOX!r} is still running (stop it: hack/local-down.sh --name {DEMO_BOX})")
    for name in real_boxes:
        why.append(f"box {name!r} already has real nodes (one such box at a time; stop it: "
                   f"hack/local-down.sh --name {name})")
    return why


def training_verdict(mode: str, why: Sequence[str]) -> str:
    """One line, said before anything else and again after the run: whether the real-training part runs
    live on this machine or shows the recorded run, and why."""
    if mode == "off":
        return "real training: OFF (--real-training off)"
    if not why:
        return ("real training: LIVE, on this machine's real nodes (root, containerd, runc, CNI plugins, kubelet "
                "present), at the end")
    fix = (" (`make node-packages` installs them as root; `make demo` runs it first)"
           if any("install-node-packages" in w for w in why) else "")
    return "real training: RECORDED, not live, because " + "; ".join(why) + fix


def run_bench(out_json: Path) -> tuple[int, str]:
    """bench/real_training.py --out OUT_JSON, its progress lines shown as they come; (exit code, last lines)."""
    cmd = [sys.executable, str(REAL_TRAINING), "--out", str(out_json), "--steps", "500"]  # grows back
    say("$ " + " ".join([Path(cmd[0]).name, *[os.path.relpath(c, REPO) if c.startswith(str(REPO)) else c
                                               for c in cmd[1:]]]))
    tail: collections.deque[str] = collections.deque(maxlen=8)
    with tempfile.TemporaryFile("w+") as summary:
        proc = subprocess.Popen(cmd, stdout=summary, stderr=subprocess.PIPE, text=True, cwd=REPO)
        assert proc.stderr is not None
        for line in proc.stderr:
            print("   " + line.rstrip(), flush=True)
            if line.strip():
                tail.append(line.rstrip())
        rc = proc.wait()
    return rc, "\n".join(tail)


def real_training(mode: str, out_dir: Path, *, keep: bool, problems: Sequence[str] | None = None,
                  boxes: Sequence[str] | None = None, real_boxes: Sequence[str] | None = None,
                  runner: Runner = run_bench, width: int | None = None) -> bool:
    """The real-training part; True when a live run on this machine met its targets."""
    if mode == "off":
        return True
    banner("a real elastic training job on real nodes (kubelet + containerd): torchrun, torch on CPU, "
           "2..4 workers; a gang takes two of them, then the job grows back")
    started = time.monotonic()
    out_dir.mkdir(parents=True, exist_ok=True)
    out_json = out_dir / "real_training.json"
    out_svg = out_dir / "real-training.svg"
    why = real_training_blockers(realnode.host_problems() if problems is None else problems,
                                 list_boxes() if boxes is None else boxes,
                                 real_node_boxes() if real_boxes is None else real_boxes, keep)
    run: training_plot.Run | None = None
    label = None
    ok = False
    if not why:
        out_json.unlink(missing_ok=True)  # never draw an earlier run's file as this one
        rc, tail = runner(out_json)
        try:
            run = training_plot.load(out_json)
        except training_plot.PlotError as e:
            why.append(f"bench/real_training.py ended with exit code {rc} and "
                       + (f"a result that does not read ({e})" if out_json.exists() else "no result")
                       + (f"; its last lines:\n{textwrap.indent(tail, '    ')}" if tail else ""))
        else:
            label = f"LIVE RUN on this machine, {training_plot.recorded_when(run)}; result in {out_json}"
            ok = rc == 0
            if not ok:
                shout([f"THE REAL TRAINING RUN DID NOT MEET ITS TARGETS (bench/real_training.py exit code {rc}): "
                       f"{training_plot.outcome(run)}.", f"Its result: {out_json}"])
    if run is None:
        shout(["NO REAL TRAINING RUN HERE: " + why[0], *why[1:],
               f"SHOWING A RECORDED RUN INSTEAD: {os.path.relpath(RECORDED, REPO)}"])
        run = training_plot.load(RECORDED)
        label = (f"RECORDED RUN, not this machine's: {os.path.relpath(RECORDED, REPO)} "
                 f"({training_plot.recorded_when(run)})")
    cols = width or min(100, max(60, shutil.get_terminal_size((100, 24)).columns))
    print(training_plot.terminal(run, cols, label))
    out_svg.write_text(training_plot.svg(run, label))
    say(f"chart: {out_svg} ({time.monotonic() - started:.0f}s for this part)")
    if why:  # the recorded run was drawn
        say(training_verdict(mode, why))
    else:
        say("real training: LIVE, this machine's run" + ("" if ok else ", which did not meet its targets"))
    return ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", action="store_true", help="leave the box running afterwards")
    parser.add_argument("--skip-live", action="store_true", help="only plan and simulate (no control plane)")
    parser.add_argument("--out", default=str(REPO / "out" / "simulate"), help="simulate output directory")
    parser.add_argument("--real-training", choices=("auto", "on", "off"), default="auto",
                        help="the real-node training run after the rest: auto (default) runs it where the host "
                             "can run real nodes and draws the recorded run where not; on: the same, but exit 1 "
                             "unless a live run met its targets; off: skip it. Its JSON and SVG go next to --out")
    args = parser.parse_args()
    if args.real_training == "on" and args.keep:
        parser.error("--real-training on needs the demo's box down before the real-node box starts: "
                     "drop --keep, or use --real-training off")
    if args.real_training != "off":  # said first: nobody should wait 6 minutes to learn it was recorded
        say(training_verdict(args.real_training, real_training_blockers(realnode.host_problems(), [],
                                                                        real_node_boxes(), args.keep)))
    if not args.skip_live:
        live(args.keep)
    offline(Path(args.out))
    ok = real_training(args.real_training, Path(args.out).resolve().parent, keep=args.keep)
    banner(f"done in {time.monotonic() - T0:.0f}s")
    if args.real_training == "on" and not ok:
        raise SystemExit("demo: --real-training on, and no live real training run met its targets (see above)")


if __name__ == "__main__":
    main()
