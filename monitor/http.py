"""The exporter's HTTP endpoints: ``/metrics``, ``/healthz``, ``/readyz`` (aiohttp).

See docs/metrics.md, "Prometheus series and endpoints".
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import json
import socket
from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import urlsplit

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.exposition import choose_encoder

from monitor.config import ConfigError

log = structlog.get_logger("monitor.http")

ReadinessCheck = Callable[[], Awaitable[bool]]


class MetricsServer:
    def __init__(
        self,
        registry: CollectorRegistry,
        host: str,
        port: int,
        checks: Mapping[str, ReadinessCheck] | None = None,
        *,
        check_timeout: float = 2.0,
        gating: frozenset[str] | None = None,
    ) -> None:
        self.registry = registry
        self.host = host
        self.port = port
        self.checks = dict(checks or {})
        #: the checks whose failure makes /readyz answer 503 (None: every check)
        self.gating = gating
        self.check_timeout = check_timeout
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)  # add_get also answers HEAD
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        # shutdown_timeout: how long `stop` lets a request in flight finish.
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=5.0)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        if self.port == 0:
            self.port = runner.addresses[0][1]
        log.info("metrics server listening", host=self.host, port=self.port)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def readiness(self) -> dict[str, bool]:
        async def run(check: ReadinessCheck) -> bool:
            try:
                return await asyncio.wait_for(check(), self.check_timeout)
            except Exception:
                return False

        names = list(self.checks)
        results = await asyncio.gather(*(run(self.checks[n]) for n in names))
        return dict(zip(names, results, strict=True))

    async def _metrics(self, request: web.Request) -> web.Response:
        accept = request.headers.get("Accept", "")
        if "application/openmetrics-text" in accept:  # exemplars are in this format only
            encoder, content_type = choose_encoder(accept)
            body = encoder(self.registry)
        else:
            content_type, body = CONTENT_TYPE_LATEST, generate_latest(self.registry)
        # The content type carries parameters (version, charset), so it goes in as a raw header.
        return web.Response(body=body, headers={"Content-Type": content_type})

    async def _healthz(self, request: web.Request) -> web.Response:
        return web.Response(text="ok\n", content_type="text/plain")

    async def _readyz(self, request: web.Request) -> web.Response:
        checks = await self.readiness()
        gating = self.gating
        ready = all(ok for name, ok in checks.items() if gating is None or name in gating)
        body = json.dumps({"ready": ready, "checks": checks}) + "\n"
        status = 200 if ready else 503
        return web.Response(text=body, status=status, content_type="application/json")


class PortUnavailable(ConfigError):
    """A port this process was told to listen on is taken (or not ours to take)."""


def check_port(host: str, port: int, option: str) -> None:
    """Raise PortUnavailable naming ``option`` unless ``host:port`` can be listened on now.

    Called before anything starts, so a taken port is one line and exit code 2, not a
    traceback after the other servers came up. Port 0 (any free port) always can. The
    probe binds as aiohttp's server does (SO_REUSEADDR), so a port in TIME_WAIT passes.
    """
    if port == 0:
        return
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)  # fmt: skip
    except socket.gaierror as exc:
        raise PortUnavailable(f"{option}: cannot resolve {host!r}: {exc.strerror}") from None
    for family, kind, proto, _, address in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
                probe.listen(1)
            except OSError as exc:
                shown = f"[{address[0]}]" if family == socket.AF_INET6 else address[0]
                why = "already in use" if exc.errno == errno.EADDRINUSE else exc.strerror
                raise PortUnavailable(
                    f"{option}: cannot listen on {shown}:{port}: {why} "
                    "(choose another port, or 0 for any free one)"
                ) from None


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
