"""A component of the box as a value, and what a component module may use of the box.

`Component` is one process: its command line, environment, the files it reads (written before each
launch: they may name its ports), and its readiness check. A component module's builder returns a
`Spec`: the keys of the ports the component needs and a pure function from the ports the runtime
picked to the `Component`. The runtime, `box.Box.run` and `Box.stop`, is the only code that starts,
checks, restarts (after a lost port race, on other ports; a stopped kubelet) and stops them (the
kwok `components` pattern).

`BoxLike` is the protocol of the box that component modules with more than a process use (the
apiserver's CRDs, the training operator's certificates, real nodes), typed so that box.py (which
imports them all) is the only module that knows the Box class and the import graph has no cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .kube import Kube, http_ok
from .options import BoxOptions
from .procs import Proc

Ports = Mapping[str, int]  # port key -> port, every port the box has picked so far


@dataclass(frozen=True)
class Component:
    """One process of the box."""

    name: str
    argv: tuple[str, ...]
    ready: Callable[[], bool]  # healthy (polled by the runtime until the box's timeout)
    env: Mapping[str, str] | None = None  # added to the box's environment
    files: Mapping[Path, str] = field(default_factory=dict)  # written before the launch
    prepare: Callable[[], None] | None = None  # work with the API before the launch (certificates, webhooks)


@dataclass(frozen=True)
class Spec:
    """A component to start on fresh ports: ``ports`` are picked, then ``build`` makes the process."""

    name: str
    ports: tuple[str, ...]
    build: Callable[[Ports], Component]


def http_ready(url: str, expect: str | None = None) -> Callable[[], bool]:
    """A readiness check: GET ``url`` answers 200 (with ``expect`` in its body)."""
    return lambda: http_ok(url, expect=expect)


def always() -> bool:
    """The readiness of a component checked otherwise (its nodes, its queue)."""
    return True


class BoxLike(Protocol):
    opts: BoxOptions
    dir: Path
    ports: dict[str, int]  # port key -> port, filled by the runtime as components start
    procs: dict[str, Proc]
    state: dict[str, Any]
    created_fixed_cert_dir: bool

    @property
    def pki_dir(self) -> Path: ...

    @property
    def kubeconfig(self) -> Path: ...

    @property
    def server(self) -> str: ...

    @property
    def kube(self) -> Kube: ...

    def say(self, msg: str) -> None: ...

    def _save(self) -> None: ...

    def run(self, spec: Spec, wait: bool = True) -> float: ...

    def wait_started(self, name: str, t0: float) -> None: ...

    def stop(self, name: str, grace: float = 10.0) -> None: ...
