"""Load benchmark: our webhook vs a no-op Flask endpoint (and vs an earlier commit), under gunicorn over TLS.

The servers run the same way (gunicorn ``gthread`` workers, keep-alive, same workers and
threads, the same TLS context); the no-op reads the body and returns a constant allowed
review. N client connections (kept alive, like the API server's) post realistic pod reviews
(master, core and elastic pods of elastic jobs, ~6 KiB each) in alternating rounds, because the
machine is noisy. Reported per target: throughput, p50/p99 latency, and server CPU time per
review (utime+stime of the arbiter and its workers from /proc). Then each at a fixed rate
(open loop, paced by schedule) for p50/p99 at, by default, 200 requests/s.

``--against REF`` (repeatable; default: the newest release tag, if the repository has one) also
serves the webhook of that commit, extracted with ``git archive`` into a temporary directory and run with this
virtualenv and the same settings, in the same rounds: the summary prints its CPU per review over
ours, so a regression shows as a ratio below 1 measured side by side (this machine drifts; absolute
times from different runs are not comparable).

    .venv/bin/python bench/webhook_load.py [--connections 16] [--rounds 3] [--seconds 5] [--rate 200]
    .venv/bin/python bench/webhook_load.py --against 59acb46 --rounds 7 --rate 0

The clients are Python (http.client in threads, spread over processes) on the same machine,
so they compete with the servers for CPU; the CPU time per review is the cleaner comparison.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import os
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from hack.localbox.procs import stop_child  # noqa: E402

SERVICE, NAMESPACE = "ve-webhook", "ve-system"
SERVER_NAME = f"{SERVICE}.{NAMESPACE}.svc"
TICKS = os.sysconf("SC_CLK_TCK")


# ----------------------------------------------------------------------------- the no-op server
def serve_noop(port: int, cert: str, key: str, workers: int, threads: int) -> None:
    from flask import Flask, Response, request
    from gunicorn.app.base import BaseApplication

    from webhook.server import KEEPALIVE_SECONDS, ssl_context

    answer = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                         "response": {"uid": "noop", "allowed": True}}).encode()
    app = Flask("noop")

    @app.post("/mutate-pods")
    def noop() -> Response:
        request.get_data()
        return Response(answer, mimetype="application/json")

    class Noop(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for k, v in {"bind": [f"127.0.0.1:{port}"], "workers": workers, "worker_class": "gthread",
                         "threads": threads, "keepalive": KEEPALIVE_SECONDS, "certfile": cert, "keyfile": key,
                         "ssl_context": ssl_context, "control_socket_disable": True, "accesslog": None,
                         "errorlog": "-", "loglevel": "warning"}.items():
                self.cfg.set(k, v)

        def load(self) -> Any:
            return app

    Noop().run()


# ----------------------------------------------------------------------------- requests
def pod_review(index: int, uid: int) -> dict[str, Any]:
    """A pod as the training operator creates it, with the fields the API server adds."""
    rtype = "master" if index < 0 else "worker"
    idx = max(index, 0)
    labels = {"training.kubeflow.org/operator-name": "pytorchjob-controller",
              "training.kubeflow.org/job-name": "resnet-elastic",
              "training.kubeflow.org/replica-type": rtype, "training.kubeflow.org/replica-index": str(idx)}
    if rtype == "master":
        labels["training.kubeflow.org/job-role"] = "master"
    env = [{"name": n, "value": v} for n, v in [
        ("PET_NNODES", "2:8"), ("PET_NPROC_PER_NODE", "1"), ("PET_RDZV_BACKEND", "c10d"),
        ("PET_RDZV_ENDPOINT", "resnet-elastic-master-0:23456"), ("PET_MAX_RESTARTS", "10"),
        ("PYTHONUNBUFFERED", "1"), ("NCCL_DEBUG", "INFO"), ("MASTER_PORT", "23456"),
        ("MASTER_ADDR", "resnet-elastic-master-0"), ("WORLD_SIZE", "8"), ("RANK", str(idx)),
    ]]
    container = {
        "name": "pytorch", "image": "ghcr.io/example/resnet:2.3.1-cuda12.1", "imagePullPolicy": "IfNotPresent",
        "command": ["torchrun"], "args": ["--nnodes=2:8", "train.py", "--epochs", "90", "--batch-size", "256"],
        "env": env, "ports": [{"name": "pytorchjob-port", "containerPort": 23456, "protocol": "TCP"}],
        "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "8", "memory": "32Gi"},
                      "requests": {"nvidia.com/gpu": "1", "cpu": "8", "memory": "32Gi"}},
        "volumeMounts": [{"name": "data", "mountPath": "/data"}, {"name": "dshm", "mountPath": "/dev/shm"},
                         {"name": "kube-api-access-x7k2p", "mountPath": "/var/run/secrets/kubernetes.io/"
                          "serviceaccount", "readOnly": True}],
        "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
    }
    obj = {
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": f"resnet-elastic-{rtype}-{idx}", "namespace": "team-vision", "labels": labels,
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "resnet-elastic",
                                 "uid": "3f0b8c56-2a1e-4df4-9b7e-6a8f3c2d1e0f", "controller": True,
                                 "blockOwnerDeletion": True}],
            "managedFields": [{"manager": "training-operator", "operation": "Update", "apiVersion": "v1",
                               "time": "2026-11-22T05:00:00Z", "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:labels": {f"f:{k}": {} for k in labels}},
                                            "f:spec": {"f:containers": {'k:{"name":"pytorch"}': {
                                                f"f:{k}": {} for k in container}}}}}],
        },
        "spec": {
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "imagenet"}},
                        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
                        {"name": "kube-api-access-x7k2p", "projected": {"defaultMode": 420, "sources": [
                            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt",
                                                                                   "path": "ca.crt"}]}}]}}],
            "containers": [container], "restartPolicy": "OnFailure", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "ClusterFirst", "serviceAccountName": "default", "securityContext": {},
            "schedulerName": "default-scheduler", "priority": 0, "enableServiceLinks": True,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
                            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                             "tolerationSeconds": 300}],
        },
        "status": {"phase": "Pending", "qosClass": "Guaranteed"},
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": f"bench-{uid:08d}", "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "team-vision", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kubeflow:training-operator",
                     "groups": ["system:serviceaccounts", "system:authenticated"]},
        "object": obj, "oldObject": None, "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"}}}


def bodies() -> list[bytes]:
    return [json.dumps(pod_review(i, i + 1)).encode() for i in range(-1, 8)]  # master-0, worker-0..7


# ----------------------------------------------------------------------------- clients
class Conn(http.client.HTTPSConnection):
    def __init__(self, port: int, ctx: ssl.SSLContext) -> None:
        super().__init__("127.0.0.1", port, context=ctx, timeout=30)
        self.ctx = ctx

    def connect(self) -> None:
        http.client.HTTPConnection.connect(self)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self.ctx.wrap_socket(self.sock, server_hostname=SERVER_NAME)


HEADERS = {"Content-Type": "application/json"}


def client_proc(port: int, ca: str, threads: int, start: float, seconds: float, rate: float,
                out: Any) -> None:
    """Threads with one kept-alive connection each; closed loop, or paced at ``rate`` per thread."""
    ctx = ssl.create_default_context(cafile=ca)
    docs = bodies()
    lat: list[float] = []
    errors = [0]
    lock = threading.Lock()

    def loop(tid: int) -> None:
        conn = Conn(port, ctx)
        conn.connect()
        mine: list[float] = []
        i = tid
        while time.time() < start:
            time.sleep(0.001)
        end = time.perf_counter() + seconds
        next_at = time.perf_counter() + (tid / (rate * threads) if rate else 0)
        while True:
            now = time.perf_counter()
            if now >= end:
                break
            if rate:
                if next_at > now:
                    time.sleep(next_at - now)
                sent = next_at  # latency from the scheduled time: no coordinated omission
                next_at += 1.0 / rate
            else:
                sent = now
            try:
                conn.request("POST", "/mutate-pods", body=docs[i % len(docs)], headers=HEADERS)
                resp = conn.getresponse()
                resp.read()
                if resp.status != 200:
                    raise RuntimeError(resp.status)
                mine.append(time.perf_counter() - sent)
            except Exception:  # counted, and a fresh connection
                errors[0] += 1
                conn.close()
                conn = Conn(port, ctx)
            i += 1
        conn.close()
        with lock:
            lat.extend(mine)

    ts = [threading.Thread(target=loop, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put((lat, errors[0]))


def run_clients(port: int, ca: str, connections: int, procs: int, seconds: float,
                rate: float = 0.0) -> tuple[list[float], int]:
    ctx = mp.get_context("fork")
    queue: Any = ctx.Queue()
    per = max(1, connections // procs)
    start = time.time() + 0.5
    ps = [ctx.Process(target=client_proc, args=(port, ca, per, start, seconds,
                                                rate / (procs * per) if rate else 0.0, queue))
          for _ in range(procs)]
    for p in ps:
        p.start()
    lat: list[float] = []
    errors = 0
    for _ in ps:
        got, err = queue.get()
        lat += got
        errors += err
    for p in ps:
        p.join()
    return lat, errors


# ----------------------------------------------------------------------------- server CPU
def tree_cpu_seconds(pid: int) -> float:
    pids = [pid]
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                pids.append(int(entry))
    total = 0
    for p in pids:
        try:
            with open(f"/proc/{p}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime
        except OSError:
            pass
    return total / TICKS


# ----------------------------------------------------------------------------- driver
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_ready(port: int, ca: str, proc: subprocess.Popen[bytes]) -> None:
    ctx = ssl.create_default_context(cafile=ca)
    for _ in range(300):
        if proc.poll() is not None:
            raise SystemExit(f"server exited with {proc.returncode}")
        try:
            conn = Conn(port, ctx)
            conn.request("POST", "/mutate-pods", body=bodies()[0], headers=HEADERS)
            if conn.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("server not ready")


def pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def newest_tag() -> str | None:
    out = subprocess.run(["git", "describe", "--tags", "--abbrev=0", "HEAD"], cwd=ROOT, capture_output=True,
                         text=True)
    return out.stdout.strip() or None if out.returncode == 0 else None


def extract(ref: str, into: Path) -> str:
    """The tree of ``ref`` under ``into`` (git archive: no worktree to clean up); its short commit."""
    commit = subprocess.run(["git", "rev-parse", "--short", f"{ref}^{{commit}}"], cwd=ROOT, capture_output=True,
                            text=True)
    if commit.returncode != 0:
        raise SystemExit(f"--against {ref}: not a commit here ({commit.stderr.strip()})")
    into.mkdir(parents=True)
    archive = subprocess.Popen(["git", "archive", "--format=tar", ref], cwd=ROOT, stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(into)], stdin=archive.stdout, check=True)
    if archive.wait() != 0:
        raise SystemExit(f"--against {ref}: git archive failed")
    return commit.stdout.strip()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--connections", type=int, default=16)
    parser.add_argument("--client-procs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=200.0, help="fixed-rate phase, requests/s (0: skip it)")
    parser.add_argument("--rate-seconds", type=float, default=10.0)
    parser.add_argument("--against", metavar="REF", action="append",
                        help="also measure the webhook of this commit or tag side by side; repeatable (default: "
                             "the newest release tag, if any; 'none' to skip)")
    parser.add_argument("--access-log", action="store_true", help="our server logs every request (JSON)")
    parser.add_argument("--json", metavar="F", help="also write the results as JSON")
    parser.add_argument("--serve-noop", nargs=5, metavar=("PORT", "CERT", "KEY", "WORKERS", "THREADS"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_noop:
        port, cert, key, workers, threads = args.serve_noop
        serve_noop(int(port), cert, key, int(workers), int(threads))
        return 0

    from certs.generate import generate

    tmp = Path(tempfile.mkdtemp(prefix="webhook-bench-"))
    generate(tmp, SERVICE, NAMESPACE, ips=["127.0.0.1"])
    ca, cert, key = str(tmp / "ca.crt"), str(tmp / "tls.crt"), str(tmp / "tls.key")
    tag = newest_tag()
    refs: list[str] = args.against if args.against is not None else [tag] if tag else []
    if not refs:
        print("no release tag in this repository: pass --against COMMIT to compare with an earlier webhook")
    refs = [r for r in refs if r != "none"]

    def webhook_cmd(port: int) -> list[str]:
        return [sys.executable, "-m", "elastic_controller", "webhook", "--tls-cert-file", cert,
                "--tls-private-key-file", key, "--host", "127.0.0.1", "--port", str(port),
                "--workers", str(args.workers), "--threads", str(args.threads), "--log-level", "warning",
                *([] if args.access_log else ["--no-access-log"])]

    names = ["ours", "noop"]
    ports = {name: free_port() for name in names}
    cmds = {"ours": (webhook_cmd(ports["ours"]), ROOT),
            "noop": ([sys.executable, __file__, "--serve-noop", str(ports["noop"]), cert, key, str(args.workers),
                      str(args.threads)], ROOT)}
    for i, ref in enumerate(refs):
        old = extract(ref, tmp / f"against-{i}")
        names.append(old)
        ports[old] = free_port()
        cmds[old] = (webhook_cmd(ports[old]), tmp / f"against-{i}")
    envs = {name: {**os.environ, "PYTHONPATH": str(cwd)} for name, (_, cwd) in cmds.items()}
    procs = {name: subprocess.Popen(cmd, cwd=cwd, env=envs[name], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
             for name, (cmd, cwd) in cmds.items()}
    results: dict[str, Any] = {"config": {k: v for k, v in vars(args).items() if k != "serve_noop"},
                               "against": names[2:],
                               "cores": os.cpu_count(), "rounds": [], "rate": {}}
    width = max(len(n) for n in names)
    try:
        for name in procs:
            wait_ready(ports[name], ca, procs[name])
        for name in procs:  # warm-up
            run_clients(ports[name], ca, args.connections, args.client_procs, 1.0)
        print(f"{os.cpu_count()} cores; {args.workers} workers x {args.threads} threads each; "
              f"{args.connections} kept-alive client connections in {args.client_procs} processes; "
              f"targets: {', '.join(names)}")
        print(f"{'round':>5} {'target':>{width}} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'cpu us/review':>13} "
              f"{'errors':>6}")
        for r in range(args.rounds):
            shift = r % len(names)  # every target goes first in turn
            order = names[shift:] + names[:shift]
            for name in order if r % 2 == 0 else order[::-1]:
                cpu0 = tree_cpu_seconds(procs[name].pid)
                lat, errors = run_clients(ports[name], ca, args.connections, args.client_procs, args.seconds)
                cpu = tree_cpu_seconds(procs[name].pid) - cpu0
                row = {"round": r + 1, "target": name, "rps": len(lat) / args.seconds, "p50": pct(lat, 0.5),
                       "p99": pct(lat, 0.99), "cpu_us": cpu / max(len(lat), 1) * 1e6, "errors": errors}
                results["rounds"].append(row)
                print(f"{row['round']:>5} {name:>{width}} {row['rps']:>8.0f} {row['p50']:>7.2f} {row['p99']:>7.2f} "
                      f"{row['cpu_us']:>13.0f} {errors:>6}")
        summary: dict[str, dict[str, float]] = {}
        for name in names:
            rows = [x for x in results["rounds"] if x["target"] == name]
            summary[name] = {k: statistics.median(x[k] for x in rows) for k in ("rps", "p50", "p99", "cpu_us")}
        results["summary"] = summary
        o, n = summary["ours"], summary["noop"]
        results["ratios"] = {"noop_over_ours_cpu": n["cpu_us"] / o["cpu_us"]}
        print(f"median of rounds: ours {o['rps']:.0f} req/s vs no-op {n['rps']:.0f} req/s = "
              f"{o['rps'] / n['rps']:.2f}x; p50 {o['p50']:.2f} vs {n['p50']:.2f} ms; p99 {o['p99']:.2f} vs "
              f"{n['p99']:.2f} ms; server CPU {o['cpu_us']:.0f} vs {n['cpu_us']:.0f} us/review "
              f"(no-op/ours = {n['cpu_us'] / o['cpu_us']:.2f}x)")
        for old in names[2:]:
            a = summary[old]
            results["ratios"][f"{old}_over_ours_cpu"] = a["cpu_us"] / o["cpu_us"]
            print(f"against {old}: server CPU {a['cpu_us']:.0f} us/review there vs {o['cpu_us']:.0f} here "
                  f"({old}/ours = {a['cpu_us'] / o['cpu_us']:.2f}x; below 1.00 = this checkout is slower); "
                  f"p50 {a['p50']:.2f} vs {o['p50']:.2f} ms")
        for name in names if args.rate else ():
            lat, errors = run_clients(ports[name], ca, min(args.connections, 8), 2, args.rate_seconds, args.rate)
            results["rate"][name] = {"rps": len(lat) / args.rate_seconds, "p50": pct(lat, 0.5),
                                     "p99": pct(lat, 0.99), "errors": errors}
            x = results["rate"][name]
            print(f"fixed {args.rate:.0f} req/s, {name:>{width}}: achieved {x['rps']:.0f} req/s, p50 {x['p50']:.2f} "
                  f"ms, p99 {x['p99']:.2f} ms, errors {errors}")
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2))
    finally:
        for proc in procs.values():
            stop_child(proc, 30)
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
