"""Leader election on a coordination.k8s.io/v1 Lease (client-go semantics).

A candidate takes the Lease when it does not exist, has no holder, or its holder has not
renewed it for ``lease_duration`` seconds *as observed locally* (no clock skew across hosts).
The leader renews every ``retry_period``; if it cannot renew within ``renew_deadline`` it stops
leading. On shutdown the leader releases the Lease so a standby takes over at once.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .api import KubeAPI
from .errors import ConflictError, KubeError, NotFoundError
from .resources import LEASES

log = logging.getLogger(__name__)


def micro_time(t: datetime | None = None) -> str:
    return (t or datetime.now(UTC)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True, slots=True)
class LeaseSettings:
    name: str = "volcano-elastic-controller"
    namespace: str = "volcano-elastic-system"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


class LeaderElector:
    def __init__(self, api: KubeAPI, identity: str, settings: LeaseSettings | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        s = settings or LeaseSettings()
        if not s.lease_duration > s.renew_deadline > s.retry_period > 0:
            raise ValueError("need lease_duration > renew_deadline > retry_period > 0")
        self.api = api
        self.identity = identity
        self.s = s
        self.clock = clock
        self._observed: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._observed_at = 0.0
        self._leading = threading.Event()
        self._renewed_at = float("-inf")  # clock() when the last successful acquire/renew was sent
        self.transitions = 0

    @property
    def is_leader(self) -> bool:
        return self._leading.is_set()

    def leading_now(self) -> bool:
        """May this replica write right now? It leads, and its last successful renewal was sent less
        than ``renew_deadline`` ago. A process paused (SIGSTOP, a stalled VM, a long GC) past that
        learns it here, before its next write, not at its next renewal attempt: by then another
        replica may have taken the Lease (``lease_duration`` > ``renew_deadline``)."""
        return self._leading.is_set() and self.clock() - self._renewed_at < self.s.renew_deadline

    def holder(self) -> str:
        try:
            lease = self.api.get(LEASES, self.s.name, self.s.namespace)
        except KubeError:
            return ""
        return str((lease.get("spec") or {}).get("holderIdentity") or "")

    def try_acquire_or_renew(self) -> bool:
        now = self.clock()
        try:
            lease = self.api.get(LEASES, self.s.name, self.s.namespace)
        except NotFoundError:
            body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
                    "metadata": {"name": self.s.name, "namespace": self.s.namespace},
                    "spec": self._spec(None)}
            try:
                self.api.create(LEASES, body, self.s.namespace)
            except KubeError as exc:
                log.info("lease not created", extra={"lease": self.s.name, "error": str(exc)})
                return False
            self._observed_at = now
            self._renewed_at = now
            return True
        except KubeError as exc:
            log.info("lease not read", extra={"lease": self.s.name, "error": str(exc)})
            return False
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        record = (holder, str(spec.get("renewTime") or ""))
        if record != self._observed:
            self._observed = record
            self._observed_at = now
        duration = float(spec.get("leaseDurationSeconds") or self.s.lease_duration)
        if holder and holder != self.identity and self._observed_at + duration > now:
            return False
        lease["spec"] = self._spec(spec)
        try:
            out = self.api.replace(LEASES, self.s.name, lease, self.s.namespace)
        except (ConflictError, KubeError) as exc:
            log.info("lease not updated", extra={"lease": self.s.name, "error": str(exc)})
            return False
        new = out.get("spec") or {}
        self._observed = (str(new.get("holderIdentity") or ""), str(new.get("renewTime") or ""))
        self._observed_at = now
        self._renewed_at = now
        return True

    def _spec(self, old: dict[str, Any] | None) -> dict[str, Any]:
        now = micro_time()
        old = old or {}
        mine = old.get("holderIdentity") == self.identity
        transitions = int(old.get("leaseTransitions") or 0) + (0 if mine or not old else 1)
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": max(1, round(self.s.lease_duration)),
            "acquireTime": old.get("acquireTime") if mine and old.get("acquireTime") else now,
            "renewTime": now,
            "leaseTransitions": transitions,
        }

    def release(self) -> None:
        """Give the Lease up (only if we still hold it) so that a standby takes over immediately."""
        self._leading.clear()
        try:
            lease = self.api.get(LEASES, self.s.name, self.s.namespace)
            spec = lease.get("spec") or {}
            if spec.get("holderIdentity") != self.identity:
                return
            spec.update({"holderIdentity": None, "leaseDurationSeconds": 1, "renewTime": micro_time()})
            lease["spec"] = spec
            self.api.replace(LEASES, self.s.name, lease, self.s.namespace)
            log.info("lease released", extra={"lease": self.s.name})
        except KubeError as exc:
            log.warning("lease not released", extra={"lease": self.s.name, "error": str(exc)})

    def run(self, stop: threading.Event, on_started: Callable[[], None],
            on_stopped: Callable[[], None]) -> bool:
        """Block: acquire, call ``on_started``, renew until ``stop`` (then release) or until the
        Lease is lost. Calls ``on_stopped`` if it led. Returns True when leadership was lost."""
        while not stop.is_set():
            if self.try_acquire_or_renew():
                break
            stop.wait(self.s.retry_period)
        if stop.is_set():
            return False
        self._leading.set()
        self.transitions += 1
        log.info("became leader", extra={"lease": self.s.name, "identity": self.identity})
        lost = False
        try:
            on_started()
            last_renew = self.clock()
            while not stop.wait(self.s.retry_period):
                if self.try_acquire_or_renew():
                    last_renew = self.clock()
                elif self.clock() - last_renew > self.s.renew_deadline:
                    lost = True
                    log.error("leadership lost: lease not renewed within the deadline",
                              extra={"lease": self.s.name, "identity": self.identity})
                    break
        finally:
            self._leading.clear()
            on_stopped()
            if not lost:
                self.release()
        return lost
