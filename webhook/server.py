"""gunicorn glue: the settings we serve with, our hooks, and the embedded application.

``gthread`` workers keep the API server's connections alive (a TLS handshake per review would
cost far more than the review); the SSL context comes from ``tls.reloader_for`` so that rotated
certificate files are used for new connections without restarting anything.

Slow clients: gunicorn's gthread worker reads a connection's TLS handshake and request headers in
a pool thread with blocking reads and no deadline, so a few clients trickling bytes held every
thread and admission stopped (issue 23). ``DeadlineThreadWorker`` gives every read phase a
deadline (``READ_DEADLINE_SECONDS`` for the handshake and headers, ``REQUEST_DEADLINE_SECONDS`` for
body and answer): a watchdog thread shuts the socket of a connection past its deadline, which
frees the thread. With ``DEFAULT_THREADS`` threads per worker, 32 such clients leave threads free.
"""

from __future__ import annotations

import datetime
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger
from gunicorn.workers.gthread import ThreadWorker

from elastic_controller.policy.settings import ElasticConfig

from .logs import REVIEW_ENVIRON_KEY, JsonFormatter
from .tls import reloader_for

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # read by prometheus_client when it is first imported
KEEPALIVE_SECONDS = 120  # above the API server's idle timeout (90 s): it closes first, never us mid-send
DEFAULT_WORKERS = 2
DEFAULT_THREADS = 32  # per worker: threads waiting on I/O are cheap; slow clients must not hold them all
READ_DEADLINE_SECONDS = 5.0  # TLS handshake + request headers (the API server sends them at once)
REQUEST_DEADLINE_SECONDS = 15.0  # body + review + answer (the API server gives up after timeoutSeconds: 5)


@dataclass(frozen=True, slots=True)
class ServeOptions:
    certfile: str
    keyfile: str
    host: str = "0.0.0.0"
    port: int = 8443
    workers: int = DEFAULT_WORKERS
    threads: int = DEFAULT_THREADS
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


class DeadlineThreadWorker(ThreadWorker):  # type: ignore[misc]
    """gunicorn's gthread worker with a deadline on every connection a pool thread reads from."""

    read_deadline = READ_DEADLINE_SECONDS
    request_deadline = REQUEST_DEADLINE_SECONDS

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadlines: dict[int, tuple[float, Any]] = {}  # id(conn) -> (deadline, conn)
        self._deadlines_lock = threading.Lock()
        self._cut: set[int] = set()  # id(socket) of connections the watchdog shut

    def init_process(self) -> None:
        threading.Thread(target=self._watchdog, name="read-deadlines", daemon=True).start()
        super().init_process()

    def _arm(self, conn: Any, seconds: float) -> None:
        with self._deadlines_lock:
            self._deadlines[id(conn)] = (time.monotonic() + seconds, conn)

    def _disarm(self, conn: Any) -> None:
        with self._deadlines_lock:
            self._deadlines.pop(id(conn), None)

    def handle(self, conn: Any) -> Any:
        # Called when a new connection has data or a kept-alive one is readable again: from here
        # until the headers are parsed (``handle_request``) the thread waits on the client.
        self._arm(conn, self.read_deadline)
        try:
            return super().handle(conn)
        finally:
            self._disarm(conn)
            self._cut.discard(id(conn.sock))

    def handle_request(self, req: Any, conn: Any) -> Any:
        self._arm(conn, self.request_deadline)
        return super().handle_request(req, conn)

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        if id(client) in self._cut:  # we cut it off: nothing to answer, nothing to report
            self.log.debug("slow client cut off", extra={"remote": str(addr)})
            return
        super().handle_error(req, client, addr, exc)

    def _watchdog(self) -> None:
        while True:
            time.sleep(0.25)
            now = time.monotonic()
            with self._deadlines_lock:
                late = [conn for deadline, conn in self._deadlines.values() if deadline < now]
                for conn in late:
                    self._deadlines.pop(id(conn), None)
            for conn in late:
                self._cut.add(id(conn.sock))
                try:
                    # The plain socket's shutdown (not SSLSocket's, which drops its SSL object under
                    # the reading thread): the blocked read returns, the thread is free again.
                    socket.socket.shutdown(conn.sock, socket.SHUT_RDWR)
                except OSError:
                    pass
                self.log.info("slow client cut off: read deadline passed",
                              extra={"fields": {"remote": str(conn.client)}})


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
        "worker_class": DeadlineThreadWorker,
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
