"""The WSGI app: HTTP in, ``review`` functions, HTTP out. Thin on purpose.

``create_app`` returns a Flask app (``/healthz``, ``/readyz``, ``/metrics``, JSON errors) whose
two admission endpoints are served by ``AdmissionEndpoints`` in front of Flask: plain WSGI
(environ in, bytes out), because Flask's request and response objects cost more per review
than the review itself (see bench/webhook_load.py).

Every malformed request (body over 3 MiB, not UTF-8, not ``application/json``, not JSON, not an
AdmissionReview) is answered 400 with ``{"error": ...}``; nothing a client sends makes a 500.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from flask import Flask, Response, request
from werkzeug.http import parse_options_header

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
StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
STATUS = {200: "200 OK", 400: "400 Bad Request", 405: "405 Method Not Allowed", 500: "500 Internal Server Error"}


def _discard(stream: Any, size: int) -> None:
    left = min(size, DISCARD_BYTES)
    while left > 0:
        chunk = stream.read(min(left, 1 << 16))
        if not chunk:
            return
        left -= len(chunk)


def read_review(environ: dict[str, Any]) -> Any:
    """The parsed JSON body; raises BadReviewError for anything but a small UTF-8 JSON body."""
    ctype = environ.get("CONTENT_TYPE") or ""
    if ctype != "application/json":  # the API server's exact header skips the parse
        mimetype, params = parse_options_header(ctype)
        if mimetype.lower() != "application/json":
            raise BadReviewError(f"Content-Type must be application/json, got {mimetype or 'none'!r}")
        charset = params.get("charset", "utf-8").lower()
        if charset not in ("utf-8", "utf8"):
            raise BadReviewError(f"charset must be utf-8, got {charset!r}")
    stream = environ["wsgi.input"]
    length_text = environ.get("CONTENT_LENGTH") or ""
    if length_text:
        if not length_text.isdigit():
            raise BadReviewError(f"Content-Length {length_text!r} is not a byte count")
        length = int(length_text)
        if length > MAX_BODY_BYTES:
            _discard(stream, length)
            raise BadReviewError(f"body of {length} bytes is over the {MAX_BODY_BYTES} byte limit")
        raw = stream.read(length) if length else b""
    elif environ.get("wsgi.input_terminated"):  # chunked: gunicorn ends the stream at the body's end
        raw = stream.read(MAX_BODY_BYTES + 1)
        if len(raw) > MAX_BODY_BYTES:
            _discard(stream, DISCARD_BYTES)
            raise BadReviewError(f"body is over the {MAX_BODY_BYTES} byte limit")
    else:
        raw = b""  # no length and a server that does not end the stream: nothing can be read safely
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


class AdmissionEndpoints:
    """``POST /mutate-pods`` and ``POST /validate-pytorchjobs`` as plain WSGI; the rest to Flask."""

    def __init__(self, cfg: ElasticConfig, stats: WebhookMetrics, fallback: WSGIApp) -> None:
        self.cfg = cfg
        self.stats = stats
        self.fallback = fallback
        self.routes: dict[str, tuple[str, Reviewer]] = {
            "/mutate-pods": ("mutate-pods", review_pod),
            "/validate-pytorchjobs": ("validate-pytorchjobs", review_job),
        }

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        route = self.routes.get(environ.get("PATH_INFO") or "")
        if route is None:
            return self.fallback(environ, start_response)
        if environ.get("REQUEST_METHOD") != "POST":
            what = f"{environ.get('REQUEST_METHOD')} {environ['PATH_INFO']}"
            return self._send(start_response, 405, {"error": f"405 Method Not Allowed: {what}"}, [("Allow", "POST")])
        endpoint, reviewer = route
        start = time.perf_counter()
        try:
            outcome = reviewer(read_review(environ), self.cfg)
        except BadReviewError as exc:
            self.stats.observe(endpoint, "bad_request", time.perf_counter() - start)
            environ[REVIEW_ENVIRON_KEY] = {"error": str(exc)}
            return self._send(start_response, 400, {"error": str(exc)})
        except Exception as exc:  # a bug: answered, logged, counted; the worker lives on
            self.stats.observe(endpoint, "error", time.perf_counter() - start)
            log.exception("unexpected error", extra={"fields": {"path": environ.get("PATH_INFO")}})
            return self._send(start_response, 500, {"error": f"internal error: {type(exc).__name__}"})
        environ[REVIEW_ENVIRON_KEY] = outcome.fields
        if outcome.notable:
            log.warning("%s %s", endpoint, outcome.result,
                        extra={"fields": {"result": outcome.result, **outcome.fields}})
        body = self._send(start_response, 200, outcome.response)
        self.stats.observe(endpoint, outcome.result, time.perf_counter() - start, outcome.role)
        return body

    @staticmethod
    def _send(start_response: StartResponse, status: int, doc: Any,
              extra: list[tuple[str, str]] | None = None) -> list[bytes]:
        body = _encode(doc).encode()
        headers = [("Content-Type", "application/json"), ("Content-Length", str(len(body))), *(extra or [])]
        start_response(STATUS[status], headers)
        return [body]


def _json(body: Any, status: int = 200) -> Response:
    return Response(_encode(body), status=status, mimetype="application/json")


SELF_CHECK_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "healthz-worker-1", "namespace": "healthz", "labels": {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "healthz",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "1"}},
    "spec": {"containers": [{"name": "pytorch", "image": "pytorch",
                             "env": [{"name": "PET_NNODES", "value": "1:2"}]}]},
}


def self_check(cfg: ElasticConfig, stats: WebhookMetrics) -> list[str]:
    """Why a review could not be answered now (empty when it can): a canned pod review runs
    through the real review path, and the metrics it would write must be writable."""
    problems = list(stats.problems())
    doc = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": "healthz", "operation": "CREATE", "namespace": "healthz",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "object": SELF_CHECK_POD}}
    try:
        outcome = review_pod(doc, cfg)
        if outcome.response.get("response", {}).get("uid") != "healthz":
            problems.append("the self-check review answered without its uid")
    except Exception as exc:  # reported, not raised
        problems.append(f"the self-check review failed: {type(exc).__name__}: {exc}")
    return problems


def create_app(cfg: ElasticConfig, metrics: WebhookMetrics | None = None) -> Flask:
    app = Flask("webhook")
    stats = metrics if metrics is not None else WebhookMetrics()
    app.wsgi_app = AdmissionEndpoints(cfg, stats, app.wsgi_app)  # type: ignore[method-assign]

    @app.get("/healthz")
    def healthz() -> Response:
        problems = self_check(cfg, stats)
        if problems:
            return _json({"status": "unhealthy", "problems": problems}, 500)
        return _json({"status": "ok"})

    @app.get("/readyz")
    def readyz() -> Response:
        problems = self_check(cfg, stats)
        if problems:  # no traffic to a replica that cannot answer reviews
            return _json({"status": "unready", "problems": problems}, 500)
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
