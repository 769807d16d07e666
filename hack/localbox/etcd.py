"""etcd: one member on 127.0.0.1, data in <box>/etcd, no fsync (a box is disposable)."""

from __future__ import annotations

from . import paths
from .component import BoxLike
from .kube import http_ok


def start(box: BoxLike) -> None:
    """Start etcd on two fresh ports (client, peer) and wait for /health."""
    data = box.dir / "etcd"
    box._start("etcd", lambda: [
        str(paths.binary("etcd")), "--name", "box", "--data-dir", str(data),
        "--listen-client-urls", f"http://127.0.0.1:{box.ports['etcd']}",
        "--advertise-client-urls", f"http://127.0.0.1:{box.ports['etcd']}",
        "--listen-peer-urls", f"http://127.0.0.1:{box.ports['etcd_peer']}",
        "--initial-advertise-peer-urls", f"http://127.0.0.1:{box.ports['etcd_peer']}",
        "--initial-cluster", f"box=http://127.0.0.1:{box.ports['etcd_peer']}",
        "--unsafe-no-fsync", "--quota-backend-bytes", str(2 * 1024**3), "--log-level", "warn",
    ], lambda: http_ok(f"http://127.0.0.1:{box.ports['etcd']}/health", expect='"health":"true"'),
        port_keys=("etcd", "etcd_peer"))
