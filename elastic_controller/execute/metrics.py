"""What the agent's execution counts: the metric hooks the process exports (``AgentMetrics``; the
Prometheus implementation is ``cli/controller.py``'s) and the no-op one (``NoMetrics``)."""

from __future__ import annotations

from typing import Protocol

from .gauges import CycleState


class AgentMetrics(Protocol):
    """Hooks the process exports (see ``main.PrometheusMetrics``)."""

    def eviction(self, queue: str, reason: str) -> None: ...

    def eviction_failed(self, queue: str, reason: str) -> None: ...

    def write_refused(self, reason: str) -> None: ...

    def skipped(self, by_kind: dict[str, int]) -> None: ...

    def gate_release(self, queue: str, reason: str) -> None: ...

    def starving(self, by_queue: dict[str, int]) -> None: ...

    def state(self, state: CycleState) -> None: ...

    def cycle(self, seconds: float) -> None: ...

    def alarm(self, name: str, value: float) -> None: ...  # ALARMS: clock skew, other writers, scheduler idle


class NoMetrics:
    def eviction(self, queue: str, reason: str) -> None:
        return None

    def eviction_failed(self, queue: str, reason: str) -> None:
        return None

    def write_refused(self, reason: str) -> None:
        return None

    def skipped(self, by_kind: dict[str, int]) -> None:
        return None

    def gate_release(self, queue: str, reason: str) -> None:
        return None

    def starving(self, by_queue: dict[str, int]) -> None:
        return None

    def state(self, state: CycleState) -> None:
        return None

    def cycle(self, seconds: float) -> None:
        return None

    def alarm(self, name: str, value: float) -> None:
        return None
