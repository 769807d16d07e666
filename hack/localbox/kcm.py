"""kube-controller-manager: the few controllers a kwok box needs, and the node lifecycle, pod GC,
endpoints and workload controllers a box with real nodes needs on top."""

from __future__ import annotations

import time

from . import paths
from .component import BoxLike
from .kube import http_ok

KCM_CONTROLLERS = ("garbage-collector-controller,namespace-controller,serviceaccount-controller,"
                   "disruption-controller,resourcequota-controller,clusterrole-aggregation-controller")
# with real nodes: a stopped kubelet's node goes Unknown, is tainted, and its pods are evicted
REAL_NODE_KCM_CONTROLLERS = (",node-lifecycle-controller,taint-eviction-controller,pod-garbage-collector-controller,"
                             "root-ca-certificate-publisher-controller,endpoints-controller,endpointslice-controller,deployment-controller,replicaset-controller,"
                             "job-controller,cronjob-controller,ttl-after-finished-controller")


def controllers(real_nodes: bool) -> str:
    """The --controllers list: KCM_CONTROLLERS, plus REAL_NODE_KCM_CONTROLLERS with real nodes."""
    return f"{KCM_CONTROLLERS}{REAL_NODE_KCM_CONTROLLERS if real_nodes else ''}"


def start(box: BoxLike, real_nodes: bool) -> float:
    """Start kube-controller-manager in the background (the CRDs go in meanwhile); returns the
    start time for wait()."""
    t0 = time.monotonic()
    pk = box.pki_dir
    box._start("kube-controller-manager", lambda: [
        str(paths.binary("kube-controller-manager")),
        f"--kubeconfig={box.kubeconfig}",
        f"--authentication-kubeconfig={box.kubeconfig}",
        f"--authorization-kubeconfig={box.kubeconfig}",
        "--bind-address=127.0.0.1", f"--secure-port={box.ports['kcm']}",
        f"--cert-dir={box.dir / 'kcm-certs'}",
        f"--controllers={controllers(real_nodes)}",
        *(["--node-monitor-period=2s", "--node-monitor-grace-period=20s"] if real_nodes else []),
        f"--service-account-private-key-file={pk / 'sa.key'}",
        f"--root-ca-file={pk / 'ca.crt'}",
        "--leader-elect=false", "--use-service-account-credentials=false", "-v=1",
    ], lambda: True, port_keys=("kcm",), wait=False)
    return t0


def wait(box: BoxLike, t0: float) -> None:
    """Wait for kube-controller-manager's /healthz (started by start() at t0)."""
    box.wait_started("kube-controller-manager",
                     lambda: http_ok(f"https://127.0.0.1:{box.ports['kcm']}/healthz", expect="ok"), t0)
