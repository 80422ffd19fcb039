"""source → validate → sample → score → sinks, read top to bottom.

Each stage is its module's call, in order: `Pipeline._triage` validates and samples in the
fetch loop, `Pipeline._handle` scores, the `checkpoint.Checkpoint` writes the sinks and then
commits. See docs/design.md, "Data flow".
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Sequence
from datetime import UTC, datetime

import structlog

from monitor.checkpoint import Checkpoint, Pending
from monitor.config import Settings
from monitor.metrics.faithfulness import HALLUCINATION_PROBABILITY, LOCAL_FLAGGED
from monitor.records import Interaction, InvalidRecord, ScoredRecord, parse_record
from monitor.sampling import Decision, Kept, Sampler
from monitor.scoring import RecordScorer
from monitor.sinks import Sink, SinkBackpressure
from monitor.sources import DeadLetterError, RevokeHook, Source, SourceRecord
from monitor.telemetry import Exporter

log = structlog.get_logger("monitor.pipeline")

#: what the fetch loop hands a record's task: a record to dead-letter, one to score, or a
#: decision that waits for the risk screen
Verdict = Kept | InvalidRecord | Decision


def local_probability(scored: ScoredRecord, risk: float, flagged: bool | None = None) -> None:
    """The risk screen's probability in the faithfulness details, and whether the local
    judge flags the answer (``flagged``, when known), where the judge that scored gave no
    probability (an LLM judge): so a backlog row holds the local judge's reading beside the
    LLM judge's verdict (the scores topic its probability). A local judge's own reading is
    never replaced."""
    result = scored.results.get("faithfulness")
    if result is None or HALLUCINATION_PROBABILITY in result.details:
        return
    result.details[HALLUCINATION_PROBABILITY] = round(risk, 6)
    if flagged is not None:
        result.details[LOCAL_FLAGGED] = flagged


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
        revoke: RevokeHook | None = None,
        concurrency: int | None = None,
        checkpoint_interval: float = 0.5,
    ) -> None:
        """``revoke`` is the hook the source calls on a revoke (`RevokeHook`): the pipeline
        answers it with a checkpoint while it runs."""
        self.source = source
        self.sampler = sampler
        self.scorer = scorer
        self.sinks = list(sinks)
        self.exporter = exporter
        self.settings = settings
        self.revoke = revoke
        self.concurrency = concurrency or min(settings.score_concurrency, settings.max_in_flight)
        self.checkpoint_interval = checkpoint_interval
        self._checkpoint = Checkpoint(source, self.sinks, exporter)
        self._tasks: set[asyncio.Task[None]] = set()
        #: set when half the in-flight window waits for the sinks: checkpoint before the timer
        self._checkpoint_due = asyncio.Event()
        self._stopping = False

    @property
    def pending(self) -> list[Pending]:
        """Scored records not yet in every sink (`Checkpoint.pending`)."""
        return self._checkpoint.pending

    # --- the loop

    async def run(self, stop: asyncio.Event, grace_seconds: float | None = None) -> None:
        """Consume until ``stop`` is set, then drain within ``grace_seconds``."""
        grace = self.settings.shutdown_grace_seconds if grace_seconds is None else grace_seconds
        slots = asyncio.Semaphore(self.concurrency)
        serving = (
            self.revoke.served_by(self._revoked)
            if self.revoke is not None
            else contextlib.nullcontext()
        )
        with serving:
            await self._consume(stop, slots, grace)

    async def _consume(self, stop: asyncio.Event, slots: asyncio.Semaphore, grace: float) -> None:
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
        self, record: SourceRecord, verdict: Verdict, slots: asyncio.Semaphore
    ) -> None:
        try:
            await self._handle(record, verdict)
        except Exception:
            # a bug, not a data problem: leave the record unfinished (redelivered later)
            log.exception("record failed", partition=record.partition, offset=record.offset)
        finally:
            slots.release()

    def _triage(self, record: SourceRecord) -> Verdict | None:
        """Steps 1 and 2, in the fetch loop: validate the record, then sample it, once.

        None when the record was sampled out (it is finished); else what `_handle` does
        with it: dead-letter an InvalidRecord, score a kept one, or wait for the risk
        screen's answer first (a `Decision` with ``screening``: the record stays unfinished
        meanwhile, so the offsets wait for it and the fetch loop does not).
        """
        read = self._read(record)
        if isinstance(read, InvalidRecord):
            return read
        decision = self._decide(record, read)
        if decision.screening is not None:
            return decision
        return self._sampled(record, decision)

    def _sampled(self, record: SourceRecord, decision: Decision) -> Kept | None:
        """A settled decision: the kept record (counted), or None with the record finished."""
        if decision.kept is None:
            if decision.skipped is not None:
                self._skip(record, decision.skipped)
            else:
                self.source.finish(record)
            return None
        self.exporter.records_sampled.inc()
        return decision.kept

    def _read(self, record: SourceRecord) -> Interaction | InvalidRecord | None:
        """Step 1: the record validated, or why it is invalid (its source's verdict first:
        over the size limit, an OTLP message that does not decode); None when its source
        left it unread (`SourceRecord.unread`: the sampler drops it on its key)."""
        if record.invalid is not None:
            return record.invalid
        if record.unread:
            return None
        default = datetime.fromtimestamp(record.timestamp_ms / 1000, UTC)
        try:
            return parse_record(record.value, record.key, default_timestamp=default)
        except InvalidRecord as invalid:
            return invalid

    def _decide(self, record: SourceRecord, read: Interaction | None) -> Decision:
        """Step 2: the sampler's one decision, on the record's key (else its id) and its
        metadata."""
        if read is None:
            return self.sampler.decide(record.key or b"", None, None)
        unit = record.key or read.id.encode("utf-8")
        return self.sampler.decide(unit, read.metadata, read)

    async def _handle(self, record: SourceRecord, verdict: Verdict) -> None:
        if isinstance(verdict, InvalidRecord):
            await self._dead_letter(record, verdict)
            return
        if isinstance(verdict, Decision):
            kept = self._sampled(record, await self.sampler.settle(verdict))
            if kept is None:
                return
            verdict = kept
        scored = await self.scorer.score(verdict.interaction)
        if scored.error is not None:
            self._skip(record, scored.error, verdict.interaction.trace_id)
            return
        scored.inclusion_probability = verdict.probability
        if verdict.risk is not None:
            local_probability(scored, verdict.risk, verdict.flagged)
        self._checkpoint.add(record, scored)
        if len(self.pending) >= max(1, self.settings.max_in_flight // 2):
            # the source stops fetching while the window is full of written-but-uncommitted
            # records: checkpoint now rather than let the window wait for the timer
            self._checkpoint_due.set()

    def _skip(self, record: SourceRecord, reason: str, trace_id: str | None = None) -> None:
        self.exporter.records_skipped.labels(reason=reason).inc()
        log.debug("record skipped", reason=reason, partition=record.partition, offset=record.offset,
                  trace_id=trace_id)  # fmt: skip
        self.source.finish(record)

    async def _dead_letter(self, record: SourceRecord, invalid: InvalidRecord) -> None:
        while True:
            self.source.fence()
            if not self.source.owns(record):
                return
            try:
                await self.source.dead_letter(record, invalid.reason, invalid.detail)
            except DeadLetterError as exc:
                log.warning("dead-letter write failed", error=str(exc), retry_in=exc.retry_after)
                await self._wait(exc.retry_after)
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

    # --- the at-least-once order (`monitor.checkpoint`): sinks first, then offsets

    async def checkpoint(self) -> None:
        """`Checkpoint.commit`: write and flush sinks, finish, commit.

        Raises `SinkBackpressure` when a sink asked to wait (its records stay pending
        and uncommitted).
        """
        await self._checkpoint.commit()

    async def _checkpoint_loop(self, stop: asyncio.Event) -> None:
        """A checkpoint every ``checkpoint_interval``, or as soon as half the window waits
        for the sinks; a sink that asked to wait is waited for first."""
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._checkpoint_due.wait(), self.checkpoint_interval)
            self._checkpoint_due.clear()
            try:
                await self.checkpoint()
            except SinkBackpressure as wait:
                await self._wait(wait.retry_after)

    async def _revoked(self, deadline: float) -> None:
        """A revoke (`RevokeHook`): checkpoint what is finished before the partitions go,
        waiting for a sink no later than ``deadline``."""
        try:
            await self.checkpoint()
        except SinkBackpressure as wait:
            await self._wait(wait.retry_after, deadline)

    async def _wait(self, retry_after: float, deadline: float | None = None) -> None:
        """The one place the pipeline waits: a sink or the dead-letter topic could not
        take records now and asked to be asked again in ``retry_after`` seconds (the
        wait ends at ``deadline`` at the latest)."""
        if deadline is not None:
            retry_after = max(0.0, min(retry_after, deadline - time.monotonic()))
        await asyncio.sleep(retry_after)

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
        while True:
            try:
                await self.checkpoint()
                return
            except SinkBackpressure as wait:
                if time.monotonic() + wait.retry_after > deadline:
                    log.warning("shutdown: sinks still failing", pending=len(self.pending))
                    return
                await self._wait(wait.retry_after)
