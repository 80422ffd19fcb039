"""The backlog as a sink: flagged and control records of each batch → the backlog store.

It decides what is queued (`monitor.backlog.entries`), adds each batch to the traffic totals
and says how a write failed (`SinkBackpressure` or `SinkError`); the store writes.
See docs/review.md, "The backlog".
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from monitor.backlog.calibration import Traffic
from monitor.backlog.entries import backlog_reasons, build_entry
from monitor.backlog.store import NAME, BacklogStore, StoreError
from monitor.backoff import Backoff
from monitor.config import Settings
from monitor.flags import is_hallucination
from monitor.records import ScoredRecord
from monitor.sinks import SinkBackpressure, SinkError
from monitor.telemetry import Exporter

log = logging.getLogger(__name__)


class BacklogSink:
    """A `Sink` over a `BacklogStore`, which it owns: `aclose` closes the store too.

    Construction has no side effects; `start` opens the store, `aclose` closes it.
    """

    name = NAME

    def __init__(
        self,
        store: BacklogStore,
        settings: Settings,
        exporter: Exporter | None = None,
    ) -> None:
        self.store = store
        self._settings = settings
        self.exporter = exporter
        #: traffic totals of batches with nothing to queue, not yet in Postgres
        self._pending = Traffic()
        #: how long a write that failed asks the pipeline to wait
        self._backoff = Backoff()

    async def start(self, *, check: bool = True) -> None:
        """Open the store; with ``check``, fail now if Postgres is unreachable
        (`SinkBackpressure`) or the settings are wrong (`SinkError`)."""
        try:
            await self.store.start(check=check)
        except StoreError as exc:
            raise self._failed(exc) from exc

    async def aclose(self) -> None:
        await self.flush()
        if self._pending.scored:
            log.warning(
                "backlog traffic totals of %d record(s) not stored: postgres unreachable",
                self._pending.scored,
            )
        await self.store.close()

    # --- Sink

    async def write(self, batch: Sequence[ScoredRecord]) -> None:
        """Queue the flagged and control records of ``batch`` and add the batch to the
        traffic totals, in one transaction."""
        share = self._settings.control_share
        entries = [
            build_entry(record, reasons, self.store.redactor, control_share=share)
            for record in batch
            if (reasons := backlog_reasons(record, self._settings))
        ]
        traffic = traffic_of(batch, self._settings.thresholds)
        if not entries:
            # nothing to lose: the totals wait in memory (like the exporter's counters)
            # rather than hold the offsets while Postgres is away
            self._pending += traffic
            await self.flush()
            return
        held = self._pending
        try:
            queued = await self.store.enqueue(entries, held + traffic)
        except StoreError as exc:
            if self.exporter is not None:
                self.exporter.backlog_write_errors.inc()
            raise self._failed(exc) from exc
        self._backoff.succeeded()
        self._pending -= held
        if self.exporter is not None:
            for entry in queued:
                for reason in entry.reasons:
                    self.exporter.backlog_enqueued.labels(reason=reason).inc()

    async def flush(self) -> None:
        """Store the traffic totals held in memory, if any; they stay held while Postgres
        is unreachable. Queued records are committed when `write` returns."""
        if not self._pending.scored:
            return
        pending = self._pending
        try:
            await self.store.enqueue([], pending)
        except StoreError as exc:
            log.debug("backlog traffic totals held: %s", exc)
            return
        self._pending -= pending  # what other batches added meanwhile stays held

    def _failed(self, exc: StoreError) -> SinkBackpressure | SinkError:
        """Postgres away, or a fix an operator makes: wait and ask again; else refused."""
        if exc.retryable:
            return SinkBackpressure(NAME, exc.detail, self._backoff.failed())
        return SinkError(NAME, exc.detail)


def traffic_of(batch: Sequence[ScoredRecord], thresholds: Mapping[str, float]) -> Traffic:
    """The records of ``batch`` with a faithfulness score, and the hallucinations among
    them, each weighted 1/p: what `monitor.sinks.prometheus` adds to its weight counters."""
    total = Traffic()
    for record in batch:
        hallucinated = is_hallucination(record, thresholds)
        if hallucinated is None:
            continue
        weight = record.weight
        total += Traffic(1, int(hallucinated), weight, weight if hallucinated else 0.0)
    return total
