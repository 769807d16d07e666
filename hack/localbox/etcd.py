"""etcd: one member on 127.0.0.1, data in <box>/etcd, no fsync (a box is disposable)."""

from __future__ import annotations

from pathlib import Path

from . import paths
from .component import Component, Ports, Spec, http_ready

NAME = "etcd"


def component(data: Path, ports: Ports) -> Component:
    client, peer = f"http://127.0.0.1:{ports['etcd']}", f"http://127.0.0.1:{ports['etcd_peer']}"
    return Component(NAME, (
        str(paths.binary("etcd")), "--name", "box", "--data-dir", str(data),
        "--listen-client-urls", client, "--advertise-client-urls", client,
        "--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer, "--initial-cluster", f"box={peer}",
        "--unsafe-no-fsync", "--quota-backend-bytes", str(2 * 1024**3), "--log-level", "warn",
    ), http_ready(f"{client}/health", expect='"health":"true"'))


def spec(data: Path) -> Spec:
    """etcd on two fresh ports (client, peer), ready when /health says so."""
    return Spec(NAME, ("etcd", "etcd_peer"), lambda ports: component(data, ports))
