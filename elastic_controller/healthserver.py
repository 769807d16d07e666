"""The controller's /healthz /readyz /metrics endpoint: one asyncio thread, whatever the clients do.

``http.server.ThreadingHTTPServer`` spent a thread per connection with no read deadline (1,000 idle
connections were 1,000 threads) and printed a traceback for every client that went away (issue
23). Here every connection is a coroutine on one event loop thread: the request line and headers
must arrive within ``READ_TIMEOUT`` seconds and fit in ``MAX_HEADER_BYTES``; beyond
``MAX_CONNECTIONS`` open connections new ones are closed at once; a client that disconnects is
simply forgotten. Answers are computed by the caller's ``route`` (GET only), fast and in-memory.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

READ_TIMEOUT = 5.0
WRITE_TIMEOUT = 10.0
MAX_HEADER_BYTES = 16 * 1024
MAX_CONNECTIONS = 512  # each idle one is closed after READ_TIMEOUT anyway
KEEPALIVE_REQUESTS = 100

Route = Callable[[str], tuple[int, bytes, str]]  # path -> (status, body, content type)
_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 408: "Request Timeout",
            500: "Internal Server Error", 503: "Service Unavailable"}


class HealthServer:
    """Serve ``route`` on ``address:port`` from a daemon thread; ``shutdown`` stops it."""

    def __init__(self, address: str, port: int, route: Route, *, read_timeout: float = READ_TIMEOUT,
                 max_connections: int = MAX_CONNECTIONS) -> None:
        self.route = route
        self.read_timeout = read_timeout
        self.max_connections = max_connections
        self.open_connections = 0
        self.refused = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.base_events.Server | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(address, port), name="http", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._error is not None:
            raise self._error

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.sockets[0].getsockname()[1])

    def _run(self, address: str, port: int) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(
                asyncio.start_server(self._serve, address, port, limit=MAX_HEADER_BYTES, backlog=128))
        except OSError as exc:
            self._error = exc
            self._ready.set()
            return
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.close()

    def shutdown(self) -> None:
        def stop() -> None:
            if self._server is not None:
                self._server.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            self._loop.stop()

        if self._loop.is_running():
            self._loop.call_soon_threadsafe(stop)
        self._thread.join(5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.open_connections >= self.max_connections:
            self.refused += 1
            writer.close()
            return
        self.open_connections += 1
        try:
            for _ in range(KEEPALIVE_REQUESTS):
                if not await self._one(reader, writer):
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, OSError):
            pass  # the client went away, was too slow or sent too much: nothing to report
        except asyncio.CancelledError:
            raise
        except Exception:  # a bug in a route: one line, not a traceback per connection
            log.warning("health endpoint request failed", exc_info=True)
        finally:
            self.open_connections -= 1
            writer.close()

    async def _one(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self.read_timeout)
        except asyncio.LimitOverrunError:
            await self._answer(writer, 400, b"headers too large", "text/plain", close=True)
            return False
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            await self._answer(writer, 400, b"bad request line", "text/plain", close=True)
            return False
        method, target, version = parts
        headers = {k.strip().lower(): v.strip() for k, _, v in (h.partition(":") for h in lines[1:] if h)}
        if headers.get("content-length", "0") not in ("", "0") or "transfer-encoding" in headers:
            await self._answer(writer, 400, b"no request body expected", "text/plain", close=True)
            return False
        close = headers.get("connection", "").lower() == "close" or version == "HTTP/1.0"
        if method not in ("GET", "HEAD"):
            await self._answer(writer, 405, b"method not allowed", "text/plain", close=True)
            return False
        status, body, ctype = self.route(target.split("?", 1)[0])
        await self._answer(writer, status, b"" if method == "HEAD" else body, ctype, close=close,
                           length=len(body))
        return not close

    async def _answer(self, writer: asyncio.StreamWriter, status: int, body: bytes, ctype: str, *,
                      close: bool, length: int | None = None) -> None:
        head = (f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\nContent-Type: {ctype}\r\n"
                f"Content-Length: {len(body) if length is None else length}\r\n"
                f"Connection: {'close' if close else 'keep-alive'}\r\n\r\n")
        writer.write(head.encode("latin-1") + body)
        await asyncio.wait_for(writer.drain(), WRITE_TIMEOUT)
