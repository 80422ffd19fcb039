"""The demo's hold: what stays up after the report, and what ``/readyz`` checks meanwhile.

See docs/demo.md ("The hold", "Readiness while held").
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, TextIO

from monitor.config import Settings
from monitor.demo import DemoError
from monitor.demo.report import DemoReport
from monitor.demo.steps import until
from monitor.http import MetricsServer, ReadinessCheck, tcp_reachable

if TYPE_CHECKING:  # asyncpg is imported when the hold starts
    from monitor.backlog.store import BacklogStore

HOST = "127.0.0.1"


async def hold(
    settings: Settings,
    dsn: str,
    server: MetricsServer,
    bootstrap_servers: str,
    *,
    seconds: float,
    review_port: int | None,
    report: DemoReport,
    stop: asyncio.Event,
    err: TextIO,
) -> None:
    """Keep the demo up for ``seconds`` (and, with ``review_port``, serve the review page
    until ``stop``); returns when the hold is over. Stops only what it started."""
    if seconds <= 0 and review_port is None:
        return
    from monitor.backlog.store import BacklogStore
    from monitor.review.app import ReviewApp

    store = BacklogStore(dsn, settings)
    review = ReviewApp(store) if review_port is not None else None
    try:
        await until(store.start(), stop, what="connecting to Postgres")
        server.checks = held_checks(store, bootstrap_servers)
        server.gating = None  # every part the hold keeps up decides, unlike the sidecar's
        if review is not None and review_port is not None:
            try:
                await review.start(HOST, review_port)
            except OSError as exc:
                raise DemoError(
                    f"cannot serve the review page on port {review_port}: "
                    f"{exc.strerror or exc}; try --review-port 0"
                ) from exc
            report.review_url = f"http://{HOST}:{review.port}/"
        served = f"/metrics on {report.metrics_url}"
        if report.review_url:
            served += f", review on {report.review_url}"
        served += f", Postgres at {dsn}"
        if seconds > 0:
            _say(err, f"holding for {seconds:g} s: {served} — Ctrl-C stops everything and exits")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), seconds)
            if not stop.is_set():
                if review is None:
                    _say(err, f"the {seconds:g} s hold is over; stopping everything")
                    return
                _say(
                    err,
                    f"the {seconds:g} s hold is over; review on {report.review_url} and "
                    "/metrics stay up — Ctrl-C stops everything and exits",
                )
        else:
            _say(err, f"holding until Ctrl-C: {served} — Ctrl-C stops everything and exits")
        await stop.wait()
        _say(err, "Ctrl-C: stopping the hold and everything the demo started")
    finally:
        if review is not None:
            await review.stop()
        await store.close()


def held_checks(store: BacklogStore, bootstrap_servers: str) -> dict[str, ReadinessCheck]:
    """The readiness checks while held: the broker (``host:port``), Postgres, the schema."""
    from monitor.app import backlog_checks

    host, _, port = bootstrap_servers.split(",")[0].rpartition(":")

    async def kafka() -> bool:
        return await tcp_reachable(host, int(port))

    return {"kafka": kafka, **backlog_checks(store)}


def _say(err: TextIO, message: str) -> None:
    print(f"demo: {message}", file=err, flush=True)
