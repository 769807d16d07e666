"""gunicorn glue: the settings we serve with, our hooks, our worker and the embedded application.

Connections are kept alive (a TLS handshake per review would cost far more than the review); the
SSL context comes from ``tls.reloader_for`` so that rotated certificate files are used for new
connections without restarting anything.

``ScreeningWorker`` (gunicorn's ``gthread`` worker, changed where a connection waits for its client):

- Screening: a connection's TLS handshake and request (headers and a ``Content-Length`` body) are read
  without blocking in the worker's event loop; only a complete request is answered. A client that
  trickles bytes holds a socket and a buffer, never a thread (issue 23 held every thread with eight of
  them; issue 31 stalled admission with 128 reconnecting ones).
- A complete request is answered at once on the event loop's thread: a review is pure CPU work (no
  I/O) of about 100 us, so handing it to a pool thread and back (two thread switches, a pipe write and
  two ``epoll_ctl`` per request in gthread) cost more than the review (issue 32). Requests whose
  body is not read to the end beforehand (chunked, ``Expect: 100-continue``, a body over
  ``SCREENED_BODY_BYTES``) still go to the pool threads, with a watchdog that shuts the socket after
  ``REQUEST_DEADLINE_SECONDS``.
- Deadlines: ``READ_DEADLINE_SECONDS`` for the handshake and the headers, ``REQUEST_DEADLINE_SECONDS``
  for the whole request, the keep-alive timeout for an idle connection.
- Bounds, per worker process: ``max_pending`` connections whose request has not arrived yet (new or
  mid-request) and ``max_client_pending`` of them per client address; a new connection over either
  bound cuts the oldest such connection (the client's own for the per-client bound) that has been
  waiting ``SHED_AFTER_SECONDS`` or more. A client that sends its request promptly, as the API server
  does, is never the oldest for long; idle kept-alive connections count only against
  ``max_connections``, and go oldest first when it is reached.
"""

from __future__ import annotations

import datetime
import errno
import functools
import logging
import os
import selectors
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

from gunicorn import http as ghttp
from gunicorn import sock as gsock
from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger
from gunicorn.workers.gthread import TConn, ThreadWorker

from elastic_controller.policy.settings import ElasticConfig

from .logs import REVIEW_ENVIRON_KEY, JsonFormatter
from .tls import reloader_for

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # read by prometheus_client when it is first imported
KEEPALIVE_SECONDS = 120  # above the API server's idle timeout (90 s): it closes first, never us mid-send
DEFAULT_WORKERS = 2
DEFAULT_THREADS = 32  # per worker: only for requests not screened whole (chunked, huge bodies)
READ_DEADLINE_SECONDS = 5.0  # TLS handshake + request headers (the API server sends them at once)
REQUEST_DEADLINE_SECONDS = 15.0  # the whole request + answer (the API server gives up after timeoutSeconds: 5)
DEFAULT_MAX_CONNECTIONS = 1000  # per worker: every connection held, idle kept-alive ones included
DEFAULT_MAX_PENDING = 256  # per worker: connections whose request has not arrived yet
DEFAULT_MAX_CLIENT_PENDING = 64  # per worker and client address
SHED_AFTER_SECONDS = 1.0  # a pending connection younger than this is never cut for a bound
SCREENED_BODY_BYTES = 4 * 1024 * 1024  # above the app's 3 MiB limit: such bodies go to a pool thread
HEADER_BYTES = 64 * 1024  # a request whose headers do not end within this is cut
ANSWER_IO_SECONDS = 0.5  # a send that waits longer (a client that stopped reading) cuts the connection
PIPELINED_PER_TURN = 8  # requests answered back to back on one connection before others get a turn
CUT_LOG_SECONDS = 10.0
LINGER_SECONDS = 2.0  # after a last answer: how long what the client still sends is drained (RFC 9112 9.6)


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
    max_connections: int = DEFAULT_MAX_CONNECTIONS
    max_pending: int = DEFAULT_MAX_PENDING
    max_client_pending: int = DEFAULT_MAX_CLIENT_PENDING


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


class Conn(TConn):  # type: ignore[misc]
    """A connection with what screening needs: the bytes so far, since when it waits, its deadline."""

    def __init__(self, cfg: Any, sock: Any, client: Any, server: Any) -> None:
        super().__init__(cfg, sock, client, server)
        self.host = str(client[0]) if isinstance(client, tuple) and client else str(client)
        self.buf = bytearray()
        self.handshaken = False
        self.since = time.monotonic()  # pending since (accept or first byte of a request); idle since
        self.deadline = self.since + READ_DEADLINE_SECONDS
        self.pending = True  # its request has not arrived yet (False: idle between requests, or busy)
        self.events = selectors.EVENT_READ
        self.closed = False
        self.in_pool = False  # a pool thread has it: the event loop keeps off
        self.callback: Any = None


class Corked:
    """The socket a response is written to on the event loop: the status line, headers and body go
    out in one TLS record and one ``send`` when the answer is complete (gunicorn writes the headers
    and each body chunk separately: two records, two segments, two wake-ups of the client)."""

    __slots__ = ("parts", "sock")

    def __init__(self, sock: Any) -> None:
        self.sock = sock
        self.parts: list[bytes] = []

    def sendall(self, data: Any) -> None:
        self.parts.append(bytes(data))

    def sendfile(self, *args: Any, **kwargs: Any) -> Any:
        self.flush()
        return self.sock.sendfile(*args, **kwargs)

    def flush(self) -> None:
        if self.parts:
            data = b"".join(self.parts)
            self.parts.clear()
            self.sock.sendall(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sock, name)


HEADERS, BODY, WHOLE, THREAD = "headers", "body", "whole", "thread"


def request_ready(buf: bytearray | bytes) -> str:
    """How far the request at the start of ``buf`` has come: HEADERS (still arriving), BODY (headers
    complete, a known-length body still arriving), WHOLE (answer it now) or THREAD (headers complete,
    a body the event loop does not wait for: chunked, ``Expect``, over SCREENED_BODY_BYTES, or a
    Content-Length that only gunicorn's parser can judge)."""
    end = buf.find(b"\r\n\r\n")
    if end < 0:
        return HEADERS
    length = 0
    for line in bytes(buf[:end]).split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name = name.strip().lower()
        if name == b"content-length":
            value = value.strip()
            if not value.isdigit():
                return THREAD
            length = int(value)
        elif name in (b"transfer-encoding", b"expect"):
            return THREAD
    if length > SCREENED_BODY_BYTES:
        return THREAD
    return WHOLE if len(buf) >= end + 4 + length else BODY


class ScreeningWorker(ThreadWorker):  # type: ignore[misc]
    """gunicorn's gthread worker that reads requests in its event loop and answers whole ones there."""

    read_deadline = READ_DEADLINE_SECONDS
    request_deadline = REQUEST_DEADLINE_SECONDS
    max_connections = DEFAULT_MAX_CONNECTIONS
    max_pending = DEFAULT_MAX_PENDING
    max_client_pending = DEFAULT_MAX_CLIENT_PENDING

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadlines: dict[int, tuple[float, Any]] = {}  # id(conn) -> (deadline, conn): pool threads
        self._deadlines_lock = threading.Lock()
        self._cut: set[int] = set()  # id(socket) of connections the watchdog shut
        self._pending: dict[Conn, None] = {}  # oldest first
        self._by_client: dict[str, dict[Conn, None]] = {}
        self._idle: dict[Conn, None] = {}  # kept alive between requests, oldest first
        self._lingering: dict[Conn, None] = {}  # answered for the last time, draining before the close
        self._next_scan = 0.0
        self._cuts: dict[str, int] = {}
        self._cuts_logged = time.monotonic()

    def init_process(self) -> None:
        threading.Thread(target=self._watchdog, name="request-deadlines", daemon=True).start()
        super().init_process()

    # ------------------------------------------------------------------ accepting
    def set_accept_enabled(self, enabled: bool) -> None:
        # gthread stops accepting at worker_connections; we accept while alive and cut instead, so
        # that a new connection (the API server's) is never left in the listen backlog behind slow ones.
        super().set_accept_enabled(bool(self.alive))

    def accept(self, listener: Any) -> None:
        try:
            sock, addr = listener.accept()
        except OSError as e:
            if e.errno in (errno.EMFILE, errno.ENFILE):  # out of descriptors: free one, take it next time
                victim = next(iter(self._idle), None) or next(iter(self._pending), None)
                if victim is not None:
                    self._count_cut("out of file descriptors")
                    self._drop(victim)
                return
            if e.errno not in (errno.EAGAIN, errno.ECONNABORTED, errno.EWOULDBLOCK):
                raise
            return
        conn = Conn(self.cfg, sock, addr, listener.getsockname())
        now = conn.since
        mine = self._by_client.get(conn.host)
        if mine is not None and len(mine) >= self.max_client_pending:
            self._shed(next(iter(mine)), now, "per-client bound")
        if len(self._pending) >= self.max_pending:
            self._shed(next(iter(self._pending)), now, "pending bound")
        if self.nr_conns >= self.max_connections:
            victim = next(iter(self._idle), None) or next(iter(self._pending), None)
            if victim is None or not self._shed(victim, now, "connection bound", idle_ok=True):
                self._count_cut("refused: connection bound")
                util_close(sock)
                return
        self.nr_conns += 1
        try:
            if self.cfg.is_ssl:
                conn.sock = gsock.ssl_context(self.cfg).wrap_socket(
                    sock, server_side=True, do_handshake_on_connect=False,
                    suppress_ragged_eofs=self.cfg.suppress_ragged_eofs)
            else:
                conn.handshaken = True
            conn.initialized = True
            conn.data_ready = True
            conn.parser = ghttp.get_parser(self.cfg, conn.sock, conn.client)
        except (OSError, ValueError, ssl.SSLError):
            self._close(conn)
            return
        self._add_pending(conn)
        conn.callback = functools.partial(self._on_readable, conn)
        self.poller.register(conn.sock, selectors.EVENT_READ, conn.callback)

    def _shed(self, victim: Conn, now: float, why: str, idle_ok: bool = False) -> bool:
        if victim.pending and now - victim.since < SHED_AFTER_SECONDS:
            return False
        if not victim.pending and not idle_ok:
            return False
        self._count_cut(why)
        self._drop(victim)
        return True

    # ------------------------------------------------------------------ bookkeeping
    def _add_pending(self, conn: Conn) -> None:
        conn.pending = True
        self._pending[conn] = None
        self._by_client.setdefault(conn.host, {})[conn] = None

    def _forget(self, conn: Conn) -> None:
        self._lingering.pop(conn, None)
        if conn in self._pending:
            del self._pending[conn]
            mine = self._by_client.get(conn.host)
            if mine is not None:
                mine.pop(conn, None)
                if not mine:
                    del self._by_client[conn.host]
        self._idle.pop(conn, None)

    def _drop(self, conn: Conn) -> None:
        """Close a connection that waits in the event loop."""
        self._forget(conn)
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass
        self._close(conn)

    def _close(self, conn: Conn, graceful: bool = False) -> None:
        if conn.closed:
            return
        conn.closed = True
        self.nr_conns -= 1
        try:
            conn.close(graceful=graceful)
        except OSError:
            pass

    def _count_cut(self, why: str) -> None:
        self._cuts[why] = self._cuts.get(why, 0) + 1

    def _log_cuts(self, now: float) -> None:
        if self._cuts and now - self._cuts_logged >= CUT_LOG_SECONDS:
            self.log.info("slow or surplus clients cut off", extra={"fields": {
                "cuts": dict(self._cuts), "seconds": round(now - self._cuts_logged, 1),
                "connections": self.nr_conns, "pending": len(self._pending)}})
            self._cuts.clear()
            self._cuts_logged = now

    # ------------------------------------------------------------------ screening
    def _on_readable(self, conn: Conn, _sock: Any = None) -> None:
        """The event loop's callback: read what arrived; answer the request once it is whole."""
        for _ in range(PIPELINED_PER_TURN):
            if conn.closed or conn.in_pool:  # a deferred turn may come after either
                return
            if not conn.handshaken and not self._handshake(conn):
                return
            if not self._read(conn):
                return
            state = request_ready(conn.buf)
            if state == HEADERS:
                if len(conn.buf) > HEADER_BYTES:
                    self._count_cut("headers too large")
                    self._drop(conn)
                return
            if state == BODY:
                conn.deadline = max(conn.deadline, conn.since + self.request_deadline)  # the headers came
                return
            if state == THREAD:
                self._to_pool(conn)  # gunicorn's thread path reads the body
                return
            if not self._answer(conn) or not conn.buf:
                return
        # More pipelined requests than one turn answers: the rest when the loop comes back.
        self.method_queue.defer(self._on_readable, conn)

    def _handshake(self, conn: Conn) -> bool:
        try:
            conn.sock.do_handshake()
        except ssl.SSLWantReadError:
            self._want(conn, selectors.EVENT_READ)
            return False
        except ssl.SSLWantWriteError:
            self._want(conn, selectors.EVENT_READ | selectors.EVENT_WRITE)
            return False
        except (ssl.SSLError, OSError):
            self._drop(conn)  # not TLS, a bad certificate check on the client's side, a reset...
            return False
        conn.handshaken = True
        self._want(conn, selectors.EVENT_READ)
        return True

    def _want(self, conn: Conn, events: int) -> None:
        if conn.events != events:
            conn.events = events
            self.poller.modify(conn.sock, events, conn.callback)

    def _read(self, conn: Conn) -> bool:
        """Everything the socket has now, into conn.buf; False when the connection is gone."""
        got = False
        try:
            while True:
                data = conn.sock.recv(65536)
                if not data:
                    self._drop(conn)  # the client closed it
                    return False
                got = True
                conn.buf += data
                if len(conn.buf) > SCREENED_BODY_BYTES + HEADER_BYTES:
                    break
        except (ssl.SSLWantReadError, BlockingIOError):
            pass
        except ssl.SSLWantWriteError:
            pass
        except (ssl.SSLError, OSError):
            self._drop(conn)
            return False
        if got and not conn.pending:  # an idle kept-alive connection starts its next request
            self._idle.pop(conn, None)
            conn.since = time.monotonic()
            conn.deadline = conn.since + self.read_deadline
            self._add_pending(conn)
        return True

    def _take(self, conn: Conn) -> None:
        """Out of the event loop's waiting sets; the buffered bytes go to the request parser."""
        self._forget(conn)
        conn.pending = False
        if conn.buf:
            conn.parser.unreader.unread(bytes(conn.buf))
            conn.buf = bytearray()

    def _answer(self, conn: Conn) -> bool:
        """Answer the whole request in conn.buf on this thread; True while the connection stays open."""
        self._take(conn)
        keep = False
        try:
            conn.sock.settimeout(ANSWER_IO_SECONDS)  # the parser reads only the buffer; a send may wait
            req = next(conn.parser)
            if req:
                real, conn.sock = conn.sock, Corked(conn.sock)
                try:
                    answered = self.handle_request(req, conn)
                finally:
                    corked, conn.sock = conn.sock, real
                    corked.flush()
                keep = self._keepalive_after(conn, answered)
        except Exception as exc:  # gunicorn's handling of a request that failed, as in its handle()
            self._request_failed(conn, exc)
        if not keep or not self.alive:
            self._linger(conn, registered=True)
            return False
        self._await_next(conn, registered=True)
        return True

    def _linger(self, conn: Conn, registered: bool) -> None:
        """Close after the last answer without resetting it (gunicorn's close_graceful, which waits up
        to 2 s, but in the event loop): FIN now, drain what the client still sends, close at its EOF."""
        self._forget(conn)
        try:
            socket.socket.shutdown(conn.sock, socket.SHUT_WR)  # the TCP socket's, under any TLS
            conn.sock.setblocking(False)
        except OSError:
            self._drop(conn)
            return
        conn.deadline = time.monotonic() + LINGER_SECONDS
        self._lingering[conn] = None
        conn.events = selectors.EVENT_READ
        if registered:
            self.poller.modify(conn.sock, selectors.EVENT_READ, functools.partial(self._drain, conn))
        else:
            self.poller.register(conn.sock, selectors.EVENT_READ, functools.partial(self._drain, conn))

    def _drain(self, conn: Conn, _sock: Any = None) -> None:
        try:
            while socket.socket.recv(conn.sock, 65536):
                pass
        except (BlockingIOError, InterruptedError):
            return  # more may come: wait for it (or the deadline)
        except OSError:
            pass
        self._drop(conn)  # EOF (or an error): close

    def _request_failed(self, conn: Conn, exc: Exception) -> None:
        if isinstance(exc, (StopIteration, ghttp.errors.NoMoreData)):
            return
        if isinstance(exc, ssl.SSLError) and exc.args and exc.args[0] == ssl.SSL_ERROR_EOF:
            return
        if isinstance(exc, OSError) and exc.errno in (errno.EPIPE, errno.ECONNRESET, errno.ENOTCONN):
            return
        if isinstance(exc, (TimeoutError, socket.timeout)):
            self._count_cut("answer not read")
            return
        self.handle_error(None, conn.sock, conn.client, exc)

    def _await_next(self, conn: Conn, registered: bool) -> None:
        """Served: wait for the next request on the event loop (bytes already read ahead are kept)."""
        conn.sock.setblocking(False)
        conn.buf = bytearray(conn.parser.unreader.take_buffered())
        now = time.monotonic()
        conn.since = now
        if conn.buf:
            conn.deadline = now + self.read_deadline
            self._add_pending(conn)
        else:
            conn.pending = False
            conn.deadline = now + self.cfg.keepalive
            self._idle[conn] = None
        if not registered:
            conn.events = selectors.EVENT_READ
            self.poller.register(conn.sock, selectors.EVENT_READ, conn.callback)
        else:
            self._want(conn, selectors.EVENT_READ)

    # ------------------------------------------------------------------ pool threads
    def _to_pool(self, conn: Conn) -> None:
        try:
            self.poller.unregister(conn.sock)
        except (KeyError, ValueError, OSError):
            pass
        self._take(conn)
        conn.in_pool = True
        self.enqueue_req(conn)

    def handle(self, conn: Any) -> Any:
        # A pool thread reads a request whose headers came (its body may still be on its way)
        # and answers it: all of it within request_deadline, or the watchdog shuts the socket.
        self._arm(conn, self.request_deadline)
        try:
            return super().handle(conn)
        finally:
            self._disarm(conn)
            self._cut.discard(id(conn.sock))

    def finish_request(self, conn: Any, fs: Any) -> None:
        conn.in_pool = False
        try:
            keep = bool(fs.result()) if not fs.cancelled() else False
        except Exception:
            keep = False
        if keep and self.alive:
            try:
                self._await_next(conn, registered=False)
            except (OSError, ValueError):
                self._drop(conn)
                return
            if conn.buf or (isinstance(conn.sock, ssl.SSLSocket) and conn.sock.pending()):
                self._on_readable(conn)  # bytes read ahead, which epoll will not report again
            return
        if conn.closed:
            return
        self._linger(conn, registered=False)

    def _arm(self, conn: Any, seconds: float) -> None:
        with self._deadlines_lock:
            self._deadlines[id(conn)] = (time.monotonic() + seconds, conn)

    def _disarm(self, conn: Any) -> None:
        with self._deadlines_lock:
            self._deadlines.pop(id(conn), None)

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
                self.log.info("slow client cut off: request deadline passed",
                              extra={"fields": {"remote": str(conn.client)}})

    # ------------------------------------------------------------------ deadlines in the loop
    def murder_keepalived(self, force: bool = False) -> None:
        now = time.monotonic()
        if force:
            for conn in [*self._pending, *self._idle, *self._lingering]:
                self._drop(conn)
            return
        if now < self._next_scan and self.alive:
            return
        self._next_scan = now + 0.25
        late = [c for c in self._pending if c.deadline <= now]
        late += [c for c in self._idle if c.deadline <= now or not self.alive]
        late += [c for c in self._lingering if c.deadline <= now]
        for conn in late:
            if conn.pending:
                self._count_cut("deadline")
            self._drop(conn)
        self._log_cuts(now)


def util_close(sock: Any) -> None:
    try:
        sock.close()
    except OSError:
        pass


def ssl_context(conf: Any, default_factory: Any) -> Any:
    return reloader_for(conf.certfile, conf.keyfile).context()


def child_exit(server: Any, worker: Any) -> None:
    if os.environ.get(MULTIPROC_ENV):
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(worker.pid)  # type: ignore[no-untyped-call]


def worker_class(opts: ServeOptions) -> type[ScreeningWorker]:
    """ScreeningWorker with the bounds of ``opts`` (gunicorn builds the worker from a class)."""
    return type("ScreeningWorker", (ScreeningWorker,), {
        "max_connections": opts.max_connections, "max_pending": opts.max_pending,
        "max_client_pending": opts.max_client_pending})


def gunicorn_settings(opts: ServeOptions) -> dict[str, Any]:
    host = f"[{opts.host}]" if ":" in opts.host else opts.host
    return {
        "bind": [f"{host}:{opts.port}"],
        "workers": opts.workers,
        "worker_class": worker_class(opts),
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
