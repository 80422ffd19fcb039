"""OTLP span messages in, one record per trace out: the source the pipeline sees for otlp_* input.

`TraceSource` wraps the `KafkaSource`: spans decoded (`otlp.spans`), held per trace
(`otlp.buffer`), assembled (`otlp.assembly`); a message is finished once every trace it
holds a span of is. See docs/opentelemetry.md, "Buffering and delivery".
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import structlog

from monitor.config import Settings
from monitor.records import InvalidRecord
from monitor.sampling import Sampler
from monitor.sources import SourceRecord
from monitor.sources.kafka import KafkaSource
from monitor.sources.offsets import Partition
from monitor.sources.otlp.assembly import IncompleteTrace, assemble
from monitor.sources.otlp.buffer import ClosedTrace, TraceBuffer
from monitor.sources.otlp.spans import OtlpFormat, decode_spans
from monitor.telemetry import Exporter

log = structlog.get_logger("monitor.sources.traces")

#: a message as the buffer knows it: partition, offset, generation
MessageKey = tuple[Partition, int, int]


@dataclass(frozen=True)
class _TraceRecord(SourceRecord):
    """One trace as a record; ``offset`` is the last message holding one of its spans. Only
    this source reads ``trace`` (the pipeline sees a `SourceRecord`)."""

    trace: ClosedTrace[MessageKey] | None = None


def trace_buffer(settings: Settings) -> TraceBuffer[MessageKey, Partition]:
    """The buffer of a `TraceSource`, made first: its `held` goes to the Kafka source."""
    return TraceBuffer(
        grace=settings.trace_grace_seconds,
        timeout=settings.trace_timeout_seconds,
        max_traces=settings.trace_buffer_max_traces,
        max_bytes=settings.trace_buffer_max_bytes,
    )


class TraceSource:
    """The `monitor.sources.Source` over a `KafkaSource` of OTLP span messages."""

    def __init__(
        self,
        inner: KafkaSource,
        buffer: TraceBuffer[MessageKey, Partition],
        settings: Settings,
        exporter: Exporter,
        *,
        sampler: Sampler | None = None,
        clock: Callable[[], float] | None = None,
    ) -> None:
        """``inner`` was made with ``held=buffer.held``: a revoke does not wait for the
        messages buffered traces hold (`trace_buffer`)."""
        if settings.input_format == "interaction":
            raise ValueError("TraceSource reads otlp_proto or otlp_json")
        self.inner = inner
        self.settings = settings
        self.exporter = exporter
        self.format: OtlpFormat = settings.input_format
        self.route_attribute = settings.trace_route_attribute
        self.clock = clock or time.monotonic
        self.buffer = buffer
        #: the messages buffered traces hold, without their bytes (for `finish`)
        self._messages: dict[MessageKey, SourceRecord] = {}
        self._generations: dict[Partition, int] = {}
        #: traces the sampler drops on their id alone (`Sampler.drops_unread`) are neither
        #: kept nor assembled; the pipeline drops their unread record on the trace id
        self._certain_drop: Callable[[str], bool] | None = None
        if sampler is not None:
            self._certain_drop = lambda trace_id: sampler.drops_unread(trace_id.encode("ascii"))

    # --- lifecycle and what app.py reads: the inner source's

    async def start(self) -> None:
        await self.inner.start()

    async def stop(self) -> None:
        await self.inner.stop()

    @property
    def assignment(self) -> list[Partition]:
        return self.inner.assignment

    @property
    def in_flight(self) -> int:
        """Unfinished messages (those held by buffered traces included)."""
        return self.inner.in_flight

    # --- the pipeline's Source

    async def fetch(self, wait_seconds: float = 0.5) -> list[SourceRecord]:
        messages = await self.inner.fetch(wait_seconds)
        self._forget_revoked()
        now = self.clock()
        out: list[SourceRecord] = []
        for message in messages:
            if message.invalid is not None:  # over the size limit: the inner source said so
                out.append(message)
                continue
            try:
                spans = decode_spans(
                    message.value,
                    self.format,
                    route_attribute=self.route_attribute,
                    skip=self._certain_drop,
                )
            except InvalidRecord as invalid:
                out.append(replace(message, invalid=invalid))
                continue
            key: MessageKey = (message.tp, message.offset, message.generation)
            self._generations[message.tp] = message.generation
            self._messages[key] = replace(message, key=None, value=None)
            added = self.buffer.add(spans, key, message.tp, now)
            if added.late_spans:
                self._count("late_span", added.late_spans)
            for trace in added.evicted:
                out.extend(self._closed(trace))
            if added.unused:
                self._free([key])
        for trace in self.buffer.due(now):
            out.extend(self._closed(trace))
        if self.inner.in_flight >= self.inner.max_in_flight:
            out.extend(self._relieve())
        self.exporter.trace_buffer_traces.set(len(self.buffer))
        self.exporter.trace_buffer_bytes.set(self.buffer.bytes)
        return out

    def finish(self, record: SourceRecord) -> None:
        trace = _trace_of(record)
        if trace is not None:
            self._free(self.buffer.release(trace))
        else:
            self.inner.finish(record)

    def owns(self, record: SourceRecord) -> bool:
        trace = _trace_of(record)
        if trace is not None:
            return all(self.inner.tracker.generation(tp) == g for tp, _, g in trace.handles)
        return self.inner.owns(record)

    def fence(self) -> None:
        self.inner.fence()

    async def dead_letter(self, record: SourceRecord, reason: str, detail: str) -> None:
        await self.inner.dead_letter(record, reason, detail)

    async def commit(self) -> object:
        return await self.inner.commit()

    # --- internals

    def _closed(self, trace: ClosedTrace[MessageKey]) -> list[SourceRecord]:
        """A trace out of the buffer → a record to score, or counted and released."""
        if trace.closing == "split":
            return self._drop(trace, "split")
        if trace.closing == "overflow" and self.settings.trace_buffer_overflow == "drop":
            return self._drop(trace, "overflow_dropped")
        if self._certain_drop is not None and self._certain_drop(trace.trace_id):
            # not assembled: the pipeline decides on the trace id, and finishes it unread
            self._count("sampled_out")
            return [self._record(trace, None)]
        try:
            record = assemble(trace.spans, route_attribute=self.route_attribute)
        except IncompleteTrace as incomplete:
            return self._drop(trace, incomplete.reason)
        self._count("assembled" if trace.closing != "overflow" else "overflow_assembled")
        return [self._record(trace, json.dumps(record, ensure_ascii=False).encode("utf-8"))]

    def _record(self, trace: ClosedTrace[MessageKey], value: bytes | None) -> _TraceRecord:
        """The trace's record: ``value`` the assembled interaction, None when left unread."""
        last = max(trace.handles, key=lambda h: h[1])
        (topic, partition), offset, generation = last
        first_ns = min(s.start_ns for s in trace.spans)
        return _TraceRecord(
            topic=topic,
            partition=partition,
            offset=offset,
            key=trace.trace_id.encode("ascii"),
            value=value,
            timestamp_ms=first_ns // 1_000_000,
            generation=generation,
            unread=value is None,
            trace=trace,
        )

    def _relieve(self) -> list[SourceRecord]:
        """The in-flight window is full: close the oldest open traces until they hold half.

        Held messages count as unfinished, so a window full of them fetches nothing
        more, and the spans that would complete those traces are never read: without
        this, consumption would stall until the traces time out.
        """
        out: list[SourceRecord] = []
        while self.buffer.held_total() > self.inner.max_in_flight // 2:
            trace = self.buffer.close_oldest()
            if trace is None:
                break
            out.extend(self._closed(trace))
        return out

    def _drop(self, trace: ClosedTrace[MessageKey], outcome: str) -> list[SourceRecord]:
        self._count(outcome)
        log.info("trace not scored", outcome=outcome, trace_id=trace.trace_id,
                 spans=len(trace.spans))  # fmt: skip
        self._free(self.buffer.release(trace))
        return []

    def _free(self, keys: list[MessageKey]) -> None:
        for key in keys:
            message = self._messages.pop(key, None)
            if message is not None:
                self.inner.finish(message)

    def _forget_revoked(self) -> None:
        """Drop what the buffer holds of partitions that were revoked (or re-assigned)."""
        for tp, generation in list(self._generations.items()):
            if self.inner.tracker.generation(tp) == generation:
                continue
            dropped = self.buffer.discard(tp)
            del self._generations[tp]
            for key in [k for k in self._messages if k[0] == tp and k[2] == generation]:
                del self._messages[key]
            if dropped:
                log.info("revoked: buffered traces left for the new owner", traces=dropped,
                         partition=tp[1])  # fmt: skip

    def _count(self, outcome: str, n: int = 1) -> None:
        self.exporter.traces.labels(outcome=outcome).inc(n)


def _trace_of(record: SourceRecord) -> ClosedTrace[MessageKey] | None:
    """The trace a record of this source stands for; None for a message of the inner source."""
    return record.trace if isinstance(record, _TraceRecord) else None
