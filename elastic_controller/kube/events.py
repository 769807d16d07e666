"""Kubernetes Events on jobs and pods (core/v1), de-duplicated so that a loop cannot flood etcd."""

from __future__ import annotations

import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .api import KubeAPI
from .errors import KubeError
from .resources import EVENTS

log = logging.getLogger(__name__)
COMPONENT = "volcano-elastic"
QUEUE_SIZE = 1000  # Events waiting for the background sender, at most


class EventRecorder:
    """``emit`` creates an Event unless the same (object, reason, message) was sent within ``ttl``."""

    def __init__(self, api: KubeAPI | None, *, component: str = COMPONENT, ttl: float = 600.0,
                 clock: Callable[[], float] = time.monotonic, enabled: bool = True,
                 background: bool = False) -> None:
        """``background``: Events are sent by a thread of their own (as client-go's broadcaster does),
        so that a writer never waits on one (issue 36, item 3: the agent's cycle at 1,000 nodes); at
        most ``QUEUE_SIZE`` wait, beyond that an Event is dropped and logged."""
        self._api = api
        self._component = component
        self._ttl = ttl
        self._clock = clock
        self._sent: dict[tuple[str, str, str], float] = {}
        self._lock = threading.Lock()
        self.enabled = enabled
        self.emitted: list[dict[str, Any]] = []  # the last few, for tests and status
        self._outbox: queue.Queue[tuple[str, dict[str, Any]]] | None = None
        if background:
            self._outbox = queue.Queue(QUEUE_SIZE)
            threading.Thread(target=self._send_loop, name="event-sender", daemon=True).start()

    def emit(self, ref: dict[str, Any], event_type: str, reason: str, message: str) -> bool:
        key = (str(ref.get("uid") or f"{ref.get('namespace')}/{ref.get('name')}"), reason, message)
        now = self._clock()
        with self._lock:
            last = self._sent.get(key)
            if last is not None and now - last < self._ttl:
                return False
            self._sent[key] = now
            if len(self._sent) > 10_000:
                self._sent = {k: v for k, v in self._sent.items() if now - v < self._ttl}
        log.info("event", extra={"kind": ref.get("kind"), "object": f"{ref.get('namespace')}/{ref.get('name')}",
                                 "type": event_type, "reason": reason, "event_message": message})
        if not self.enabled or self._api is None:
            return False
        stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        namespace = str(ref.get("namespace") or "default")
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{ref.get('name')}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": ref, "type": event_type, "reason": reason, "message": message[:1000],
            "source": {"component": self._component}, "reportingComponent": self._component,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1,
        }
        if self._outbox is not None:
            try:
                self._outbox.put_nowait((namespace, body))
            except queue.Full:
                log.warning("event not recorded: too many waiting", extra={"reason": reason})
                return False
            return True
        return self._send(namespace, body)

    def _send(self, namespace: str, body: dict[str, Any]) -> bool:
        assert self._api is not None
        try:
            self._api.create(EVENTS, body, namespace)
        except KubeError as exc:
            log.warning("event not recorded", extra={"reason": body.get("reason"), "error": str(exc)})
            return False
        with self._lock:
            self.emitted.append(body)
            del self.emitted[:-200]
        return True

    def _send_loop(self) -> None:
        assert self._outbox is not None
        while True:
            namespace, body = self._outbox.get()
            try:
                self._send(namespace, body)
            except Exception:  # never let the sender die: the next Event is sent
                log.exception("event sender failed")
            finally:
                self._outbox.task_done()

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until every Event handed to the background sender was sent (True), at most ``timeout``."""
        if self._outbox is None:
            return True
        deadline = time.monotonic() + timeout
        while self._outbox.unfinished_tasks and time.monotonic() < deadline:
            time.sleep(0.01)
        return not self._outbox.unfinished_tasks
