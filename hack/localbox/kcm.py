"""kube-controller-manager: the few controllers a kwok box needs, and the node lifecycle, pod GC,
endpoints and workload controllers a box with real nodes needs on top."""

from __future__ import annotations

from pathlib import Path

from . import paths
from .component import Component, Ports, Spec, http_ready

KCM_CONTROLLERS = ("garbage-collector-controller,namespace-controller,serviceaccount-controller,"
                   "disruption-controller,resourcequota-controller,clusterrole-aggregation-controller")
# with real nodes: a stopped kubelet's node goes Unknown, is tainted, and its pods are evicted
REAL_NODE_KCM_CONTROLLERS = (",node-lifecycle-controller,taint-eviction-controller,pod-garbage-collector-controller,"
                             "root-ca-certificate-publisher-controller,endpoints-controller,endpointslice-controller,deployment-controller,replicaset-controller,"
                             "job-controller,cronjob-controller,ttl-after-finished-controller")


def controllers(real_nodes: bool) -> str:
    """The --controllers list: KCM_CONTROLLERS, plus REAL_NODE_KCM_CONTROLLERS with real nodes."""
    return f"{KCM_CONTROLLERS}{REAL_NODE_KCM_CONTROLLERS if real_nodes else ''}"


NAME = "kube-controller-manager"


def component(box_dir: Path, kubeconfig: Path, pk: Path, real_nodes: bool, ports: Ports) -> Component:
    return Component(NAME, (
        str(paths.binary("kube-controller-manager")),
        f"--kubeconfig={kubeconfig}",
        f"--authentication-kubeconfig={kubeconfig}",
        f"--authorization-kubeconfig={kubeconfig}",
        "--bind-address=127.0.0.1", f"--secure-port={ports['kcm']}",
        f"--cert-dir={box_dir / 'kcm-certs'}",
        f"--controllers={controllers(real_nodes)}",
        *(["--node-monitor-period=2s", "--node-monitor-grace-period=20s"] if real_nodes else []),
        f"--service-account-private-key-file={pk / 'sa.key'}",
        f"--root-ca-file={pk / 'ca.crt'}",
        "--leader-elect=false", "--use-service-account-credentials=false", "-v=1",
    ), http_ready(f"https://127.0.0.1:{ports['kcm']}/healthz", expect="ok"))


def spec(box_dir: Path, kubeconfig: Path, pki_dir: Path, real_nodes: bool) -> Spec:
    """kube-controller-manager (the box starts it in the background while the CRDs go in)."""
    return Spec(NAME, ("kcm",), lambda ports: component(box_dir, kubeconfig, pki_dir, real_nodes, ports))
