"""Real nodes in the box: a kubelet with its own containerd per node, bridge networking, and
the cluster DNS (CoreDNS) that resolves Services and the training operator's per-replica ones.

Layout on one machine (root, cgroup v1 or v2, overlayfs):

    bridge BRIDGE (GATEWAY/16)  one L2 segment for every real node's pods; the host end is the
                                gateway, the address the apiserver advertises, CoreDNS listens on
                                and each kubelet serves on (its own port)
    real-<i>                    containerd (root, state and socket of its own: two kubelets on one
                                containerd delete each other's pods) + kubelet (its own root dir,
                                cgroup root and pod log dir), pods in 10.88.<i+1>.0/24
    coredns                     the `kubernetes` plugin over the box's apiserver, on GATEWAY:53
    one DNAT rule               the `kubernetes` Service's ClusterIP:443 to GATEWAY:<apiserver
                                port>, so in-cluster clients (our controller, the job kit) reach
                                the apiserver; there is no kube-proxy (see ARCHITECTURE.md, The box)

Webhook Services are reached by the apiserver itself through their endpoints
(`--enable-aggregator-routing`), so a webhook pod on a real node serves admission for real.

Only one box with real nodes runs at a time (the bridge and its subnet are fixed): a second one
fails at start with the name of the first.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from . import image, paths, pki
from .component import Component, Ports, Spec, always, http_ready
from .procs import BoxError, Proc, free_port, log_tail, proc_alive

if TYPE_CHECKING:
    from .component import BoxLike as Box  # the protocol box.Box satisfies: no import cycle

BRIDGE = "vebox0"
SUBNET = "10.88.0.0/16"
GATEWAY = "10.88.0.1"
CLUSTER_DOMAIN = "cluster.local"
KUBERNETES_SERVICE_IP = "10.96.0.1"
RUN_ROOT = Path("/run/vebox")  # sockets: short paths (unix socket paths are limited to 108 bytes)
CNI_BIN = Path("/usr/lib/cni")
NODE_LABEL = ("type", "real")
DNAT_COMMENT = "volcano-elastic box: kubernetes Service"
HOST_BINARIES = ("containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "ip")
CNI_PLUGINS = ("bridge", "host-local", "loopback", "portmap")
# kube-scheduler: an admin's install (our Deployments, the certgen Job) uses the default
# scheduler, which a kwok-only box does not need
REAL_NODE_BINARIES = ("kubelet", "kube-scheduler", "coredns")
# The kubelet's device manager listens here whatever --root-dir says (pluginapi.KubeletSocket, a
# constant): every kubelet on this host shares it. At start each one empties the directory, then
# binds; two kubelets starting together can interleave the two steps, and the second exits with
# "bind: address already in use" (CI saw it once, stop 43). So the box starts them one at a time.
DEVICE_PLUGIN_SOCKET = Path("/var/lib/kubelet/device-plugins/kubelet.sock")
DEVICE_PLUGIN_WAIT_S = 60.0



def coredns_spec(d: Path, kubeconfig: Path) -> Spec:
    """CoreDNS on the bridge's gateway, serving the cluster domain from the API; its Corefile names
    its health and ready ports."""
    corefile = d / "Corefile"

    def component(ports: Ports) -> Component:
        text = (f".:53 {{\n    bind {GATEWAY}\n    errors\n    health 127.0.0.1:{ports['coredns_health']}\n"
                f"    ready 127.0.0.1:{ports['coredns_ready']}\n    cache 5\n"
                f"    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{\n"
                f"        kubeconfig {kubeconfig}\n        pods insecure\n"
                f"        fallthrough in-addr.arpa ip6.arpa\n        ttl 5\n    }}\n}}\n")
        return Component("coredns", (str(paths.binary("coredns")), "-conf", str(corefile)),
                         http_ready(f"http://127.0.0.1:{ports['coredns_ready']}/ready"), files={corefile: text})

    return Spec("coredns", ("coredns_health", "coredns_ready"), component)


def kube_scheduler_spec(kubeconfig: Path) -> Spec:
    """The default kube-scheduler of the real-node box (pods that do not ask for Volcano)."""
    kc = str(kubeconfig)
    return Spec("kube-scheduler", ("kube_scheduler",), lambda ports: Component("kube-scheduler", (
        str(paths.binary("kube-scheduler")), f"--kubeconfig={kc}", f"--authentication-kubeconfig={kc}",
        f"--authorization-kubeconfig={kc}", "--leader-elect=false", "--bind-address=127.0.0.1",
        f"--secure-port={ports['kube_scheduler']}", "-v=1"), always))


def kubelet_spec(i: int, d: Path, name: str) -> Spec:
    """Node i's kubelet (NAME) on the files RealNodes._kubelet_files wrote in D (its kubelet.yaml
    names the ports picked with them, kept across a restart); ready once its healthz answers."""
    argv = (str(paths.binary("kubelet")), f"--config={d / 'kubelet.yaml'}", f"--kubeconfig={d / 'kubeconfig'}",
            f"--hostname-override={name}", f"--node-ip={GATEWAY}", f"--root-dir={d / 'kubelet'}",
            f"--cert-dir={d / 'kubelet-pki'}",
            f"--node-labels={NODE_LABEL[0]}={NODE_LABEL[1]},nvidia.com/gpu.present=true", "-v=1")
    return Spec(f"kubelet-{i}", (), lambda ports: Component(f"kubelet-{i}", argv, http_ready(
        f"http://127.0.0.1:{ports[f'kubelet_{i}_healthz']}/healthz", expect="ok")))


def device_socket_bound_since(t: float) -> bool:
    """Whether a kubelet has bound DEVICE_PLUGIN_SOCKET since wall-clock time T (the socket file is
    made by the bind, after the kubelet removed the one before it)."""
    try:
        st = DEVICE_PLUGIN_SOCKET.stat()
    except OSError:
        return False
    return stat.S_ISSOCK(st.st_mode) and st.st_ctime >= t


class RealNodesUnavailable(BoxError):
    """This host cannot run real nodes (said loudly; the real tier skips with this text)."""


def missing_node_packages() -> list[str]:
    """What hack/install-node-packages.sh installs and this host lacks (empty when installed)."""
    missing = [b for b in HOST_BINARIES if shutil.which(b) is None and not Path(f"/usr/sbin/{b}").exists()]
    return missing + [f"CNI plugin {p}" for p in CNI_PLUGINS if not (CNI_BIN / p).exists()]


def host_problems() -> list[str]:
    """Why this host cannot run real nodes (empty when it can)."""
    problems = []
    if os.geteuid() != 0:
        problems.append("not root (a kubelet and containerd need root)")
    missing = missing_node_packages()
    if missing:
        problems.append(f"missing {', '.join(missing)} (install them with: sudo bash hack/install-node-packages.sh)")
    try:
        if "overlay" not in Path("/proc/filesystems").read_text():
            problems.append("no overlay filesystem in /proc/filesystems (containerd's snapshotter needs it)")
    except OSError as e:
        problems.append(f"cannot read /proc/filesystems: {e}")
    cg = Path("/sys/fs/cgroup")
    probe = cg / ("memory" if (cg / "memory").is_dir() else "") / "vebox-probe"
    try:
        probe.mkdir(exist_ok=True)
        probe.rmdir()
    except OSError as e:
        problems.append(f"cgroups are not writable ({probe.parent}: {e})")
    missing_bins = paths.missing_binaries(list(REAL_NODE_BINARIES))
    if missing_bins:
        problems.append(paths.describe_missing(missing_bins))
    return problems


def _run(*argv: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(argv), capture_output=True, text=True, check=check, timeout=timeout)


def _cgroup_controllers() -> list[Path]:
    cg = Path("/sys/fs/cgroup")
    if (cg / "cgroup.controllers").exists():  # cgroup v2: one hierarchy
        return [cg]
    return [p for p in sorted(cg.iterdir()) if p.is_dir() and not p.is_symlink() and p.name != "unified"]


class RealNodes:
    """The real nodes of one box; the Box calls network_up() before its apiserver starts and
    start() once the control plane is up, and teardown() from down()."""

    def __init__(self, box: Box, count: int, gpus: int) -> None:
        self.box = box
        self.count = count
        self.gpus = gpus
        self._containerd_t0: dict[int, float] = {}
        self._coredns_t0 = 0.0

    # ------------------------------------------------------------------ names and places
    def name(self, i: int) -> str:
        return f"real-{i}"

    def node_dir(self, i: int) -> Path:
        return self.box.dir / "nodes" / self.name(i)

    def run_dir(self, i: int) -> Path:
        return RUN_ROOT / self.box.opts.name / str(i)

    def socket(self, i: int) -> Path:
        return self.run_dir(i) / "containerd.sock"

    def cgroup_root(self, i: int) -> str:
        return f"/vebox-{self.box.opts.name}-{i}"

    # ------------------------------------------------------------------ network
    def network_up(self) -> None:
        problems = host_problems()
        if problems:
            raise RealNodesUnavailable("; ".join(problems))
        owner = RUN_ROOT / ".owner"
        RUN_ROOT.mkdir(parents=True, exist_ok=True)
        if owner.exists():
            other = owner.read_text().strip()
            if other != self.box.opts.name and (paths.boxes_dir() / other / "state.json").exists():
                raise RealNodesUnavailable(f"box {other!r} already has real nodes on bridge {BRIDGE} "
                                           f"(one at a time): stop it with hack/local-down.sh --name {other}")
        owner.write_text(self.box.opts.name)
        if _run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
            _run("ip", "link", "add", BRIDGE, "type", "bridge")
        _run("ip", "addr", "replace", f"{GATEWAY}/16", "dev", BRIDGE)
        _run("ip", "link", "set", BRIDGE, "up")
        Path("/proc/sys/net/ipv4/ip_forward").write_text("1")

    def kubernetes_service_dnat(self, apiserver_port: int) -> None:
        """The one Service the box routes: in-cluster clients' KUBERNETES_SERVICE_HOST."""
        self._dnat("-D", apiserver_port, check=False)
        self._dnat("-A", apiserver_port)
        self.box.state["real_nodes_dnat_port"] = apiserver_port

    def _dnat(self, op: str, port: int, check: bool = True) -> None:
        _run("iptables", "-t", "nat", op, "PREROUTING", "-s", SUBNET, "-d", f"{KUBERNETES_SERVICE_IP}/32",
             "-p", "tcp", "--dport", "443", "-m", "comment", "--comment", DNAT_COMMENT,
             "-j", "DNAT", "--to-destination", f"{GATEWAY}:{port}", check=check)

    # ------------------------------------------------------------------ start
    def start(self) -> None:
        t0 = time.monotonic()
        imgs = [image.pause_image(self.box.say)]
        extra = self.box.opts.real_node_images
        imgs += [Path(p) for p in extra]
        self._start_coredns()
        self._start_kube_scheduler()
        for i in range(self.count):
            self._start_containerd(i)
        for i in range(self.count):
            self._wait_containerd(i)
        t = time.monotonic()
        with ThreadPoolExecutor(max_workers=self.count) as pool:  # each node unpacks its own copy
            list(pool.map(lambda i: [self.import_image(i, img) for img in imgs], range(self.count)))
        self.box.say(f"{len(imgs)} image(s) imported into {self.count} node(s) in {time.monotonic() - t:.1f}s")
        for i in range(self.count):
            self._start_kubelet(i)
        self.box.wait_started("coredns", self._coredns_t0)
        self.box.kube.wait_for(f"{self.count} real nodes Ready", self._ready, self.box.opts.timeout)
        for i in range(self.count):
            self._advertise_gpus(i)
        self.box.kube.wait_for("real nodes' GPUs allocatable", self._gpus_allocatable, 30)
        self.box.say(f"{self.count} real node(s) Ready with {self.gpus} nvidia.com/gpu each "
                     f"in {time.monotonic() - t0:.1f}s")

    def _start_coredns(self) -> None:
        self._coredns_t0 = self.box.run(coredns_spec(self.box.dir / "coredns", self.box.kubeconfig), wait=False)

    def _start_kube_scheduler(self) -> None:
        self.box.run(kube_scheduler_spec(self.box.kubeconfig), wait=False)

    def _containerd_config(self, i: int) -> Path:
        d = self.node_dir(i)
        (d / "cni").mkdir(parents=True, exist_ok=True)
        self.run_dir(i).mkdir(parents=True, exist_ok=True)
        third = i + 1
        cni = {
            "cniVersion": "0.4.0", "name": "vebox",
            "plugins": [
                {"type": "bridge", "bridge": BRIDGE, "isGateway": True, "ipMasq": False, "hairpinMode": True,
                 "ipam": {"type": "host-local", "dataDir": str(d / "ipam"),
                          "ranges": [[{"subnet": SUBNET, "rangeStart": f"10.88.{third}.2",
                                       "rangeEnd": f"10.88.{third}.254", "gateway": GATEWAY}]],
                          "routes": [{"dst": "0.0.0.0/0"}]}},
                {"type": "portmap", "capabilities": {"portMappings": True}},
            ],
        }
        (d / "cni" / "10-vebox.conflist").write_text(json.dumps(cni, indent=2))
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        conf = d / "containerd.toml"
        conf.write_text(f"""version = 2
root = "{d / 'containerd'}"
state = "{self.run_dir(i) / 'state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
                    "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]
[grpc]
  address = "{self.socket(i)}"
[ttrpc]
  address = "{self.socket(i)}.ttrpc"
[metrics]
  address = ""
[{cri}]
  sandbox_image = "{image.PAUSE_REF}"
  # no CAP_SYS_RESOURCE in this sandbox, even for root: without it every container fails with
  # "can't get final child's PID from pipe: EOF"
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
  [{cri}.cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{d / 'cni'}"
""")
        return conf

    def _start_containerd(self, i: int) -> None:
        conf, socket = self._containerd_config(i), self.socket(i)
        self._containerd_t0[i] = self.box.run(Spec(f"containerd-{i}", (), lambda ports: Component(
            f"containerd-{i}", ("containerd", "--config", str(conf)), lambda: _run(
                "ctr", "--address", str(socket), "version", check=False, timeout=5).returncode == 0)), wait=False)

    def _wait_containerd(self, i: int) -> None:
        self.box.wait_started(f"containerd-{i}", self._containerd_t0[i])

    def import_image(self, i: int, archive: Path) -> None:
        r = _run("ctr", "--address", str(self.socket(i)), "-n", "k8s.io", "images", "import",
                 str(archive), check=False, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"ctr images import {archive} on {self.name(i)} failed: {r.stderr.strip()}")

    def _kubelet_files(self, i: int) -> Path:
        box = self.box
        d = self.node_dir(i)
        pk = box.pki_dir
        name = self.name(i)
        ca = pki.KeyPair((pk / "ca.crt").read_bytes(), (pk / "ca.key").read_bytes())
        pki.issue(ca, f"system:node:{name}", orgs=["system:nodes"], server=False,
                  client=True).write(d / "client.crt", d / "client.key")
        pki.issue(ca, name, dns_names=[name], ips=[GATEWAY, "127.0.0.1"]).write(d / "serving.crt", d / "serving.key")
        kubeconfig = {
            "apiVersion": "v1", "kind": "Config", "current-context": "box",
            "clusters": [{"name": "box", "cluster": {"server": box.server,
                                                     "certificate-authority": str(pk / "ca.crt")}}],
            "users": [{"name": name, "user": {"client-certificate": str(d / "client.crt"),
                                              "client-key": str(d / "client.key")}}],
            "contexts": [{"name": "box", "context": {"cluster": "box", "user": name}}],
        }
        (d / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
        for key in (f"kubelet_{i}", f"kubelet_{i}_healthz"):
            p = free_port()
            while p in box.ports.values():
                p = free_port()
            box.ports[key] = p
        cfg: dict[str, Any] = {
            "apiVersion": "kubelet.config.k8s.io/v1beta1", "kind": "KubeletConfiguration",
            # this machine: cgroup v1 and PID 1 is not systemd
            "failCgroupV1": False, "cgroupDriver": "cgroupfs", "cgroupRoot": self.cgroup_root(i),
            "cgroupsPerQOS": True, "enforceNodeAllocatable": ["pods"], "failSwapOn": False,
            "address": GATEWAY, "port": box.ports[f"kubelet_{i}"], "readOnlyPort": 0,
            "healthzBindAddress": "127.0.0.1", "healthzPort": box.ports[f"kubelet_{i}_healthz"],
            "tlsCertFile": str(d / "serving.crt"), "tlsPrivateKeyFile": str(d / "serving.key"),
            "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                               "x509": {"clientCAFile": str(pk / "ca.crt")}},
            "authorization": {"mode": "Webhook"},
            "clusterDomain": CLUSTER_DOMAIN, "clusterDNS": [GATEWAY],
            "resolvConf": str(self._host_resolv_conf()),
            "containerRuntimeEndpoint": f"unix://{self.socket(i)}",
            "podLogsDir": str(d / "pod-logs"),
            "staticPodPath": "", "maxPods": 30, "serializeImagePulls": False,
            # never collect the images we imported (there is no registry to pull them again)
            "imageGCHighThresholdPercent": 100, "imageGCLowThresholdPercent": 99,
            "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%",
                             "nodefs.inodesFree": "1%"},
            "nodeStatusUpdateFrequency": "2s", "nodeStatusReportFrequency": "10s",
            "syncFrequency": "5s", "fileCheckFrequency": "5s",
            "shutdownGracePeriod": "0s", "protectKernelDefaults": False, "makeIPTablesUtilChains": False,
            "localStorageCapacityIsolation": True,
        }
        (d / "kubelet.yaml").write_text(yaml.safe_dump(cfg))
        for ctrl in _cgroup_controllers():
            g = ctrl / self.cgroup_root(i).lstrip("/")
            g.mkdir(exist_ok=True)
            if ctrl.name == "cpuset":  # a v1 cpuset cgroup starts empty
                for f in ("cpuset.cpus", "cpuset.mems"):
                    if (g / f).read_text().strip() == "":
                        (g / f).write_text((ctrl / f).read_text())
        return d

    def _host_resolv_conf(self) -> Path:
        """Pods with dnsPolicy Default get this: the box has no upstream, so no nameserver
        outside the box's own."""
        p = self.box.dir / "resolv.conf"
        if not p.exists():
            p.write_text(f"nameserver {GATEWAY}\n")
        return p

    def _start_kubelet(self, i: int) -> None:
        """Start node i's kubelet (ready: its Node, see _ready) and wait until it holds the host's
        shared device-plugin socket, so that the next kubelet's start cannot race it."""
        t = time.time()
        self.box.run(kubelet_spec(i, self._kubelet_files(i), self.name(i)), wait=False)
        deadline = time.monotonic() + DEVICE_PLUGIN_WAIT_S
        while time.monotonic() < deadline:
            p = self.box.procs.get(f"kubelet-{i}")
            if p is None or not proc_alive(p) or device_socket_bound_since(t):
                return  # a dead kubelet is reported by _ready, with its log
            time.sleep(0.1)
        self.box.say(f"kubelet-{i}: no device-plugin socket at {DEVICE_PLUGIN_SOCKET} after "
                     f"{DEVICE_PLUGIN_WAIT_S:.0f}s; starting the next node anyway")

    def _nodes(self) -> list[dict[str, Any]]:
        sel = f"{NODE_LABEL[0]}={NODE_LABEL[1]}"
        items: list[dict[str, Any]] = self.box.kube.get("/api/v1/nodes", query={"labelSelector": sel})["items"]
        return items

    def _ready(self) -> bool:
        for i in range(self.count):
            p = self.box.procs.get(f"kubelet-{i}")
            if p is not None and not proc_alive(p):
                raise BoxError(f"kubelet-{i} exited (log {p.log}):\n{log_tail(p.log)}")
        nodes = self._nodes()
        if len(nodes) < self.count:
            return False
        return all({c["type"]: c["status"] for c in n.get("status", {}).get("conditions", [])}.get("Ready") == "True"
                   for n in nodes)

    def _advertise_gpus(self, i: int) -> None:
        """Fake GPUs the documented way for extended resources without a device plugin: the
        node's status.capacity, which the kubelet keeps (and recomputes allocatable from)."""
        self.box.kube.request(
            "PATCH", f"/api/v1/nodes/{self.name(i)}/status",
            [{"op": "add", "path": "/status/capacity/nvidia.com~1gpu", "value": str(self.gpus)}],
            content_type="application/json-patch+json")

    def _gpus_allocatable(self) -> bool:
        return all(n.get("status", {}).get("allocatable", {}).get("nvidia.com/gpu") == str(self.gpus)
                   for n in self._nodes())

    # ------------------------------------------------------------------ faults (tests)
    def stop_kubelet(self, i: int) -> None:
        """Stop node i's kubelet through the runtime (its pods keep running, as when a node loses its kubelet)."""
        self.box.stop(f"kubelet-{i}", grace=5.0)

    def start_kubelet(self, i: int) -> None:
        """Start node i's kubelet again through the runtime, on its files and ports, and wait for its
        healthz (works on a loaded box); a running one is left alone."""
        p = self.box.procs.get(f"kubelet-{i}")
        if p is None or not proc_alive(p):
            self.box.run(kubelet_spec(i, self.node_dir(i), self.name(i)))

    # ------------------------------------------------------------------ stop
    def teardown(self, procs: dict[str, Proc], kill: Callable[[Proc, float], None]) -> None:
        """Stop every real node's pods, kubelet and containerd; unmount what they mounted;
        remove the bridge and the DNAT rule. Safe to call on a half-started box."""
        n = int(self.box.state.get("real_nodes", self.count) or 0)
        for i in range(n):
            p = procs.get(f"kubelet-{i}")
            if p is not None:
                kill(p, 5.0)
        for i in range(n):
            self._kill_containers(i)
            p = procs.get(f"containerd-{i}")
            if p is not None:
                kill(p, 5.0)
        for i in range(n):
            self._kill_cgroup(i)
            self._unmount_under(self.node_dir(i))
            self._unmount_under(self.run_dir(i))
            shutil.rmtree(self.run_dir(i), ignore_errors=True)
            for ctrl in _cgroup_controllers():
                _rmdir_tree(ctrl / self.cgroup_root(i).lstrip("/"))
        port = self.box.state.get("real_nodes_dnat_port")
        if port:
            self._dnat("-D", int(port), check=False)
        owner = RUN_ROOT / ".owner"
        if owner.exists() and owner.read_text().strip() == self.box.opts.name:
            _run("ip", "link", "del", BRIDGE, check=False)
            owner.unlink(missing_ok=True)
        self._remove_netns()

    def _kill_containers(self, i: int) -> None:
        sock = self.socket(i)
        if not sock.exists():
            return
        base = ["ctr", "--address", str(sock), "-n", "k8s.io"]
        r = _run(*base, "tasks", "ls", "-q", check=False, timeout=10)
        for task in r.stdout.split():
            _run(*base, "tasks", "kill", "-s", "SIGKILL", task, check=False, timeout=10)
        # the shims outlive containerd: find them by the socket they were started for
        for pid in _pids_matching(str(sock)):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def _kill_cgroup(self, i: int) -> None:
        for ctrl in _cgroup_controllers():
            root = ctrl / self.cgroup_root(i).lstrip("/")
            if not root.is_dir():
                continue
            for procs in root.rglob("cgroup.procs"):
                try:
                    pids = [int(x) for x in procs.read_text().split()]
                except OSError:
                    continue
                for pid in pids:
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass

    @staticmethod
    def _unmount_under(root: Path) -> None:
        """Lazily unmount every mount at or below ROOT, deepest first: rm -rf afterwards must
        never walk into a host directory that a pod had mounted."""
        prefix = str(root.resolve()) if root.exists() else str(root)
        try:
            lines = Path("/proc/self/mountinfo").read_text().splitlines()
        except OSError:
            return
        points = [ln.split()[4].encode().decode("unicode_escape") for ln in lines]
        for m in sorted({p for p in points if p == prefix or p.startswith(prefix + "/")}, key=len, reverse=True):
            subprocess.run(["umount", "-l", m], capture_output=True, check=False)

    @staticmethod
    def _remove_netns() -> None:
        """containerd 1.6 names pod network namespaces cni-<uuid> under /run/netns; delete the
        ones whose processes are gone (they are ours when no other runtime runs here)."""
        d = Path("/run/netns")
        if not d.is_dir():
            return
        for ns in d.glob("cni-*"):
            r = _run("ip", "netns", "pids", ns.name, check=False, timeout=5)
            if r.returncode == 0 and not r.stdout.strip():
                _run("ip", "netns", "delete", ns.name, check=False, timeout=5)


def _pids_matching(needle: str) -> list[int]:
    out = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if "containerd-shim" in cmd and needle in cmd:
            out.append(int(p.name))
    return out


def _rmdir_tree(root: Path) -> None:
    """Remove a cgroup directory tree (cgroups are removed with rmdir, children first)."""
    if not root.is_dir():
        return
    for d in sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        try:
            d.rmdir()
        except OSError:
            pass
    try:
        root.rmdir()
    except OSError:
        pass


