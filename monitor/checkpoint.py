"""The at-least-once checkpoint: scored records into every sink first, their offsets after.

See docs/design.md, "Data flow".
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog

from monitor.records import ScoredRecord
from monitor.sinks import Sink, SinkError
from monitor.sources import Source, SourceRecord
from monitor.telemetry import Exporter

log = structlog.get_logger("monitor.checkpoint")


@dataclass
class Pending:
    """A scored record waiting for the sinks, and the sinks that hold it already."""

    record: SourceRecord
    scored: ScoredRecord
    #: indexes of the sinks that hold the record
    delivered: set[int] = field(default_factory=set)


class Checkpoint:
    """The scored records not yet in every sink, and the one method that moves them on."""

    def __init__(self, source: Source, sinks: Sequence[Sink], exporter: Exporter) -> None:
        self.source = source
        self.sinks = list(sinks)
        self.exporter = exporter
        self.pending: list[Pending] = []
        self._lock = asyncio.Lock()

    def add(self, record: SourceRecord, scored: ScoredRecord) -> None:
        """``scored`` waits for the next `commit`; ``record`` stays unfinished until then."""
        self.pending.append(Pending(record, scored))

    async def commit(self) -> bool:
        """Write pending records to every sink and flush, finish them, commit offsets.

        Returns False when a sink failed (its records stay pending and uncommitted). One
        commit at a time: a rebalance's commit waits for the timer's.
        """
        async with self._lock:
            self.pending = [p for p in self.pending if self.source.owns(p.record)]
            batch = list(self.pending)
            healthy = True
            for index, sink in enumerate(self.sinks):
                todo = [p for p in batch if index not in p.delivered]
                if todo and not await self._deliver(index, sink, todo):
                    healthy = False
            done = [p for p in batch if len(p.delivered) == len(self.sinks)]
            if done:
                finished = {id(p) for p in done}
                self.pending = [p for p in self.pending if id(p) not in finished]
                for p in done:
                    self.exporter.records_scored.inc()
                    self.source.finish(p.record)
                    log.debug("record scored", id=p.scored.interaction.id,
                              trace_id=p.scored.interaction.trace_id,
                              span_id=p.scored.interaction.span_id)  # fmt: skip
            await self.source.commit()
            return healthy

    async def _deliver(self, index: int, sink: Sink, todo: list[Pending]) -> bool:
        """Write and flush ``todo`` to ``sink``; False when it failed retryably."""
        name = sink.name
        try:
            await sink.write([p.scored for p in todo])
            await sink.flush()
        except SinkError as exc:
            if exc.retryable:
                log.warning("sink write failed", sink=name, records=len(todo), error=str(exc))
                return False
            # permanent: find the records the sink refuses, give up on those only
            for p in todo:
                try:
                    await sink.write([p.scored])
                    await sink.flush()
                except SinkError as one:
                    if one.retryable:
                        return False
                    log.error("sink refused record", sink=name, error=str(one))
                    self.exporter.records_skipped.labels(reason=f"sink_{name}").inc()
                p.delivered.add(index)
            return True
        for p in todo:
            p.delivered.add(index)
        return True
