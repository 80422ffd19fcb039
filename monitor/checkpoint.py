"""The at-least-once checkpoint: scored records into every sink first, their offsets after.

See docs/design.md, "Data flow".
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field

import structlog

from monitor.records import ScoredRecord
from monitor.sinks import Sink, SinkBackpressure, SinkError
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

    async def commit(self) -> None:
        """Write pending records to every sink and flush, finish them, commit offsets.

        Raises `SinkBackpressure` (the longest wait asked for) when a sink could not take
        its records now: they stay pending and uncommitted. One commit at a time: a
        rebalance's commit waits for the timer's.
        """
        async with self._lock:
            self.source.fence()  # a replica that stood still owns nothing it had
            self.pending = [p for p in self.pending if self.source.owns(p.record)]
            batch = list(self.pending)
            waits: list[SinkBackpressure] = []
            for index, sink in enumerate(self.sinks):
                todo = [p for p in batch if index not in p.delivered]
                wait = await self._deliver(index, sink, todo) if todo else None
                if wait is not None:
                    waits.append(wait)
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
            if waits:
                raise max(waits, key=lambda w: w.retry_after)

    async def _deliver(
        self, index: int, sink: Sink, todo: list[Pending]
    ) -> SinkBackpressure | None:
        """Write and flush ``todo`` to ``sink``; the sink's backpressure when it asked to wait."""
        name = sink.name
        try:
            await sink.write([p.scored for p in todo])
            await sink.flush()
        except SinkBackpressure as wait:
            log.warning("sink write failed", sink=name, records=len(todo), error=str(wait),
                        retry_in=wait.retry_after)  # fmt: skip
            return wait
        except SinkError:
            # refused for good: find the records the sink refuses, give up on those only
            for p in todo:
                try:
                    await sink.write([p.scored])
                    await sink.flush()
                except SinkBackpressure as wait:
                    return wait
                except SinkError as one:
                    log.error("sink refused record", sink=name, error=str(one))
                    self.exporter.records_skipped.labels(reason=f"sink_{name}").inc()
                p.delivered.add(index)
            return None
        for p in todo:
            p.delivered.add(index)
        return None
