"""The exporter's HTTP endpoints on a small asyncio server (no web framework).

- ``GET /metrics`` — the Prometheus text format of the exporter's registry, or
  OpenMetrics (with exemplars: the trace behind a score) when the scraper's
  ``Accept`` header asks for ``application/openmetrics-text``;
- ``GET /healthz`` — 200 while the event loop answers (liveness);
- ``GET /readyz`` — 200 when every readiness check passes, else 503; the body
  is JSON ``{"ready": bool, "checks": {name: bool}}``.

Readiness checks are async callables returning a bool (partitions assigned,
judge reachable, Postgres reachable); each gets ``check_timeout`` seconds.
One request per connection (``Connection: close``); bodies are not read.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import urlsplit

import structlog
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.exposition import choose_encoder

log = structlog.get_logger("monitor.http")

ReadinessCheck = Callable[[], Awaitable[bool]]

_REASONS = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
            503: "Service Unavailable"}  # fmt: skip


class MetricsServer:
    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        checks: Mapping[str, ReadinessCheck] | None = None,
        *,
        check_timeout: float = 2.0,
    ) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self.checks = dict(checks or {})
        self.check_timeout = check_timeout
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, self.host, self.port)
        sockets = self._server.sockets
        if sockets and self.port == 0:
            self.port = sockets[0].getsockname()[1]
        log.info("metrics server listening", host=self.host, port=self.port)

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            server.close()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(server.wait_closed(), 5.0)

    async def readiness(self) -> dict[str, bool]:
        async def run(check: ReadinessCheck) -> bool:
            try:
                return await asyncio.wait_for(check(), self.check_timeout)
            except Exception:
                return False

        names = list(self.checks)
        results = await asyncio.gather(*(run(self.checks[n]) for n in names))
        return dict(zip(names, results, strict=True))

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            request = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10.0)
            status, content_type, body = await self._respond(request)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError):
            status, content_type, body = 400, "text/plain", b"bad request\n"
        except ConnectionError:
            writer.close()
            return
        head = (
            f"HTTP/1.1 {status} {_REASONS.get(status, 'OK')}\r\n"
            f"Content-Type: {content_type}\r\n"
            f"Content-Length: {len(body)}\r\n"
            "Connection: close\r\n\r\n"
        ).encode("ascii")
        method = request.split(b" ", 1)[0] if status != 400 else b"GET"
        try:
            writer.write(head if method == b"HEAD" else head + body)
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()

    async def _respond(self, request: bytes) -> tuple[int, str, bytes]:
        parts = request.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3:
            return 400, "text/plain", b"bad request\n"
        method, target = parts[0], urlsplit(parts[1].decode("latin-1")).path
        if method not in (b"GET", b"HEAD"):
            return 405, "text/plain", b"method not allowed\n"
        if target == "/metrics":
            accept = _header(request, b"accept")
            if "application/openmetrics-text" in accept:  # exemplars are in this format only
                encoder, content_type = choose_encoder(accept)
                return 200, content_type, encoder(self.registry)
            return 200, CONTENT_TYPE_LATEST, generate_latest(self.registry)
        if target == "/healthz":
            return 200, "text/plain", b"ok\n"
        if target == "/readyz":
            checks = await self.readiness()
            ready = all(checks.values())
            body = json.dumps({"ready": ready, "checks": checks}).encode() + b"\n"
            return (200 if ready else 503), "application/json", body
        return 404, "text/plain", b"not found\n"


def _header(request: bytes, name: bytes) -> str:
    """The value of header ``name`` (lower case) in ``request``, or ``""``."""
    for line in request.split(b"\r\n")[1:]:
        key, _, value = line.partition(b":")
        if key.strip().lower() == name:
            return value.strip().decode("latin-1")
    return ""


async def tcp_reachable(host: str, port: int, within_seconds: float = 1.0) -> bool:
    """A readiness probe that opens (and closes) a TCP connection, nothing more."""
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), within_seconds)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return True


def url_endpoint(url: str, default_port: int) -> tuple[str, int]:
    """``http://h:p/v1`` or ``postgresql://u@h:p/db`` → (host, port)."""
    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else default_port)
    return host, port
