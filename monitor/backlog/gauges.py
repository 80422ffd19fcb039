"""The backlog's series on the exporter: rows per status and the calibration, read from
Postgres by a task of their own (docs/operations.md)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import structlog

from monitor.background import BackgroundTask
from monitor.backlog.calibration import Calibration
from monitor.backlog.store import BacklogStore, StoreError
from monitor.telemetry import Exporter

log = structlog.get_logger("monitor.backlog.gauges")


class BacklogGauges:
    """Refreshes ``backlog_size`` every ``stats_interval`` seconds and the calibration
    series every ``calibration_interval`` (0: never) from a started `BacklogStore`, which
    it does not own. Construction has no side effects; `start` starts the task, `aclose`
    stops it."""

    def __init__(
        self,
        store: BacklogStore,
        exporter: Exporter,
        *,
        stats_interval: float = 30.0,
        calibration_interval: float = 300.0,
    ) -> None:
        self.store = store
        self.exporter = exporter
        self.stats_interval = stats_interval
        self.calibration_interval = calibration_interval
        self._task = BackgroundTask(self._run, "backlog-gauges")

    async def start(self) -> None:
        self._task.start()

    async def aclose(self) -> None:
        await self._task.stop()

    async def refresh_stats(self) -> None:
        """Read the rows per status and set the size gauge."""
        stats = await self.store.stats()
        for status, n in stats.counts.items():
            self.exporter.backlog_size.labels(status=status).set(n)

    async def refresh_calibration(self) -> Calibration:
        """Read the verdicts and set the calibration series."""
        c, verdicts = await self.store.calibration_snapshot()
        rate = (
            (c.calibrated_rate, c.lower or 0.0, c.upper or 0.0)
            if c.calibrated_rate is not None
            else None
        )
        self.exporter.calibration.update(
            c.flag_precision, c.control_hallucination_share, rate, verdicts
        )
        return c

    async def _run(self) -> None:
        async with asyncio.TaskGroup() as group:
            group.create_task(_every(self.stats_interval, self.refresh_stats, "stats"))
            if self.calibration_interval > 0:
                group.create_task(
                    _every(self.calibration_interval, self.refresh_calibration, "calibration")
                )


async def _every(interval: float, refresh: Callable[[], Awaitable[object]], what: str) -> None:
    """Run ``refresh`` every ``interval`` seconds until cancelled; a failed one is logged."""
    while True:
        try:
            await refresh()
        except StoreError as exc:
            log.warning(f"backlog {what} refresh failed", error=str(exc))  # two event names
        await asyncio.sleep(interval)
