"""kwok: the fake GPU nodes (Node objects this module creates, kept Ready and their pods Running
by kwok with the stages built by build-binaries.sh)."""

from __future__ import annotations

import time
from pathlib import Path

from . import paths
from .component import BoxLike, Component, Ports, Spec, http_ready
from .kube import Kube
from .options import BoxOptions
from .procs import BoxError

KWOK_ANNOTATION = ("kwok.x-k8s.io/node", "fake")


def config(box_dir: Path) -> Path:
    """kwok's configuration: every stage file of the built kwok, in one multi-document file."""
    stages = sorted(paths.kwok_stages_dir().glob("*.yaml"))
    if not stages:
        raise BoxError(f"kwok stages missing in {paths.kwok_stages_dir()}; run: bash hack/build-binaries.sh")
    dst = box_dir / "kwok.yaml"
    dst.write_text("\n---\n".join(f.read_text() for f in stages))
    return dst


def component(box_dir: Path, kubeconfig: Path, conf: Path, ports: Ports) -> Component:
    # HOME is the box dir so no ~/.kwok config leaks in; stages from its module
    return Component("kwok", (
        str(paths.binary("kwok")), f"--config={conf}", f"--kubeconfig={kubeconfig}",
        f"--manage-nodes-with-annotation-selector={KWOK_ANNOTATION[0]}={KWOK_ANNOTATION[1]}",
        "--manage-all-nodes=false", f"--node-port={ports['kwok']}",
        f"--server-address=127.0.0.1:{ports['kwok']}", "--node-ip=127.0.0.1",
        "--cidr=10.244.0.1/16", "--node-lease-duration-seconds=0",
    ), http_ready(f"http://127.0.0.1:{ports['kwok']}/healthz"), env={"HOME": str(box_dir)})


def spec(box_dir: Path, kubeconfig: Path) -> Spec:
    """kwok, managing only the nodes with KWOK_ANNOTATION (its configuration written now)."""
    conf = config(box_dir)
    return Spec("kwok", ("kwok",), lambda ports: component(box_dir, kubeconfig, conf, ports))


def create_nodes(kube: Kube, opts: BoxOptions) -> None:
    """kwok-node-0 .. kwok-node-<nodes-1>, each with the options' CPU, memory, pods and GPUs."""
    for i in range(opts.nodes):
        name = f"kwok-node-{i}"
        res = {"cpu": opts.node_cpu, "memory": opts.node_memory,
               "pods": str(opts.node_pods), "nvidia.com/gpu": str(opts.gpus_per_node)}
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
        kube.create("/api/v1/nodes", node)


def nodes_ready(kube: Kube, count: int) -> bool:
    nodes = kube.get("/api/v1/nodes", query={"labelSelector": "type=kwok"})["items"]
    if len(nodes) < count:
        return False
    for n in nodes:
        conds = {c["type"]: c["status"] for c in n.get("status", {}).get("conditions", [])}
        if conds.get("Ready") != "True":
            return False
    return True


def wait_nodes_ready(box: BoxLike) -> None:
    t = time.monotonic()
    n = box.opts.nodes
    box.kube.wait_for(f"{n} kwok nodes Ready", lambda: nodes_ready(box.kube, n), box.opts.timeout)
    box.say(f"{n} kwok nodes Ready in {time.monotonic() - t:.1f}s")
