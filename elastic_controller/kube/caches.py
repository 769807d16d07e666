"""The set of watch caches the controller and the agent read from."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from .informer import Handler, Informer, RestartHook, WatchSource, object_key
from .resources import SNAPSHOT_RESOURCES, Resource


class Store(Protocol):
    """Read access to cached objects (the real caches, or a fake in tests)."""

    def items(self, res: Resource) -> list[dict[str, Any]]: ...

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None: ...

    def put(self, res: Resource, obj: dict[str, Any]) -> None: ...

    def has(self, res: Resource) -> bool: ...

    def stale(self) -> list[str]: ...


class Caches:
    """One informer per resource; ``items`` is a consistent copy of each cache's list."""

    def __init__(self, source: WatchSource, resources: Iterable[Resource] = SNAPSHOT_RESOURCES, *,
                 on_restart: RestartHook | None = None, watch_timeout: int = 300,
                 max_backoff: float = 2.0) -> None:
        self._recovered: list[Callable[[Resource], None]] = []
        self.informers: dict[Resource, Informer] = {
            res: Informer(source, res, on_restart=on_restart, watch_timeout=watch_timeout,
                          max_backoff=max_backoff, on_recovered=self._fire_recovered)
            for res in resources
        }

    def on_recovered(self, hook: Callable[[Resource], None]) -> None:
        """Call ``hook(resource)`` when a stale cache is fresh again (after an API outage)."""
        self._recovered.append(hook)

    def _fire_recovered(self, res: Resource) -> None:
        for hook in list(self._recovered):
            hook(res)

    def add_handler(self, handler: Handler, resources: Iterable[Resource] | None = None) -> None:
        for res in resources or self.informers:
            self.informers[res].add_handler(handler)

    def start(self) -> None:
        for inf in self.informers.values():
            inf.start()

    def stop(self, timeout: float = 1.0) -> None:
        for inf in self.informers.values():
            inf.stop(timeout=0)  # signal every thread first; daemon threads blocked in a read die with us
        deadline = time.monotonic() + timeout
        for inf in self.informers.values():
            inf.stop(timeout=max(0.0, deadline - time.monotonic()))

    def wait_synced(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        return all(inf.wait_synced(max(0.0, deadline - time.monotonic())) for inf in self.informers.values())

    @property
    def synced(self) -> bool:
        return all(inf.synced.is_set() for inf in self.informers.values())

    def unsynced(self) -> list[str]:
        return [res.plural for res, inf in self.informers.items() if not inf.synced.is_set()]

    def stale(self) -> list[str]:
        """Caches whose watch failed and that have not been relisted since (an API outage)."""
        return [res.plural for res, inf in self.informers.items() if inf.stale]

    def has(self, res: Resource) -> bool:
        return res in self.informers

    def items(self, res: Resource) -> list[dict[str, Any]]:
        inf = self.informers.get(res)
        return inf.items() if inf is not None else []

    def get(self, res: Resource, name: str, namespace: str | None = None) -> dict[str, Any] | None:
        inf = self.informers.get(res)
        if inf is None:
            return None
        return inf.get(f"{namespace}/{name}" if namespace and res.namespaced else name)

    def put(self, res: Resource, obj: dict[str, Any]) -> None:
        inf = self.informers.get(res)
        if inf is not None and object_key(obj):
            inf.put(obj)

    def restarts(self) -> dict[str, int]:
        return {res.plural: inf.restarts for res, inf in self.informers.items()}
