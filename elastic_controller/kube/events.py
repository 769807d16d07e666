"""Kubernetes Events on jobs and pods (core/v1), de-duplicated so that a loop cannot flood etcd."""

from __future__ import annotations

import logging
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


class EventRecorder:
    """``emit`` creates an Event unless the same (object, reason, message) was sent within ``ttl``."""

    def __init__(self, api: KubeAPI | None, *, component: str = COMPONENT, ttl: float = 600.0,
                 clock: Callable[[], float] = time.monotonic, enabled: bool = True) -> None:
        self._api = api
        self._component = component
        self._ttl = ttl
        self._clock = clock
        self._sent: dict[tuple[str, str, str], float] = {}
        self._lock = threading.Lock()
        self.enabled = enabled
        self.emitted: list[dict[str, Any]] = []  # the last few, for tests and status

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
        try:
            self._api.create(EVENTS, body, namespace)
        except KubeError as exc:
            log.warning("event not recorded", extra={"reason": reason, "error": str(exc)})
            return False
        self.emitted.append(body)
        del self.emitted[:-200]
        return True
