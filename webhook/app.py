"""The Flask app: HTTP in, ``review`` functions, HTTP out. Thin on purpose.

Every malformed request (body over 3 MiB, not UTF-8, not ``application/json``, not JSON, not an
AdmissionReview) is answered 400 with ``{"error": ...}``; nothing a client sends makes a 500.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from flask import Flask, Request, Response, request

from elastic_controller.policy.settings import ElasticConfig

from .envelope import BadReviewError
from .logs import REVIEW_ENVIRON_KEY
from .metrics import WebhookMetrics
from .review import ReviewOutcome, review_job, review_pod

MAX_BODY_BYTES = 3 * 1024 * 1024
# An oversized body is read and discarded up to this much, so that the client (which sends its
# whole body before reading the answer) gets the 400; beyond it gunicorn closes the connection.
DISCARD_BYTES = 64 * 1024 * 1024
log = logging.getLogger("volcano_elastic.webhook")
_encode = json.JSONEncoder(separators=(",", ":")).encode

Reviewer = Callable[[Any, ElasticConfig], ReviewOutcome]


def _json(body: Any, status: int = 200) -> Response:
    return Response(_encode(body), status=status, mimetype="application/json")


def _discard(req: Request, size: int) -> None:
    left = min(size, DISCARD_BYTES)
    while left > 0:
        chunk = req.stream.read(min(left, 1 << 16))
        if not chunk:
            return
        left -= len(chunk)


def read_review(req: Request) -> Any:
    """The parsed JSON body; raises BadReviewError for anything but a small UTF-8 JSON body."""
    if req.headers.get("Content-Type") != "application/json":  # else parse it (the fast path is the API server's)
        if req.mimetype != "application/json":
            raise BadReviewError(f"Content-Type must be application/json, got {req.mimetype or 'none'!r}")
        charset = req.mimetype_params.get("charset", "utf-8").lower()
        if charset not in ("utf-8", "utf8"):
            raise BadReviewError(f"charset must be utf-8, got {charset!r}")
    if req.content_length is not None and req.content_length > MAX_BODY_BYTES:
        _discard(req, req.content_length)
        raise BadReviewError(f"body of {req.content_length} bytes is over the {MAX_BODY_BYTES} byte limit")
    raw = req.stream.read(MAX_BODY_BYTES + 1)
    if len(raw) > MAX_BODY_BYTES:
        _discard(req, DISCARD_BYTES)
        raise BadReviewError(f"body is over the {MAX_BODY_BYTES} byte limit")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadReviewError(f"body is not UTF-8: {exc.reason} at byte {exc.start}") from exc
    try:
        return json.loads(text)
    except RecursionError as exc:
        raise BadReviewError("body is not usable JSON: nested too deeply") from exc
    except ValueError as exc:  # JSONDecodeError, and integers beyond the digit limit
        raise BadReviewError(f"body is not JSON: {exc}") from exc


def create_app(cfg: ElasticConfig, metrics: WebhookMetrics | None = None) -> Flask:
    app = Flask("webhook")
    stats = metrics if metrics is not None else WebhookMetrics()

    def serve(endpoint: str, reviewer: Reviewer) -> Response:
        start = time.perf_counter()
        try:
            outcome = reviewer(read_review(request), cfg)
        except BadReviewError as exc:
            stats.observe(endpoint, "bad_request", time.perf_counter() - start)
            request.environ[REVIEW_ENVIRON_KEY] = {"error": str(exc)}
            return _json({"error": str(exc)}, 400)
        request.environ[REVIEW_ENVIRON_KEY] = outcome.fields
        if outcome.notable:
            log.warning("%s %s", endpoint, outcome.result, extra={"fields": {"result": outcome.result,
                                                                             **outcome.fields}})
        resp = _json(outcome.response)
        stats.observe(endpoint, outcome.result, time.perf_counter() - start, outcome.role)
        return resp

    @app.post("/mutate-pods")
    def mutate_pods() -> Response:
        return serve("mutate-pods", review_pod)

    @app.post("/validate-pytorchjobs")
    def validate_pytorchjobs() -> Response:
        return serve("validate-pytorchjobs", review_job)

    @app.get("/healthz")
    def healthz() -> Response:
        return _json({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        return _json({"status": "ready"})

    @app.get("/metrics")
    def metrics_endpoint() -> Response:
        body, content_type = stats.exposition()
        return Response(body, content_type=content_type)

    @app.errorhandler(404)
    @app.errorhandler(405)
    def http_error(exc: Any) -> Response:
        return _json({"error": f"{exc.code} {exc.name}: {request.method} {request.path}"}, exc.code)

    @app.errorhandler(Exception)
    def internal_error(exc: Exception) -> Response:
        log.exception("unexpected error", extra={"fields": {"path": request.path}})
        return _json({"error": f"internal error: {type(exc).__name__}"}, 500)

    return app
