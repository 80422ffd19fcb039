"""source → sample → score → sinks, read top to bottom.

For every fetched record (`Pipeline._triage`, then `Pipeline._handle`):

1. **size** — over ``max_record_bytes``: dead-lettered (cheap, no parsing);
2. **validate, then sample** — every record is validated (`records.check_record`:
   a hand check of the usual shape, the full model only for the rest), and an
   invalid one goes to the dead-letter topic whether the sampler would have kept
   it or not. Then `Sampler.precheck` drops most valid records without building
   their Interaction, and `Sampler.admit` decides for the rest with the exact
   rate, which becomes the record's inclusion probability. Both happen in the
   fetch loop itself (`Pipeline._triage`), so a sampled-out record costs no
   task. A record the configured rate would keep but the budget's scale drops
   is counted as ``records_skipped_total{reason="budget_thinned"}``;
3. **score** — under a bounded number of concurrent records; a record the
   budget cannot afford, or that the judge failed on, is *skipped* with the
   reason (``records_skipped_total{reason}``), never given a made-up score.
   With a ``fallback`` scorer (the local judge), records skipped for
   ``budget`` are scored by it instead;
4. **sinks** — scored records wait in ``pending`` until `checkpoint` has
   written them to every sink: every ``checkpoint_interval``, or as soon as
   half of the in-flight window is pending.

A record is *finished* when it was sampled out, dead-lettered, skipped, or is
in every sink; only then may its offset be committed (`checkpoint`: write and
flush sinks, then commit — the at-least-once order, in one method). A sink
error keeps the records pending and is retried with backoff; pending records
count as unfinished, so the source pauses its partitions when too many pile
up. `run` stops fetching when asked, lets in-flight work finish within the
grace period, checkpoints, and returns; the caller closes the source after.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Protocol

import structlog

from monitor.budget import AdaptiveRate, TokenBudget
from monitor.config import Settings
from monitor.records import (
    CheckedRecord,
    Interaction,
    InvalidRecord,
    ScoredRecord,
    check_record,
)
from monitor.sampling import Sampler, unit_hash
from monitor.sinks import Sink, SinkError
from monitor.sources import DeadLetterError, Source, SourceRecord
from monitor.sources.traces import RejectedRecord, TraceRecord
from monitor.telemetry import Exporter

log = structlog.get_logger("monitor.pipeline")

BUDGET = "budget"
#: a record the configured rate keeps but the budget's scale dropped (sampled out)
BUDGET_THINNED = "budget_thinned"


class RecordScorer(Protocol):
    """`monitor.scoring.Scorer`: never raises for a judge failure, sets ``error`` instead."""

    async def score(self, interaction: Interaction) -> ScoredRecord: ...


@dataclass(frozen=True)
class _Admitted:
    """A valid record the sampler kept, with its inclusion probability."""

    interaction: Interaction
    probability: float


@dataclass
class _Pending:
    record: SourceRecord
    scored: ScoredRecord
    #: indexes of the sinks that hold the record
    delivered: set[int] = field(default_factory=set)


class Backoff:
    """Exponential delay between retries of a failing sink or DLQ write."""

    def __init__(self, first: float = 0.1, cap: float = 5.0) -> None:
        self.first = first
        self.cap = cap
        self.delay = 0.0

    def failed(self) -> float:
        self.delay = self.first if self.delay == 0 else min(self.cap, self.delay * 2)
        return self.delay

    def succeeded(self) -> None:
        self.delay = 0.0


def _with_timestamp(checked: CheckedRecord | Interaction, record: SourceRecord) -> Interaction:
    """The record's Interaction; without a timestamp of its own, the Kafka record's."""
    default = datetime.fromtimestamp(record.timestamp_ms / 1000, UTC)
    if isinstance(checked, CheckedRecord):
        return checked.interaction(default_timestamp=default)
    if checked.timestamp is None:
        return checked.model_copy(update={"timestamp": default})
    return checked


class Pipeline:
    def __init__(
        self,
        source: Source,
        sampler: Sampler,
        scorer: RecordScorer,
        sinks: Sequence[Sink],
        exporter: Exporter,
        settings: Settings,
        *,
        budget: TokenBudget | None = None,
        adaptive: AdaptiveRate | None = None,
        fallback: RecordScorer | None = None,
        concurrency: int | None = None,
        checkpoint_interval: float = 0.5,
    ) -> None:
        self.source = source
        self.sampler = sampler
        self.scorer = scorer
        self.sinks = list(sinks)
        self.exporter = exporter
        self.settings = settings
        self.budget = budget
        self.adaptive = adaptive
        self.fallback = fallback
        self.concurrency = concurrency or min(settings.score_concurrency, settings.max_in_flight)
        self.checkpoint_interval = checkpoint_interval
        self.pending: list[_Pending] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self._checkpoint_lock = asyncio.Lock()
        #: set when half the in-flight window waits for the sinks: checkpoint before the timer
        self._flush_soon = asyncio.Event()
        self._sink_backoff = Backoff()
        self._retry_at = 0.0
        self._stopping = False

    # --- the loop

    async def run(self, stop: asyncio.Event, grace_seconds: float | None = None) -> None:
        """Consume until ``stop`` is set, then drain within ``grace_seconds``."""
        grace = self.settings.shutdown_grace_seconds if grace_seconds is None else grace_seconds
        slots = asyncio.Semaphore(self.concurrency)
        self.source.on_revoke = self.checkpoint
        checkpoints = asyncio.create_task(self._checkpoint_loop(stop), name="checkpoints")
        try:
            while not stop.is_set():
                for record in await self.source.fetch(wait_seconds=0.2):
                    verdict = self._triage(record)
                    if verdict is None:
                        continue  # sampled out: finished already, no task needed
                    await slots.acquire()
                    task = asyncio.create_task(self._process(record, verdict, slots))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                # a fetch served from the client's buffer does not suspend: yield once per
                # batch, or a backlog would starve the scoring tasks and the heartbeats
                await asyncio.sleep(0)
        finally:
            self._stopping = True
            checkpoints.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await checkpoints
            await self._drain(time.monotonic() + grace)

    async def _process(
        self, record: SourceRecord, verdict: _Admitted | InvalidRecord, slots: asyncio.Semaphore
    ) -> None:
        try:
            await self._handle(record, verdict)
        except Exception:
            # a bug, not a data problem: leave the record unfinished (redelivered later)
            log.exception("record failed", partition=record.partition, offset=record.offset)
        finally:
            slots.release()

    def _triage(self, record: SourceRecord) -> _Admitted | InvalidRecord | None:
        """Steps 1 and 2, in the fetch loop: validate every record, then sample.

        None when the record was sampled out (it is finished); else what `_handle` does
        with it: dead-letter an InvalidRecord, score an admitted one.
        """
        if isinstance(record, RejectedRecord):  # the source found it invalid (not OTLP)
            return record.invalid
        if isinstance(record, TraceRecord) and record.sampled_out:  # dropped on its trace id
            self._offered(self.sampler.rate)
            self.source.finish(record)
            return None
        if record.size > self.settings.max_record_bytes:
            detail = f"{record.size} bytes > limit {self.settings.max_record_bytes}"
            return InvalidRecord("too_large", detail)
        try:
            checked = check_record(
                record.value, record.key, max_bytes=self.settings.max_record_bytes
            )
        except InvalidRecord as invalid:
            return invalid
        scale = self.adaptive.scale() if self.adaptive is not None else 1.0
        unit = record.key or checked.id.encode("utf-8")  # the sampler's unit: key, else id
        precheck = self.sampler.precheck(unit, record.value, scale)
        self._offered(self.sampler.rate_for(checked.metadata))
        interaction: Interaction | None = None
        probability: float | None = None
        if not precheck.drop:
            interaction = _with_timestamp(checked, record)
            probability = self.sampler.admit(interaction, precheck.u, scale, precheck.ceiling)
        if interaction is None or probability is None:
            if scale < 1.0 and unit_hash(unit) < self.sampler.rate_for(checked.metadata):
                # the configured rate would have kept it: the budget thinned it
                self.exporter.records_skipped.labels(reason=BUDGET_THINNED).inc()
            self.source.finish(record)
            return None
        self.exporter.records_sampled.inc()
        return _Admitted(interaction, probability)

    async def _handle(self, record: SourceRecord, verdict: _Admitted | InvalidRecord) -> None:
        if isinstance(verdict, InvalidRecord):
            await self._dead_letter(record, verdict)
            return
        scored = await self._score(verdict.interaction)
        if scored.error is not None:
            self._skip(record, scored.error, verdict.interaction.trace_id)
            return
        scored.inclusion_probability = verdict.probability
        self.pending.append(_Pending(record, scored))
        if len(self.pending) >= max(1, self.settings.max_in_flight // 2):
            # the source stops fetching while the window is full of written-but-uncommitted
            # records: flush now rather than let the window wait for the timer
            self._flush_soon.set()

    async def _score(self, interaction: Interaction) -> ScoredRecord:
        if self.budget is not None and self.budget.exhausted():
            scored = ScoredRecord(interaction=interaction, error=BUDGET)
        else:
            scored = await self.scorer.score(interaction)
            if self.adaptive is not None:
                self.adaptive.spent(scored.usage.total_tokens)
        if scored.error == BUDGET and self.fallback is not None:
            scored = await self.fallback.score(interaction)
        return scored

    def _offered(self, rate: float) -> None:
        if self.adaptive is not None:
            self.adaptive.offered(rate)

    def _skip(self, record: SourceRecord, reason: str, trace_id: str | None = None) -> None:
        self.exporter.records_skipped.labels(reason=reason).inc()
        log.debug("record skipped", reason=reason, partition=record.partition, offset=record.offset,
                  trace_id=trace_id)  # fmt: skip
        self.source.finish(record)

    async def _dead_letter(self, record: SourceRecord, invalid: InvalidRecord) -> None:
        backoff = Backoff()
        while self.source.owns(record):
            try:
                await self.source.dead_letter(record, invalid.reason, invalid.detail)
            except DeadLetterError as exc:
                delay = backoff.failed()
                log.warning("dead-letter write failed", error=str(exc), retry_in=delay)
                await asyncio.sleep(delay)
                continue
            log.info(
                "record dead-lettered",
                reason=invalid.reason,
                detail=invalid.detail,
                partition=record.partition,
                offset=record.offset,
            )
            self.source.finish(record)
            return

    # --- the at-least-once order: sinks first, then offsets

    async def checkpoint(self) -> bool:
        """Write pending records to every sink, flush, mark them finished, commit.

        Returns False when a sink failed (its records stay pending and uncommitted).
        """
        async with self._checkpoint_lock:
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
            self._gauges()
            return healthy

    async def _deliver(self, index: int, sink: Sink, todo: list[_Pending]) -> bool:
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

    async def _checkpoint_loop(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._flush_soon.wait(), self.checkpoint_interval)
            self._flush_soon.clear()
            wait = self._retry_at - time.monotonic()
            if wait > 0:  # sinks failing: their backoff, whatever asks for a flush
                await asyncio.sleep(min(wait, self.checkpoint_interval))
                continue
            if await self.checkpoint():
                self._sink_backoff.succeeded()
            else:
                self._retry_at = time.monotonic() + self._sink_backoff.failed()

    def _gauges(self) -> None:
        scale = self.adaptive.scale() if self.adaptive is not None else 1.0
        self.exporter.sample_rate.set(self.sampler.rate * scale)
        if self.budget is not None:
            self.exporter.token_budget_remaining.set(self.budget.remaining())

    # --- shutdown

    async def _drain(self, deadline: float) -> None:
        """In-flight records get until ``deadline``; then sinks get what is left of it."""
        tasks = set(self._tasks)
        if tasks:
            _, late = await asyncio.wait(tasks, timeout=max(0.0, deadline - time.monotonic()))
            for task in late:
                task.cancel()
            if late:
                await asyncio.wait(late, timeout=5.0)
                log.warning("shutdown: unfinished records left for redelivery", records=len(late))
        backoff = Backoff()
        while True:
            if await self.checkpoint() or not self.pending:
                break
            delay = backoff.failed()
            if time.monotonic() + delay > deadline:
                log.warning("shutdown: sinks still failing", pending=len(self.pending))
                break
            await asyncio.sleep(delay)
