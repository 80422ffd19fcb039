"""The exporter's HTTP endpoints on aiohttp's server.

- ``GET /metrics`` — the Prometheus text format of the exporter's registry, or
  OpenMetrics (with exemplars: the trace behind a score) when the scraper's
  ``Accept`` header asks for ``application/openmetrics-text``;
- ``GET /healthz`` — 200 while the event loop answers (liveness);
- ``GET /readyz`` — 200 when every gating readiness check passes, else 503; the
  body is JSON ``{"ready": bool, "checks": {name: bool}}`` with every check, the
  ones that only inform included.

Readiness checks are async callables returning a bool (Kafka reachable,
partitions assigned, judge reachable, Postgres reachable); each gets
``check_timeout`` seconds. ``gating`` names the checks that decide readiness
(None: all of them); the sidecar gates on ``kafka`` alone, see `monitor.app`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable, Mapping
from urllib.parse import urlsplit

import structlog
from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.exposition import choose_encoder

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
