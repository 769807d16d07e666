"""What a component module (etcd.py, apiserver.py, kcm.py, volcano.py, kwok.py,
training_operator.py, realnode.py) may use of the box: `BoxLike`, a protocol that `box.Box` satisfies.

The component modules type their `box` parameter with it instead of importing box.py, so that
box.py (which imports them all) is the only module that knows the Box class and the import
graph has no cycle, not even a type-only one.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from .kube import Kube
from .options import BoxOptions
from .procs import Proc

# components started in the background: name -> (start time, health check), for Box.wait_started
Started = dict[str, tuple[float, Callable[[], bool]]]


class BoxLike(Protocol):
    opts: BoxOptions
    dir: Path
    ports: dict[str, int]  # port key -> port, filled by _start as components start
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

    def _start(self, name: str, make_argv: Callable[[], list[str]], check: Callable[[], bool],
               port_keys: tuple[str, ...] = (), env: dict[str, str] | None = None,
               wait: bool = True) -> None: ...

    def wait_started(self, name: str, check: Callable[[], bool], t0: float) -> None: ...

    # realnode.py stops and restarts kubelets
    def _spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> Proc: ...

    def _kill(self, proc: Proc, grace: float = 10.0) -> None: ...
