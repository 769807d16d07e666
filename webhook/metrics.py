"""Prometheus metrics of the webhook.

Under gunicorn every worker is a process: ``serve`` sets ``PROMETHEUS_MULTIPROC_DIR`` to a
fresh temporary directory before any worker starts, each worker writes its values there, and
``/metrics`` (answered by any worker) sums them with ``MultiProcessCollector``; a restarted
worker's counters are kept. Without that variable (tests, a single process) the app's own
registry is served.

Metrics never decide a review: ``observe`` swallows (and counts, and logs once a minute) any
failure to write them, re-creating a vanished directory on the way; ``problems`` says what is
wrong for ``/healthz``, which fails while the directory is missing or not writable.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Histogram, generate_latest, multiprocess

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
FAILURE_LOG_SECONDS = 60.0
log = logging.getLogger("volcano_elastic.webhook")
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0)


class WebhookMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.requests = Counter(
            "volcano_elastic_webhook_requests",
            "Admission requests by endpoint and result (allowed, patched, denied, bad_request, error).",
            ["endpoint", "result"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "volcano_elastic_webhook_request_duration_seconds",
            "Time to answer an admission request, from the body read to the response built.",
            ["endpoint"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.patches = Counter(
            "volcano_elastic_webhook_patches",
            "Pods patched by the mutating webhook, by the role written.",
            ["role"],
            registry=self.registry,
        )

        self._children: dict[tuple[str, str, str], tuple[Any, Any, Any]] = {}
        self.failures = 0
        self.last_failure = ""
        self._logged_at = -FAILURE_LOG_SECONDS

    def observe(self, endpoint: str, result: str, seconds: float, role: str = "") -> None:
        """Count one answered request; a failure to write the metrics never reaches the review."""
        try:
            self._observe(endpoint, result, seconds, role)
        except Exception as exc:  # metrics must never fail a review
            self.failures += 1
            self.last_failure = f"{type(exc).__name__}: {exc}"
            directory = os.environ.get(MULTIPROC_ENV)
            if directory and not os.path.isdir(directory):
                try:  # repair: a later value can be written again
                    os.makedirs(directory, exist_ok=True)
                except OSError:
                    pass
            now = time.monotonic()
            if now - self._logged_at >= FAILURE_LOG_SECONDS:
                self._logged_at = now
                log.error("cannot write metrics (the review was answered)",
                          extra={"fields": {"error": self.last_failure, "failures": self.failures}})

    def problems(self) -> list[str]:
        """Why metrics cannot be written now (empty when they can)."""
        directory = os.environ.get(MULTIPROC_ENV)
        if not directory:
            return []
        if not os.path.isdir(directory):
            return [f"metrics directory {directory} is missing"]
        if not os.access(directory, os.W_OK | os.X_OK):
            return [f"metrics directory {directory} is not writable"]
        return []

    def _observe(self, endpoint: str, result: str, seconds: float, role: str) -> None:
        key = (endpoint, result, role)
        children = self._children.get(key)
        if children is None:  # labels() takes a lock and builds a key: once per combination
            children = (self.requests.labels(endpoint, result), self.latency.labels(endpoint),
                        self.patches.labels(role) if role else None)
            self._children[key] = children
        children[0].inc()
        children[1].observe(seconds)
        if children[2] is not None:
            children[2].inc()

    def exposition(self) -> tuple[bytes, str]:
        if os.environ.get(MULTIPROC_ENV):
            registry = CollectorRegistry()
            multiprocess.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
            return generate_latest(registry), CONTENT_TYPE_LATEST
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
