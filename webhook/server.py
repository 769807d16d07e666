"""gunicorn glue: the settings we serve with, our hooks, and the embedded application.

``gthread`` workers keep the API server's connections alive (a TLS handshake per review would
cost far more than the review); the SSL context comes from ``tls.reloader_for`` so that rotated
certificate files are used for new connections without restarting anything.
"""

from __future__ import annotations

import datetime
import logging
import os
from dataclasses import dataclass
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger

from elastic_controller.policy.settings import ElasticConfig

from .logs import REVIEW_ENVIRON_KEY, JsonFormatter
from .tls import reloader_for

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # read by prometheus_client when it is first imported
KEEPALIVE_SECONDS = 120  # above the API server's idle timeout (90 s): it closes first, never us mid-send


@dataclass(frozen=True, slots=True)
class ServeOptions:
    certfile: str
    keyfile: str
    host: str = "0.0.0.0"
    port: int = 8443
    workers: int = 2
    threads: int = 4
    log_level: str = "info"
    access_log: bool = True


class JsonLogger(Logger):  # type: ignore[misc]
    """gunicorn's logger with JSON lines; an access line carries the review's fields."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for logger in (self.error_log, self.access_log, logging.getLogger("volcano_elastic")):
            for handler in logger.handlers or []:
                handler.setFormatter(JsonFormatter())
        app_log = logging.getLogger("volcano_elastic")
        if not app_log.handlers:
            app_log.handlers = list(self.error_log.handlers)
            app_log.setLevel(self.error_log.level)
            app_log.propagate = False

    def access(self, resp: Any, req: Any, environ: dict[str, Any], request_time: datetime.timedelta) -> None:
        if not self.access_log_enabled:
            return
        status = resp.status.split(None, 1)[0] if isinstance(resp.status, str) else resp.status
        fields: dict[str, Any] = {
            "method": environ.get("REQUEST_METHOD"),
            "path": environ.get("PATH_INFO"),
            "status": int(status),
            "durationMs": round(request_time.total_seconds() * 1000, 3),
            "bytes": getattr(resp, "sent", None),
            "remote": environ.get("REMOTE_ADDR"),
            "pid": os.getpid(),
        }
        review = environ.get(REVIEW_ENVIRON_KEY)
        if isinstance(review, dict):
            fields.update(review)
        self.access_log.info("request", extra={"fields": fields})


def ssl_context(conf: Any, default_factory: Any) -> Any:
    return reloader_for(conf.certfile, conf.keyfile).context()


def child_exit(server: Any, worker: Any) -> None:
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


def gunicorn_settings(opts: ServeOptions) -> dict[str, Any]:
    host = f"[{opts.host}]" if ":" in opts.host else opts.host
    return {
        "bind": [f"{host}:{opts.port}"],
        "workers": opts.workers,
        "worker_class": "gthread",
        "threads": opts.threads,
        "keepalive": KEEPALIVE_SECONDS,
        "timeout": 30,
        "graceful_timeout": 30,
        "certfile": opts.certfile,
        "keyfile": opts.keyfile,
        "ssl_context": ssl_context,
        "child_exit": child_exit,
        "logger_class": JsonLogger,
        "accesslog": "-" if opts.access_log else None,
        "errorlog": "-",
        "loglevel": opts.log_level,
        "proc_name": "volcano-elastic-webhook",
        "control_socket_disable": True,  # one per user by default: two servers would fight over it
        "preload_app": False,  # workers import the app after fork, with the metrics directory set
    }


class WebhookApplication(BaseApplication):  # type: ignore[misc]
    def __init__(self, cfg: ElasticConfig, settings: dict[str, Any]) -> None:
        self.elastic_cfg = cfg
        self.settings = settings
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.settings.items():
            self.cfg.set(key, value)

    def load(self) -> Any:
        from .app import create_app

        return create_app(self.elastic_cfg)
