"""Watch caches: list, then watch from the list's resourceVersion with bookmarks; relist on 410;
reconnect with jittered exponential backoff; handlers see every change (and relist diffs).

After an API outage (issue 23, item 9) a cache is *stale* from its watch's first failure until a
fresh list succeeds: whatever changed meanwhile is unknown, so readers (the agent, /readyz) can
tell. The retry backoff is capped at ``max_backoff`` (2 s): the cache relists within about that
long of the API server answering again (a 429 "storage is (re)initializing" is retried the same).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from .errors import GoneError, KubeError, UnavailableError
from .resources import Resource

log = logging.getLogger(__name__)

Handler = Callable[[Resource, str, dict[str, Any]], None]  # (resource, ADDED|MODIFIED|DELETED, obj)
RestartHook = Callable[[Resource, str], None]  # (resource, reason)


class WatchSource(Protocol):
    def list(self, res: Resource, namespace: str | None = None, *, label_selector: str | None = None,
             field_selector: str | None = None) -> tuple[list[dict[str, Any]], str]: ...

    def watch(self, res: Resource, resource_version: str, namespace: str | None = None, *,
              timeout_seconds: int = 300, label_selector: str | None = None) -> Iterator[dict[str, Any]]: ...


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or ""
    return f"{ns}/{meta.get('name', '')}" if ns else str(meta.get("name", ""))


# Deleted keys remembered between lists (``Informer.put``); a relist forgets them all.
MAX_TOMBSTONES = 10_000

# A watch that ran at least this long and ended before its timeoutSeconds was cut by the server.
EARLY_END_MIN_SECONDS = 1.0


def _rv(obj: dict[str, Any] | None) -> int:
    text = str(((obj or {}).get("metadata") or {}).get("resourceVersion") or "")
    return int(text) if text.isdigit() else -1


class Informer:
    """A cache of one resource kept in sync by a daemon thread."""

    def __init__(self, source: WatchSource, res: Resource, *, namespace: str | None = None,
                 label_selector: str | None = None, watch_timeout: int = 300,
                 min_backoff: float = 0.2, max_backoff: float = 2.0,
                 on_restart: RestartHook | None = None,
                 on_recovered: Callable[[Resource], None] | None = None) -> None:
        self.res = res
        self._source = source
        self._namespace = namespace
        self._selector = label_selector
        self._watch_timeout = watch_timeout
        self._min_backoff = min_backoff
        self._max_backoff = max_backoff
        self._on_restart = on_restart
        self._on_recovered = on_recovered
        self.stale_since: float | None = None  # monotonic time of the first failure since the last list
        self._objects: dict[str, dict[str, Any]] = {}
        # What ``put`` must not bring back: deleted keys -> the resourceVersion of their deletion (a
        # watch DELETED), and the last list's resourceVersion (an object absent from it, at or below
        # it, was deleted before the list). A write answer that lost the race with the object's
        # deletion would otherwise live in the cache until the next relist (a ghost pod holding a
        # node's room in every plan).
        self._gone: dict[str, int] = {}
        self._list_rv = -1
        self._lock = threading.RLock()
        self._handlers: list[Handler] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.synced = threading.Event()
        self.resource_version = ""
        self.restarts = 0

    # ------------------------------------------------------------------ reading
    def items(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._objects.values())

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            return self._objects.get(key)

    def keys(self) -> list[str]:
        with self._lock:
            return list(self._objects)

    def add_handler(self, handler: Handler) -> None:
        self._handlers.append(handler)

    def put(self, obj: dict[str, Any]) -> None:
        """Write-through: a server answer newer than what the watch has delivered so far (never one
        older than the object's deletion: that answer lost a race with the watch)."""
        key = object_key(obj)
        rv = _rv(obj)
        with self._lock:
            old = self._objects.get(key)
            if old is not None and _rv(old) >= rv:
                return
            if old is None and 0 <= rv <= max(self._list_rv, self._gone.get(key, -1)):
                return
            self._objects[key] = obj

    def forget(self, key: str) -> None:
        with self._lock:
            self._objects.pop(key, None)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name=f"informer-{self.res.plural}", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self.synced.wait(timeout)

    @property
    def stale(self) -> bool:
        """The watch failed and no list has succeeded since: changes may be missing."""
        return self.stale_since is not None

    # ------------------------------------------------------------------ the loop
    def _fire(self, kind: str, obj: dict[str, Any]) -> None:
        for handler in list(self._handlers):
            try:
                handler(self.res, kind, obj)
            except Exception:
                log.exception("informer handler failed", extra={"resource": self.res.plural})

    def relist(self) -> None:
        items, rv = self._source.list(self.res, self._namespace, label_selector=self._selector)
        fresh = {object_key(o): o for o in items}
        with self._lock:
            old = self._objects
            self._objects = fresh
            self._list_rv = int(rv) if rv.isdigit() else -1
            self._gone.clear()  # the list's resourceVersion covers every deletion before it
        self.resource_version = rv
        for key, obj in old.items():
            if key not in fresh:
                self._fire("DELETED", obj)
        for key, obj in fresh.items():
            prev = old.get(key)
            if prev is None:
                self._fire("ADDED", obj)
            elif _rv(prev) != _rv(obj):
                self._fire("MODIFIED", obj)
        self.synced.set()
        if self.stale_since is not None:
            log.info("cache fresh again", extra={"resource": self.res.plural,
                                                 "stale_seconds": round(time.monotonic() - self.stale_since, 3)})
            self.stale_since = None
            if self._on_recovered is not None:
                try:
                    self._on_recovered(self.res)
                except Exception:  # pragma: no cover
                    log.exception("recovery hook failed")

    def _apply(self, event: dict[str, Any]) -> None:
        kind = str(event.get("type") or "")
        obj = event.get("object")
        if not isinstance(obj, dict):
            return
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if kind == "BOOKMARK":
            if rv:
                self.resource_version = rv
            return
        key = object_key(obj)
        with self._lock:
            if kind == "DELETED":
                self._objects.pop(key, None)
                self._gone[key] = max(_rv(obj), self._gone.pop(key, -1))
                if len(self._gone) > MAX_TOMBSTONES:  # the oldest first (insertion order)
                    del self._gone[next(iter(self._gone))]
            elif kind in ("ADDED", "MODIFIED"):
                old = self._objects.get(key)
                if old is None or _rv(old) <= _rv(obj) or _rv(obj) < 0:
                    self._objects[key] = obj
            else:
                return
        if rv:
            self.resource_version = rv
        self._fire(kind, obj)

    def run_once(self, events: Iterable[dict[str, Any]]) -> None:
        """Apply a batch of watch events (tests and replays)."""
        for event in events:
            self._apply(event)

    def _restart(self, reason: str) -> None:
        self.restarts += 1
        if self._on_restart is not None:
            try:
                self._on_restart(self.res, reason)
            except Exception:  # pragma: no cover
                log.exception("restart hook failed")

    def _run(self) -> None:
        backoff = self._min_backoff
        need_list = True
        while not self._stop.is_set():
            try:
                if need_list:
                    self.relist()
                    need_list = False
                timeout = int(self._watch_timeout * (0.5 + random.random() / 2)) or 1
                opened = time.monotonic()
                for event in self._source.watch(self.res, self.resource_version, self._namespace,
                                                timeout_seconds=timeout, label_selector=self._selector):
                    if self._stop.is_set():
                        return
                    self._apply(event)
                    backoff = self._min_backoff
                if self._stop.is_set():
                    return
                lasted = time.monotonic() - opened
                if EARLY_END_MIN_SECONDS <= lasted < timeout - 1:
                    # The server ended an established stream before its timeoutSeconds: a graceful
                    # shutdown closes every watch first (or a proxy cut it). Stale at once, and
                    # relisted (issue 31: writes all failed for 10 s while the caches looked fresh).
                    raise UnavailableError(f"watch {self.res.plural}: the server ended the stream early")
                # The server ended the stream (timeoutSeconds): resume from the last version seen.
            except GoneError:
                log.info("watch expired, relisting", extra={"resource": self.res.plural})
                need_list = True
                self._restart("gone")
            except KubeError as exc:
                log.warning("watch failed, relisting", extra={"resource": self.res.plural,
                                                              "reason": str(exc), "backoff": backoff})
                if self.stale_since is None and self.synced.is_set():
                    self.stale_since = time.monotonic()
                # Resuming from the last resourceVersion could miss nothing, but the cache would stay
                # unverifiable until an event or bookmark came (a minute on a quiet resource): a list
                # makes it known-fresh at once.
                need_list = True
                self._restart("error")
                self._stop.wait(backoff * (1 + random.random() / 2))
                backoff = min(self._max_backoff, backoff * 2)
            except Exception as exc:  # a bug in a converter must not kill the cache forever
                log.exception("watch loop crashed, retrying", extra={"resource": self.res.plural})
                self._restart(f"crash: {type(exc).__name__}")
                self._stop.wait(backoff)
                backoff = min(self._max_backoff, backoff * 2)
