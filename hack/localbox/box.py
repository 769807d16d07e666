"""The control plane in a box: real etcd, kube-apiserver, kube-controller-manager, Volcano,
kwok GPU nodes and the Kubeflow training operator, all on 127.0.0.1.

    box = Box(BoxOptions(name="dev"))
    box.up()          # prints progress, returns when every component is healthy
    box.kubeconfig    # admin kubeconfig (client certificate in system:masters)
    box.down()        # kills every process group it started and removes the box directory

State lives in <cache>/boxes/<name>/state.json so that another process (hack/local-down.sh)
can stop a box started by hack/local-up.sh.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from . import paths, pki, realnode
from .kube import Kube, http_ok
from .procs import BoxError, Proc, _proc_start_time, free_port, log_tail, proc_alive
from .realnode import RealNodes

PROFILES = {
    # etcd + kube-apiserver + kube-controller-manager + every CRD (no scheduler, no nodes)
    "core": ["etcd", "kube-apiserver", "kube-controller-manager"],
    # the whole box
    "full": ["etcd", "kube-apiserver", "kube-controller-manager", "vc-scheduler",
             "vc-controller-manager", "kwok", "training-operator"],
}
KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")
OPERATOR_NAMESPACE = "kubeflow"
OPERATOR_WEBHOOK_CONFIG = "validator.training-operator.kubeflow.org"
OPERATOR_WEBHOOK_SECRET = "training-operator-webhook-cert"
# cert-controller (inside the training operator) only checks that this file exists; the
# webhook server itself reads $TMPDIR/k8s-webhook-server/serving-certs (TMPDIR is per box).
OPERATOR_FIXED_CERT_DIR = Path("/tmp/k8s-webhook-server/serving-certs")
KCM_CONTROLLERS = ("garbage-collector-controller,namespace-controller,serviceaccount-controller,"
                   "disruption-controller,resourcequota-controller")
VOLCANO_CONTROLLERS = "queue-controller,pg-controller,gc-controller"
# with real nodes: a stopped kubelet's node goes Unknown, is tainted, and its pods are evicted
REAL_NODE_KCM_CONTROLLERS = (",node-lifecycle-controller,taint-eviction-controller,pod-garbage-collector-controller,"
                             "root-ca-certificate-publisher-controller,endpoints-controller,endpointslice-controller,deployment-controller,replicaset-controller,"
                             "job-controller,cronjob-controller,ttl-after-finished-controller")


@dataclass
class BoxOptions:
    name: str = "default"
    profile: str = "full"
    nodes: int = 4
    gpus_per_node: int = 8
    node_cpu: str = "32"
    node_memory: str = "256Gi"
    node_pods: int = 110
    volcano_conf: str = "ours"  # NAME of hack/volcano-scheduler-NAME.conf (ours, native, gang-native, ...) | a file
    real_nodes: int = 0  # real kubelet nodes beside the kwok ones (hack/localbox/realnode.py)
    real_node_gpus: int = 4  # fake nvidia.com/gpu each real node advertises
    real_node_images: list[str] = field(default_factory=list)  # OCI archives imported into every real node
    timeout: float = 90.0  # per component health wait
    keep_on_failure: bool = False
    quiet: bool = False

    def compatible(self, other: dict[str, Any]) -> list[str]:
        diffs = []
        for k in ("profile", "nodes", "gpus_per_node", "node_cpu", "node_memory", "node_pods", "volcano_conf",
                  "real_nodes", "real_node_gpus"):
            if other.get(k, BoxOptions.__dataclass_fields__[k].default) != getattr(self, k):
                diffs.append(f"{k}={other.get(k)!r} (asked {getattr(self, k)!r})")
        return diffs


def list_boxes() -> list[str]:
    d = paths.boxes_dir()
    if not d.is_dir():
        return []
    return sorted(p.name for p in d.iterdir() if (p / "state.json").exists())


class Box:
    def __init__(self, opts: BoxOptions | None = None, *, name: str | None = None):
        self.opts = opts or BoxOptions(name=name or "default")
        if name:
            self.opts.name = name
        self.dir = paths.boxes_dir() / self.opts.name
        self.procs: dict[str, Proc] = {}
        self.ports: dict[str, int] = {}
        self._popen: dict[str, subprocess.Popen] = {}
        self._kube: Kube | None = None
        self._specs: dict[str, tuple[Callable[[], list[str]], Callable[[], bool], tuple[str, ...],
                                     dict[str, str] | None]] = {}
        self._log_offsets: dict[str, int] = {}
        self.created_fixed_cert_dir = False
        self.state: dict[str, Any] = {}

    # ------------------------------------------------------------------ paths
    @property
    def state_file(self) -> Path:
        return self.dir / "state.json"

    @property
    def kubeconfig(self) -> Path:
        return self.dir / "kubeconfig"

    @property
    def pki_dir(self) -> Path:
        return self.dir / "pki"

    @property
    def logs_dir(self) -> Path:
        return self.dir / "logs"

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def ca_file(self) -> Path:
        return self.pki_dir / "ca.crt"

    @property
    def ca_bundle(self) -> str:
        """base64 of the cluster CA PEM (for caBundle fields)."""
        return base64.b64encode(self.ca_file.read_bytes()).decode()

    @property
    def kube(self) -> Kube:
        if self._kube is None or self._kube.port != self.ports["apiserver"]:
            self._kube = Kube("127.0.0.1", self.ports["apiserver"], str(self.ca_file),
                              str(self.pki_dir / "admin.crt"), str(self.pki_dir / "admin.key"))
        return self._kube

    def say(self, msg: str) -> None:
        if not self.opts.quiet:
            print(f"[localbox {self.opts.name} {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ state
    def _save(self) -> None:
        self.state.update({
            "name": self.opts.name,
            "options": asdict(self.opts),
            "ports": self.ports,
            "procs": {k: asdict(v) for k, v in self.procs.items()},
            "kubeconfig": str(self.kubeconfig),
            "server": self.server if "apiserver" in self.ports else None,
            "created_fixed_cert_dir": self.created_fixed_cert_dir,
            "owner_pid": os.getpid(),
            "bin_dir": str(paths.bin_dir()),
        })
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.state, indent=2))
        os.replace(tmp, self.state_file)

    def load(self) -> bool:
        """Load state.json of an existing box; False when there is none."""
        try:
            st = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return False
        self.state = st
        saved = st.get("options") or {}
        known = {k: v for k, v in saved.items() if k in BoxOptions.__dataclass_fields__ and k not in ("name", "quiet")}
        self.opts = BoxOptions(**{**asdict(self.opts), **known})
        self.ports = {k: int(v) for k, v in st.get("ports", {}).items()}
        self.procs = {k: Proc(**v) for k, v in st.get("procs", {}).items()}
        self.created_fixed_cert_dir = bool(st.get("created_fixed_cert_dir"))
        self._kube = None
        return True

    def healthy(self) -> tuple[bool, str]:
        dead = [n for n, p in self.procs.items() if not proc_alive(p)]
        if dead:
            return False, f"process(es) not running: {', '.join(dead)}"
        if not self.state.get("ready"):
            return False, "box never became ready"
        try:
            if self.kube.get("/readyz", timeout=5) != "ok":
                return False, "kube-apiserver /readyz is not ok"
        except Exception as e:
            return False, f"kube-apiserver unreachable: {e}"
        return True, "healthy"

    # ------------------------------------------------------------------ processes
    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Proc:
        self.logs_dir.mkdir(parents=True, exist_ok=True)
        log = self.logs_dir / f"{name}.log"
        full_env = dict(os.environ)
        full_env.pop("KUBECONFIG", None)
        # everything talks to 127.0.0.1: never through a proxy from the environment
        for k in ("NO_PROXY", "no_proxy"):
            full_env[k] = ",".join(x for x in (full_env.get(k), "127.0.0.1", "localhost") if x)
        full_env.update(env or {})
        with open(log, "ab") as lf:
            lf.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(argv)}\n".encode())
            lf.flush()
            p = subprocess.Popen(argv, stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 cwd=self.dir, env=full_env, start_new_session=True)
        st = None
        for _ in range(50):
            st = _proc_start_time(p.pid)
            if st:
                break
            time.sleep(0.01)
        proc = Proc(name=name, pid=p.pid, start_time=st or "?", log=str(log), argv=argv)
        self.procs[name] = proc
        self._popen[name] = p
        self._save()
        return proc

    def _wait_healthy(self, name: str, check: Callable[[], bool], timeout: float | None = None) -> None:
        timeout = timeout or self.opts.timeout
        proc = self.procs.get(name)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc is not None and not proc_alive(proc):
                raise BoxError(f"{name} exited during start-up (log {proc.log}); last lines:\n{log_tail(proc.log)}")
            try:
                if check():
                    return
            except Exception:
                pass
            time.sleep(0.2)
        where = f" (log {proc.log}); last lines:\n{log_tail(proc.log)}" if proc else ""
        raise BoxError(f"{name} did not become healthy within {timeout:.0f}s{where}")

    def _start(self, name: str, make_argv: Callable[[], list[str]], check: Callable[[], bool],
               port_keys: tuple[str, ...] = (), env: dict[str, str] | None = None,
               wait: bool = True) -> None:
        """Start a component on fresh free ports; with wait=False, wait_started() later."""
        self._specs[name] = (make_argv, check, port_keys, env)
        t0 = time.monotonic()
        self._launch(name)
        if wait:
            self.wait_started(name, check, t0)

    def _launch(self, name: str) -> Proc:
        make_argv, _check, port_keys, env = self._specs[name]
        for k in port_keys:
            p = free_port()
            while p in self.ports.values():
                p = free_port()
            self.ports[k] = p
        log = self.logs_dir / f"{name}.log"
        self._log_offsets[name] = log.stat().st_size if log.exists() else 0
        return self._spawn(name, make_argv(), env)

    def _port_conflict(self, name: str) -> bool:
        try:
            with open(self.logs_dir / f"{name}.log", "rb") as f:
                f.seek(self._log_offsets.get(name, 0))
                return b"address already in use" in f.read()
        except OSError:
            return False

    def wait_started(self, name: str, check: Callable[[], bool], t0: float) -> None:
        """Wait for a component's health; if it lost a port race (another process took a
        port between our probe and its bind), restart it on other ports (twice at most)."""
        for attempt in range(3):
            try:
                self._wait_healthy(name, check)
                break
            except BoxError:
                if attempt == 2 or name not in self._specs or not self._port_conflict(name):
                    raise
                self.say(f"{name}: a port was taken meanwhile; restarting it on other ports")
                self._kill(self.procs[name])
                self._launch(name)
        self.say(f"{name} healthy in {time.monotonic() - t0:.1f}s (pid {self.procs[name].pid})")

    def _kill(self, proc: Proc, grace: float = 10.0) -> None:
        if not proc_alive(proc):
            self._reap(proc.name)
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            except PermissionError:
                os.kill(proc.pid, sig)
            deadline = time.monotonic() + (grace if sig == signal.SIGTERM else 5)
            while time.monotonic() < deadline:
                self._reap(proc.name)
                if not proc_alive(proc):
                    break
                time.sleep(0.05)
            if not proc_alive(proc):
                break
        # the group may still hold children
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except OSError:
            pass
        self._reap(proc.name)

    def _reap(self, name: str) -> None:
        p = self._popen.get(name)
        if p is not None:
            try:
                p.wait(timeout=0)
            except subprocess.TimeoutExpired:
                pass

    # ------------------------------------------------------------------ up / down
    def up(self) -> Path:
        """Start the box (or reuse a healthy one with the same options); return the kubeconfig."""
        if self.opts.profile not in PROFILES:
            raise BoxError(f"unknown profile {self.opts.profile!r} (known: {', '.join(PROFILES)})")
        paths.boxes_dir().mkdir(parents=True, exist_ok=True)
        with open(paths.boxes_dir() / f".{self.opts.name}.lock", "w") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise BoxError(f"another process is starting or stopping box {self.opts.name!r} now") from None
            return self._up_locked()

    def _up_locked(self) -> Path:
        existing = Box(name=self.opts.name)
        if existing.load():
            ok, why = existing.healthy()
            if ok:
                diffs = self.opts.compatible(existing.state.get("options", {}))
                if diffs:
                    raise BoxError(
                        f"box {self.opts.name!r} is already running with different options: "
                        f"{'; '.join(diffs)}. Stop it first (hack/local-down.sh --name {self.opts.name}) "
                        f"or pick another --name.")
                self.say(f"reusing the running box {self.opts.name!r} ({existing.server})")
                self.load()
                return self.kubeconfig
            self.say(f"found a stale box {self.opts.name!r} ({why}); cleaning it up")
            existing.down(quiet=True)
        if self.dir.exists():
            shutil.rmtree(self.dir)
        missing = paths.missing_binaries(PROFILES[self.opts.profile] +
                                         (list(realnode.REAL_NODE_BINARIES) if self.opts.real_nodes else []))
        if self.opts.real_nodes and self.opts.profile != "full":
            raise BoxError("--real-nodes needs the full profile (the Volcano scheduler places pods on them)")
        if missing:
            raise BoxError(paths.describe_missing(missing))
        crds = self._crd_files()
        t0 = time.monotonic()
        self.dir.mkdir(parents=True)
        (self.dir / "tmp").mkdir()
        self.state = {"ready": False, "started": time.time()}
        try:
            self._up(crds)
        except BaseException as e:
            if self.opts.keep_on_failure:
                self.say(f"start failed; keeping box {self.opts.name!r} for debugging in {self.dir} "
                         f"(stop it with hack/local-down.sh --name {self.opts.name})")
            else:
                self.say("start failed; stopping everything that was started")
                kept = self._keep_logs()
                self.down(quiet=True)
                if kept is not None:
                    self.say(f"the logs of the failed start are kept in {kept}")
                    e = BoxError(str(e).replace(str(self.logs_dir), str(kept)))
                    raise e from None
            if isinstance(e, (BoxError, KeyboardInterrupt)):
                raise
            raise BoxError(f"box start failed: {e}") from e
        self.state["ready"] = True
        self.state["up_seconds"] = round(time.monotonic() - t0, 1)
        self._save()
        self.say(f"box {self.opts.name!r} is up in {time.monotonic() - t0:.1f}s: {self.server}")
        return self.kubeconfig

    def _keep_logs(self) -> Path | None:
        """Move the logs of a failed start out of the box dir (which down() removes)."""
        if not self.logs_dir.is_dir():
            return None
        root = paths.boxes_dir() / ".failed-logs"
        if root.is_dir():  # keep a day's worth
            for old in root.iterdir():
                if time.time() - old.stat().st_mtime > 86400:
                    shutil.rmtree(old, ignore_errors=True)
        dst = root / self.opts.name
        shutil.rmtree(dst, ignore_errors=True)
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.move(str(self.logs_dir), str(dst))
        except OSError:
            return None
        return dst

    def _crd_files(self) -> list[Path]:
        d = paths.crd_dir()
        files = sorted(d.glob("*/*.yaml")) if d.is_dir() else []
        names = {f.name for f in files}
        need = {"scheduling.volcano.sh_podgroups.yaml", "scheduling.volcano.sh_queues.yaml",
                "kubeflow.org_pytorchjobs.yaml"}
        if self.opts.profile == "full":
            need |= {"topology.volcano.sh_hypernodes.yaml", "nodeinfo.volcano.sh_numatopologies.yaml",
                     "bus.volcano.sh_commands.yaml"}
        if not need <= names:
            raise BoxError(f"CRDs missing in {d}: {', '.join(sorted(need - names))}. "
                           f"Run: bash hack/build-binaries.sh (it copies them from the module cache)")
        return files

    @property
    def real(self) -> RealNodes | None:
        n = self.opts.real_nodes or int(self.state.get("real_nodes", 0) or 0)
        return RealNodes(self, n, self.opts.real_node_gpus) if n else None

    def _up(self, crds: list[Path]) -> None:
        b = paths.binary
        self._make_pki()
        real = self.real
        if real is not None:
            self.state["real_nodes"] = real.count
            self._save()
            real.network_up()

        # etcd
        etcd_data = self.dir / "etcd"
        self._start("etcd", lambda: [
            str(b("etcd")), "--name", "box", "--data-dir", str(etcd_data),
            "--listen-client-urls", f"http://127.0.0.1:{self.ports['etcd']}",
            "--advertise-client-urls", f"http://127.0.0.1:{self.ports['etcd']}",
            "--listen-peer-urls", f"http://127.0.0.1:{self.ports['etcd_peer']}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{self.ports['etcd_peer']}",
            "--initial-cluster", f"box=http://127.0.0.1:{self.ports['etcd_peer']}",
            "--unsafe-no-fsync", "--quota-backend-bytes", str(2 * 1024**3), "--log-level", "warn",
        ], lambda: http_ok(f"http://127.0.0.1:{self.ports['etcd']}/health", expect='"health":"true"'),
            port_keys=("etcd", "etcd_peer"))

        # kube-apiserver
        pk = self.pki_dir
        self._start("kube-apiserver", lambda: [
            str(b("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            *self._apiserver_network_flags(),
            f"--secure-port={self.ports['apiserver']}",
            f"--tls-cert-file={pk / 'apiserver.crt'}", f"--tls-private-key-file={pk / 'apiserver.key'}",
            f"--client-ca-file={pk / 'ca.crt'}",
            f"--service-account-issuer=https://127.0.0.1:{self.ports['apiserver']}",
            f"--service-account-key-file={pk / 'sa.pub'}",
            f"--service-account-signing-key-file={pk / 'sa.key'}",
            "--service-cluster-ip-range=10.96.0.0/16",
            "--allow-privileged=true",
            f"--cert-dir={pk}", "--profiling=false",
            "--event-ttl=1h", "-v=1",
        ], lambda: self.kube.get("/readyz", timeout=3) == "ok", port_keys=("apiserver",))
        self._write_kubeconfig()
        self._save()

        # kube-controller-manager starts in the background while CRDs go in
        t_kcm = time.monotonic()
        self._start("kube-controller-manager", lambda: [
            str(b("kube-controller-manager")),
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--bind-address=127.0.0.1", f"--secure-port={self.ports['kcm']}",
            f"--cert-dir={self.dir / 'kcm-certs'}",
            f"--controllers={KCM_CONTROLLERS}{REAL_NODE_KCM_CONTROLLERS if real else ''}",
            *(["--node-monitor-period=2s", "--node-monitor-grace-period=20s"] if real else []),
            f"--service-account-private-key-file={pk / 'sa.key'}",
            f"--root-ca-file={pk / 'ca.crt'}",
            "--leader-elect=false", "--use-service-account-credentials=false", "-v=1",
        ], lambda: True, port_keys=("kcm",), wait=False)

        self._install_crds(crds)
        self.wait_started("kube-controller-manager",
                          lambda: http_ok(f"https://127.0.0.1:{self.ports['kcm']}/healthz", expect="ok"), t_kcm)

        if self.opts.profile == "full":
            self._up_full()
        if real is not None:
            real.kubernetes_service_dnat(self.ports["apiserver"])
            self._save()
            real.start()

    def _apiserver_network_flags(self) -> list[str]:
        """Kwok-only boxes: everything on 127.0.0.1, no kubelet, no node lifecycle. With real
        nodes: the apiserver is reachable from pods (the bridge's gateway), advertises that
        address for the `kubernetes` Service, talks to kubelets, authorizes them as nodes, mounts
        service-account tokens, and reaches webhook Services through their endpoints."""
        pk = self.pki_dir
        if not self.opts.real_nodes:
            return ["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", "--endpoint-reconciler-type=none",
                    "--authorization-mode=RBAC",
                    # no kubelet to mount tokens; no node lifecycle controller to lift not-ready taints
                    "--disable-admission-plugins=ServiceAccount,TaintNodesByCondition"]
        return ["--bind-address=0.0.0.0", f"--advertise-address={realnode.GATEWAY}",
                "--endpoint-reconciler-type=lease", "--authorization-mode=Node,RBAC",
                "--disable-admission-plugins=TaintNodesByCondition", "--enable-aggregator-routing=true",
                f"--kubelet-client-certificate={pk / 'admin.crt'}", f"--kubelet-client-key={pk / 'admin.key'}",
                f"--kubelet-certificate-authority={pk / 'ca.crt'}",
                "--kubelet-preferred-address-types=InternalIP"]

    def _up_full(self) -> None:
        b = paths.binary
        kc = str(self.kubeconfig)
        conf = self._scheduler_conf()
        started: dict[str, tuple[float, Callable[[], bool]]] = {}

        # Volcano scheduler + controllers
        t = time.monotonic()
        self._start("vc-scheduler", lambda: [
            str(b("vc-scheduler")), f"--kubeconfig={kc}", f"--scheduler-conf={conf}",
            "--leader-elect=false", "--enable-healthz=true",
            f"--healthz-address=127.0.0.1:{self.ports['vc_scheduler_healthz']}",
            f"--listen-address=127.0.0.1:{self.ports['vc_scheduler_metrics']}",
            "--schedule-period=500ms", f"--cache-dump-dir={self.dir / 'tmp'}",
            "--logtostderr", "-v=3",
        ], lambda: True, port_keys=("vc_scheduler_healthz", "vc_scheduler_metrics"), wait=False)
        started["vc-scheduler"] = (t, lambda: http_ok(
            f"http://127.0.0.1:{self.ports['vc_scheduler_healthz']}/healthz"))

        t = time.monotonic()
        self._start("vc-controller-manager", lambda: [
            str(b("vc-controller-manager")), f"--kubeconfig={kc}", "--leader-elect=false",
            f"--controllers={VOLCANO_CONTROLLERS}", "--enable-healthz=true",
            f"--healthz-address=127.0.0.1:{self.ports['vc_cm_healthz']}",
            f"--listen-address=127.0.0.1:{self.ports['vc_cm_metrics']}",
            "--logtostderr", "-v=2",
        ], lambda: True, port_keys=("vc_cm_healthz", "vc_cm_metrics"), wait=False)
        started["vc-controller-manager"] = (t, lambda: http_ok(
            f"http://127.0.0.1:{self.ports['vc_cm_healthz']}/healthz"))

        # kwok: HOME is the box dir so no ~/.kwok config leaks in; stages from its module
        kwok_conf = self._kwok_config()
        t = time.monotonic()
        self._start("kwok", lambda: [
            str(b("kwok")), f"--config={kwok_conf}", f"--kubeconfig={kc}",
            f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION[0]}={KWOK_ANNOTATION[1]}",
            "--manage-all-nodes=false", f"--node-port={self.ports['kwok']}",
            f"--server-address=127.0.0.1:{self.ports['kwok']}", "--node-ip=127.0.0.1",
            "--cidr=10.244.0.1/16", "--node-lease-duration-seconds=0",
        ], lambda: True, port_keys=("kwok",), env={"HOME": str(self.dir)}, wait=False)
        started["kwok"] = (t, lambda: http_ok(f"http://127.0.0.1:{self.ports['kwok']}/healthz"))

        # training operator: certificates + webhook configuration (for the port just picked)
        # first, see _operator_prereqs
        def operator_argv() -> list[str]:
            self._operator_prereqs()
            return [
                str(b("training-operator")), f"--kubeconfig={kc}",
                "--enable-scheme=pytorchjob", "--leader-elect=false",
                f"--webhook-server-port={self.ports['operator_webhook']}",
                f"--metrics-bind-address=127.0.0.1:{self.ports['operator_metrics']}",
                f"--health-probe-bind-address=127.0.0.1:{self.ports['operator_probe']}",
                "--zap-devel=false", "--zap-log-level=info",
            ]

        t = time.monotonic()
        self._start("training-operator", operator_argv, lambda: True,
                    port_keys=("operator_webhook", "operator_metrics", "operator_probe"),
                    env={"MY_POD_NAMESPACE": OPERATOR_NAMESPACE, "TMPDIR": str(self.dir / "tmp")}, wait=False)
        started["training-operator"] = (t, lambda: http_ok(
            f"http://127.0.0.1:{self.ports['operator_probe']}/readyz"))

        self._create_nodes()
        for name, (t0, check) in started.items():
            self.wait_started(name, check, t0)

        t = time.monotonic()
        self.kube.wait_for(f"{self.opts.nodes} kwok nodes Ready", self._nodes_ready, self.opts.timeout)
        self.say(f"{self.opts.nodes} kwok nodes Ready in {time.monotonic() - t:.1f}s")
        t = time.monotonic()
        try:
            self.kube.wait_for("Volcano queue 'default' to be Open", self._default_queue_open, self.opts.timeout)
        except TimeoutError as e:
            raise BoxError(f"{e}\nvc-scheduler log:\n{log_tail(self.procs['vc-scheduler'].log, 15)}\n"
                           f"vc-controller-manager log:\n"
                           f"{log_tail(self.procs['vc-controller-manager'].log, 15)}") from None
        self.say(f"queue 'default' Open in {time.monotonic() - t:.1f}s")

    # ------------------------------------------------------------------ pieces
    def _make_pki(self) -> None:
        d = self.pki_dir
        ca = pki.make_ca("volcano-elastic-localbox-ca")
        ca.write(d / "ca.crt", d / "ca.key")
        pki.issue(ca, "kube-apiserver", dns_names=["localhost", "kubernetes", "kubernetes.default",
                                                   "kubernetes.default.svc"],
                  ips=["127.0.0.1", "10.96.0.1", realnode.GATEWAY]).write(d / "apiserver.crt", d / "apiserver.key")
        pki.issue(ca, "volcano-elastic-admin", orgs=["system:masters"], server=False,
                  client=True).write(d / "admin.crt", d / "admin.key")
        priv, pub = pki.rsa_keypair_pem()
        pki._write(d / "sa.key", priv, 0o600)
        pki._write(d / "sa.pub", pub, 0o644)

    def issue_serving_cert(self, out_dir: str | Path, name: str = "webhook",
                           dns_names: list[str] | None = None) -> tuple[Path, Path]:
        """A serving certificate signed by the box CA with an IP SAN for 127.0.0.1 (for
        webhooks registered by `url: https://127.0.0.1:PORT/...`). caBundle = self.ca_bundle."""
        ca = pki.KeyPair((self.pki_dir / "ca.crt").read_bytes(), (self.pki_dir / "ca.key").read_bytes())
        out = Path(out_dir)
        crt, key = out / f"{name}.crt", out / f"{name}.key"
        pki.issue(ca, name, dns_names=["localhost", *(dns_names or [])], ips=["127.0.0.1"]).write(crt, key)
        return crt, key

    def _write_kubeconfig(self) -> None:
        def b64(p: Path) -> str:
            return base64.b64encode(p.read_bytes()).decode()

        cfg = {
            "apiVersion": "v1", "kind": "Config", "preferences": {},
            "clusters": [{"name": "localbox", "cluster": {
                "server": self.server, "certificate-authority-data": b64(self.pki_dir / "ca.crt")}}],
            "users": [{"name": "admin", "user": {
                "client-certificate-data": b64(self.pki_dir / "admin.crt"),
                "client-key-data": b64(self.pki_dir / "admin.key")}}],
            "contexts": [{"name": "localbox", "context": {"cluster": "localbox", "user": "admin"}}],
            "current-context": "localbox",
        }
        pki._write(self.kubeconfig, yaml.safe_dump(cfg).encode(), 0o600)

    def _install_crds(self, files: list[Path]) -> None:
        t = time.monotonic()
        names = []
        for f in files:
            for doc in yaml.safe_load_all(f.read_text()):
                if not doc or doc.get("kind") != "CustomResourceDefinition":
                    continue
                doc.get("metadata", {}).pop("creationTimestamp", None)
                doc.pop("status", None)
                names.append(doc["metadata"]["name"])
                self.kube.apply(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{doc['metadata']['name']}",
                                doc)

        def established() -> bool:
            for n in names:
                crd = self.kube.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{n}")
                conds = {c["type"]: c["status"] for c in crd.get("status", {}).get("conditions", [])}
                if conds.get("Established") != "True":
                    return False
            return True

        self.kube.wait_for("CRDs Established", established, 60)
        self.say(f"{len(names)} CRDs installed and Established in {time.monotonic() - t:.1f}s")

    def _scheduler_conf(self) -> Path:
        v = self.opts.volcano_conf
        named = paths.HACK_DIR / f"volcano-scheduler-{v}.conf"  # ours, native, gang-native, capacity, ...
        src = named if "/" not in v and named.is_file() else Path(v)
        if not src.is_file():
            raise BoxError(f"Volcano scheduler configuration {v!r} not found ({src}); "
                           f"use one of {', '.join(scheduler_conf_names())} or a file")
        text = src.read_text()
        volcano = paths.versions().get("VOLCANO_VERSION", "")
        m = re.search(r"^actions:\s*\"?([^\"\n]*)", text, re.M)
        actions = {a.strip() for a in (m.group(1) if m else "").split(",")}
        gang = sorted(actions & {"gangpreempt", "gangreclaim"})
        if gang and version_tuple(volcano) < (1, 15, 0):
            raise BoxError(f"Volcano scheduler configuration {v!r} uses {', '.join(gang)}, which Volcano "
                           f"{volcano} does not have (they came with v1.15); unset VOLCANO_VERSION")
        dst = self.dir / "volcano-scheduler.conf"
        dst.write_text(text)
        return dst

    def _kwok_config(self) -> Path:
        stages = sorted(paths.kwok_stages_dir().glob("*.yaml"))
        if not stages:
            raise BoxError(f"kwok stages missing in {paths.kwok_stages_dir()}; run: bash hack/build-binaries.sh")
        dst = self.dir / "kwok.yaml"
        dst.write_text("\n---\n".join(f.read_text() for f in stages))
        return dst

    def _create_nodes(self) -> None:
        for i in range(self.opts.nodes):
            name = f"kwok-node-{i}"
            res = {"cpu": self.opts.node_cpu, "memory": self.opts.node_memory,
                   "pods": str(self.opts.node_pods), "nvidia.com/gpu": str(self.opts.gpus_per_node)}
            node = {
                "apiVersion": "v1", "kind": "Node",
                "metadata": {
                    "name": name,
                    "annotations": {KWOK_ANNOTATION[0]: KWOK_ANNOTATION[1],
                                    "node.alpha.kubernetes.io/ttl": "0"},
                    "labels": {"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                               "kubernetes.io/arch": "amd64", "kubernetes.io/role": "agent",
                               "nvidia.com/gpu.present": "true"},
                },
                "spec": {},
                "status": {"capacity": res, "allocatable": res,
                           "nodeInfo": {"kubeletVersion": "fake", "operatingSystem": "linux",
                                        "architecture": "amd64"}},
            }
            self.kube.create("/api/v1/nodes", node)

    def _nodes_ready(self) -> bool:
        nodes = self.kube.get("/api/v1/nodes", query={"labelSelector": "type=kwok"})["items"]
        if len(nodes) < self.opts.nodes:
            return False
        for n in nodes:
            conds = {c["type"]: c["status"] for c in n.get("status", {}).get("conditions", [])}
            if conds.get("Ready") != "True":
                return False
        return True

    def _default_queue_open(self) -> bool:
        q = self.kube.get("/apis/scheduling.volcano.sh/v1beta1/queues/default")
        return q.get("status", {}).get("state") == "Open"

    def _operator_prereqs(self) -> None:
        """Give the training operator the certificates its cert-controller expects, and point
        its ValidatingWebhookConfiguration at 127.0.0.1 (there is no Service to route to)."""
        d = self.pki_dir / "training-operator"
        svc = f"training-operator.{OPERATOR_NAMESPACE}.svc"
        # CA must verify for the DNS name "training-operator-ca" and be RSA/PKCS#1 (cert-controller)
        ca = pki.make_ca("training-operator-ca", key_kind="rsa", dns_names=["training-operator-ca"],
                         orgs=["training-operator"])
        srv = pki.issue(ca, svc, dns_names=[svc, f"{svc}.cluster.local", "localhost"], ips=["127.0.0.1"])
        ca.write(d / "ca.crt", d / "ca.key")
        srv.write(d / "tls.crt", d / "tls.key")
        cert_dir = self.dir / "tmp" / "k8s-webhook-server" / "serving-certs"
        srv.write(cert_dir / "tls.crt", cert_dir / "tls.key")
        if not (OPERATOR_FIXED_CERT_DIR / "tls.crt").exists():
            try:
                srv.write(OPERATOR_FIXED_CERT_DIR / "tls.crt", OPERATOR_FIXED_CERT_DIR / "tls.key")
                self.created_fixed_cert_dir = True
            except OSError as e:
                raise BoxError(f"cannot create {OPERATOR_FIXED_CERT_DIR} (the training operator waits for "
                               f"a file there): {e}") from None

        k = self.kube
        k.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                        "metadata": {"name": OPERATOR_NAMESPACE}})
        k.apply(f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/secrets/{OPERATOR_WEBHOOK_SECRET}", {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": OPERATOR_WEBHOOK_SECRET, "namespace": OPERATOR_NAMESPACE},
            "data": {"ca.crt": base64.b64encode(ca.cert_pem).decode(),
                     "ca.key": base64.b64encode(ca.key_pem).decode(),
                     "tls.crt": base64.b64encode(srv.cert_pem).decode(),
                     "tls.key": base64.b64encode(srv.key_pem).decode()},
        })
        url = f"https://127.0.0.1:{self.ports['operator_webhook']}/validate-kubeflow-org-v1-pytorchjob"
        k.apply(f"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/{OPERATOR_WEBHOOK_CONFIG}", {
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": OPERATOR_WEBHOOK_CONFIG},
            "webhooks": [{
                "name": "validator.pytorchjob.training-operator.kubeflow.org",
                "admissionReviewVersions": ["v1"], "sideEffects": "None", "failurePolicy": "Fail",
                "timeoutSeconds": 10,
                "clientConfig": {"url": url, "caBundle": base64.b64encode(ca.cert_pem).decode()},
                "rules": [{"apiGroups": ["kubeflow.org"], "apiVersions": ["v1"],
                           "operations": ["CREATE", "UPDATE"], "resources": ["pytorchjobs"]}],
            }],
        })

    def down(self, quiet: bool = False) -> None:
        """Stop every process group of the box (reverse start order) and remove its files."""
        if not self.procs and self.state_file.exists():
            self.load()
        t = time.monotonic()
        real = self.real
        if real is not None:
            if not quiet:
                self.say(f"stopping {real.count} real node(s): pods, kubelets, containerd")
            real.teardown(self.procs, self._kill)
        for name in reversed(list(self.procs)):
            p = self.procs[name]
            if proc_alive(p) and not quiet:
                self.say(f"stopping {name} (pid {p.pid})")
            self._kill(p)
        if self.created_fixed_cert_dir:
            others = [n for n in list_boxes() if n != self.opts.name]
            if not others:
                shutil.rmtree(OPERATOR_FIXED_CERT_DIR.parent, ignore_errors=True)
        if self.dir.exists():
            shutil.rmtree(self.dir, ignore_errors=True)
        (paths.boxes_dir() / f".{self.opts.name}.lock").unlink(missing_ok=True)
        self.procs = {}
        if not quiet:
            self.say(f"box {self.opts.name!r} stopped and removed in {time.monotonic() - t:.1f}s")

    def status(self) -> dict[str, Any]:
        ok, why = self.healthy()
        return {
            "name": self.opts.name, "healthy": ok, "detail": why, "kubeconfig": str(self.kubeconfig),
            "server": self.state.get("server"), "options": self.state.get("options"),
            "processes": {n: {"pid": p.pid, "alive": proc_alive(p), "log": p.log} for n, p in self.procs.items()},
        }

    # ------------------------------------------------------------------ helpers for tests
    def env(self) -> dict[str, str]:
        """Environment for a process that should talk to the box."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig)}

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Proc:
        """Start an extra process (own process group, log in the box's logs dir) that
        `down()` stops too."""
        return self._spawn(name, argv, {"KUBECONFIG": str(self.kubeconfig), **(env or {})})

    def stop(self, name: str) -> None:
        p = self.procs.pop(name, None)
        if p:
            self._kill(p)
            self._popen.pop(name, None)
            self._save()

    def webhook_client_config(self, port: int, path: str, ca_bundle: str | None = None) -> dict[str, str]:
        """clientConfig for a webhook served on this machine (https://127.0.0.1:PORT/PATH);
        caBundle defaults to the box CA (see issue_serving_cert)."""
        return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle or self.ca_bundle}

    def kubectl(self, *args: str, check: bool = True, input: str | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([str(paths.binary("kubectl")), f"--kubeconfig={self.kubeconfig}", *args],
                              input=input, capture_output=True, text=True, check=check, timeout=timeout)


def scheduler_conf_names() -> list[str]:
    """The named Volcano scheduler configurations: hack/volcano-scheduler-<name>.conf."""
    return sorted(f.name[len("volcano-scheduler-"):-len(".conf")]
                  for f in paths.HACK_DIR.glob("volcano-scheduler-*.conf"))


def version_tuple(v: str) -> tuple[int, ...]:
    m = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", v)
    return tuple(int(x) for x in m.groups()) if m else (0, 0, 0)
