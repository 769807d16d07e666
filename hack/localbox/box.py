"""The control plane in a box: real etcd, kube-apiserver, kube-controller-manager, Volcano,
kwok GPU nodes and the Kubeflow training operator, all on 127.0.0.1.

    box = Box(BoxOptions(name="dev"))
    box.up()          # prints progress, returns when every component is healthy
    box.kubeconfig    # admin kubeconfig (client certificate in system:masters)
    box.down()        # kills every process group it started and removes the box directory

State lives in <cache>/boxes/<name>/state.json so that another process (hack/local-down.sh)
can stop a box started by hack/local-up.sh.

This module is the orchestrator: profiles, state.json, the lock, up/down/status, and the process
bookkeeping (start on fresh ports, wait, restart after a lost port race, stop) that the component
modules use through component.BoxLike. What each component runs, with which flags and files, is a
value its module builds (component.Spec -> component.Component): etcd.py, apiserver.py (and the PKI,
kubeconfig, CRDs), kcm.py, volcano.py, kwok.py, training_operator.py; real nodes and their DNS in
realnode.py. `run` is the one runtime that starts them. Process mechanics are in procs.py.
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from . import apiserver, etcd, kcm, kwok, paths, procs, realnode, training_operator, volcano
from .component import Component, Spec
from .kube import Kube
from .options import BoxOptions
from .procs import BoxError, Proc, free_port, proc_alive
from .realnode import RealNodes
from .volcano import scheduler_conf_names, version_tuple

# names other modules import from here (tests/, bench/, hack/demo.py, __main__.py)
__all__ = ["PROFILES", "Box", "BoxError", "BoxOptions", "Proc", "free_port", "list_boxes", "proc_alive",
           "scheduler_conf_names", "version_tuple"]

PROFILES = {
    # etcd + kube-apiserver + kube-controller-manager + every CRD (no scheduler, no nodes)
    "core": ["etcd", "kube-apiserver", "kube-controller-manager"],
    # the whole box
    "full": ["etcd", "kube-apiserver", "kube-controller-manager", "vc-scheduler",
             "vc-controller-manager", "kwok", "training-operator"],
}


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
        self._popen: dict[str, subprocess.Popen[bytes]] = {}
        self._kube: Kube | None = None
        self._specs: dict[str, Spec] = {}
        self._running: dict[str, Component] = {}  # the last launch of each spec
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
        p, proc = procs.spawn(name, argv, self.logs_dir / f"{name}.log", self.dir, env)
        self.procs[name] = proc
        self._popen[name] = p
        self._save()
        return proc

    def run(self, spec: Spec, wait: bool = True) -> float:
        """The runtime: start ``spec``'s component on fresh free ports and wait until it is ready;
        with wait=False, wait_started() later. Returns the start time."""
        self._specs[spec.name] = spec
        t0 = time.monotonic()
        self._launch(spec.name)
        if wait:
            self.wait_started(spec.name, t0)
        return t0

    def _launch(self, name: str) -> Proc:
        spec = self._specs[name]
        for k in spec.ports:
            p = free_port()
            while p in self.ports.values():
                p = free_port()
            self.ports[k] = p
        comp = spec.build(dict(self.ports))
        for path, text in comp.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
        if comp.prepare is not None:
            comp.prepare()
        self._running[name] = comp
        log = self.logs_dir / f"{name}.log"
        self._log_offsets[name] = log.stat().st_size if log.exists() else 0
        return self._spawn(name, list(comp.argv), dict(comp.env) if comp.env else None)

    def wait_started(self, name: str, t0: float) -> None:
        """Wait for a component's readiness; if it lost a port race (another process took a
        port between our probe and its bind), restart it on other ports (twice at most)."""
        for attempt in range(3):
            try:
                procs.wait_healthy(name, self.procs.get(name), self._running[name].ready, self.opts.timeout)
                break
            except BoxError:
                conflict = procs.log_has(self.logs_dir / f"{name}.log", self._log_offsets.get(name, 0),
                                         b"address already in use")
                if attempt == 2 or name not in self._specs or not conflict:
                    raise
                self.say(f"{name}: a port was taken meanwhile; restarting it on other ports")
                self._kill(self.procs[name])
                self._launch(name)
        self.say(f"{name} healthy in {time.monotonic() - t0:.1f}s (pid {self.procs[name].pid})")

    def _kill(self, proc: Proc, grace: float = 10.0) -> None:
        procs.kill_group(proc, lambda: self._reap(proc.name), grace)

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
        crds = apiserver.crd_files(self.opts.profile)
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
                kept = paths.keep_failed_logs(self.opts.name, self.logs_dir)
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

    @property
    def real(self) -> RealNodes | None:
        n = self.opts.real_nodes or int(self.state.get("real_nodes", 0) or 0)
        return RealNodes(self, n, self.opts.real_node_gpus) if n else None

    def _up(self, crds: list[Path]) -> None:
        """Start every component of the profile, in order (each module says what it starts)."""
        apiserver.make_pki(self.pki_dir)
        real = self.real
        if real is not None:
            self.state["real_nodes"] = real.count
            self._save()
            real.network_up()
        self.run(etcd.spec(self.dir / "etcd"))
        self.run(apiserver.spec(self.pki_dir, real is not None))
        apiserver.write_kubeconfig(self.kubeconfig, self.server, self.pki_dir)
        self._save()
        t_kcm = self.run(kcm.spec(self.dir, self.kubeconfig, self.pki_dir, real is not None),
                         wait=False)  # in the background while the CRDs go in
        apiserver.install_crds(self, crds)
        self.wait_started(kcm.NAME, t_kcm)
        if self.opts.profile == "full":
            self._up_full()
        if real is not None:
            real.kubernetes_service_dnat(self.ports["apiserver"])
            self._save()
            real.start()

    def _up_full(self) -> None:
        """Volcano, kwok and the training operator start together; then the nodes, then the waits."""
        conf = volcano.scheduler_conf(self)
        specs = [*volcano.specs(self.dir, self.kubeconfig, conf), kwok.spec(self.dir, self.kubeconfig),
                 training_operator.spec(self.dir, self.kubeconfig, self.opts.operator_threads,
                                        lambda: training_operator.prereqs(self))]
        started = {s.name: self.run(s, wait=False) for s in specs}
        kwok.create_nodes(self.kube, self.opts)
        for name, t0 in started.items():
            self.wait_started(name, t0)
        kwok.wait_nodes_ready(self)
        volcano.wait_default_queue(self)
        training_operator.wait_webhook_served(self)

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
                shutil.rmtree(training_operator.OPERATOR_FIXED_CERT_DIR.parent, ignore_errors=True)
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

    def stop(self, name: str, grace: float = 10.0) -> None:
        """Stop a process of the box (a component, or one `spawn` started); `run` starts a component again."""
        p = self.procs.pop(name, None)
        if p:
            self._kill(p, grace)
            self._popen.pop(name, None)
            self._save()

    def issue_serving_cert(self, out_dir: str | Path, name: str = "webhook",
                           dns_names: list[str] | None = None) -> tuple[Path, Path]:
        """A serving certificate signed by the box CA with an IP SAN for 127.0.0.1 (for
        webhooks registered by `url: https://127.0.0.1:PORT/...`). caBundle = self.ca_bundle."""
        return apiserver.issue_serving_cert(self.pki_dir, out_dir, name, dns_names)

    def webhook_client_config(self, port: int, path: str, ca_bundle: str | None = None) -> dict[str, str]:
        """clientConfig for a webhook served on this machine (https://127.0.0.1:PORT/PATH);
        caBundle defaults to the box CA (see issue_serving_cert)."""
        return {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca_bundle or self.ca_bundle}

    def kubectl(self, *args: str, check: bool = True, input: str | None = None,
                timeout: float = 60) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(paths.binary("kubectl")), f"--kubeconfig={self.kubeconfig}", *args],
                              input=input, capture_output=True, text=True, check=check, timeout=timeout)

