"""The Kafka source the pipeline reads: fetch with backpressure, commit, dead-letter.

`KafkaSource` is a consumer-group member with manual commits. Every fetched
record is tracked (`offsets.OffsetTracker`) until the pipeline calls
`finish` (sampled out, dead-lettered, skipped, or in every sink); `commit`
moves each partition to its first unfinished record, never further. At most
``max_in_flight`` records are unfinished: while the window is full `fetch`
hands out nothing. If it stays full for ``pause_after_seconds`` (a stall: the
judge or a sink is down), the assigned partitions are paused, and resumed once
half of the window is done. On a rebalance the revoked
partitions' work gets ``revoke_timeout_seconds`` to finish, what is finished
is committed, the rest is dropped (it will be redelivered to the new owner).

Memory. While the window is full the client holds at most one fetch response
per partition (aiokafka fetches a partition again only once its buffered
records are handed out), so a momentary full window needs no pause — and a
pause would cost memory, not save it: aiokafka drops a paused partition's
buffered records and fetches them again on resume. A response holds at most
``FETCH_MAX_BYTES`` on brokers that honour the limit (noida-db does not: it
answers with the whole rest of each partition). `monitor.kafka.frames` keeps
aiokafka from holding a connection's last frame beside the records decoded from it.

Invalid records go to the dead-letter topic with their original key and
value and the error in headers (``rag-monitor-error-reason``,
``rag-monitor-error-detail``, plus the source coordinates). Lag is the fetch
high watermark minus the commit position (`consumer.highwater`, not
``end_offsets()``, which some brokers report wrong).

The token budget's ledger (`PartitionBudget`, `monitor.budget`) rides on the
commits: every commit carries each assigned partition's entry in its offset
metadata (a partition whose entry changed is committed again at the same
offset, in the same request: no commit is sent for the ledger alone, so a
rebalance sees no more commits than before), a revoke and `stop` commit every
changed entry before the partitions go, and an assignment reads the entries of
the partitions it brings (at most ``LEDGER_READ_SECONDS``; unread, they count
0). A partition with neither a record seen nor an earlier commit is committed
at offset 0, which with ``auto_offset_reset=earliest`` means what no commit
means: from the start of its log; where the assignment could not read its last
commit, no ledger-only commit is sent for it (a guessed 0 would rewind it).

With ``kafka_group_instance_id`` set the consumer is a *static* member
(KIP-345): a replica restarted with the same id (a crashed container in the
same pod) rejoins as its old member at once. It does not leave the group when
it stops, so a replica that is gone for good gives up its partitions only when
its session times out.

A replica whose event loop stood still for longer than the session timeout
(a frozen container, SIGSTOP, a VM paused, a CPU starved) has, as far as the
group knows, left it: its partitions may already be another member's. The
source notices the gap itself (a tick every ``STALL_TICK_SECONDS``, checked
again by `owns`) and *fences* itself before any of that work reaches a sink:
every held partition is let go as in a revoke (its records in flight and
scored-but-unwritten are dropped; the checkpoint writes only what `owns`
still holds), the budget reserves nothing, and the consumer rejoins the group,
whose assignment starts each partition again from its last commit. So a zombie
writes no stale duplicates and commits nothing over the new owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Protocol

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError, MessageSizeTooLargeError
from aiokafka.structs import OffsetAndMetadata

from monitor.config import Settings
from monitor.kafka.client import (
    MAX_REQUEST_BYTES,
    KafkaUnreachable,
    client_options,
    quiet_client_log,
    why_unreachable,
)
from monitor.kafka.frames import release_frames
from monitor.sources import DeadLetterError, SourceRecord
from monitor.sources.offsets import OffsetTracker, Partition
from monitor.telemetry import Exporter

log = structlog.get_logger("monitor.sources.kafka")

HEADER_REASON = "rag-monitor-error-reason"
HEADER_DETAIL = "rag-monitor-error-detail"
HEADER_TOPIC = "rag-monitor-source-topic"
HEADER_PARTITION = "rag-monitor-source-partition"
HEADER_OFFSET = "rag-monitor-source-offset"
HEADER_VALUE_DROPPED = "rag-monitor-value-dropped"

#: the most a fetch response may hold (KIP-74: a larger first batch still comes, alone).
#: The client holds up to about twice this per broker while it reads and decodes a response.
FETCH_MAX_BYTES = 16 * 1024 * 1024
#: how long the in-flight window must stay full before the partitions are paused
PAUSE_AFTER_SECONDS = 30.0
#: the brokers are probed this often while they answer; while they do not, the probe
#: backs off from a fifth of it to PROBE_BACKOFF_CAP
PROBE_SECONDS = 5.0
PROBE_BACKOFF_CAP = 30.0
PROBE_TIMEOUT_SECONDS = 10.0
#: how long an assignment waits for the ledger entries of its partitions
LEDGER_READ_SECONDS = 10.0
#: how often the source notes that its event loop runs (a gap longer than the session
#: timeout between two notes means the group may have given its partitions away)
STALL_TICK_SECONDS = 0.25


class PartitionBudget(Protocol):
    """The spend that travels with the partitions (`monitor.budget.TokenBudget`)."""

    def assign(self, ledger: Mapping[int, str | None], total: int) -> None: ...

    def revoke(self) -> None: ...

    def ledger(self) -> dict[int, str]: ...


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, source: KafkaSource) -> None:
        self._source = source

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        await self._source._on_revoked([(tp.topic, tp.partition) for tp in revoked])

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        await self._source._on_assigned([(tp.topic, tp.partition) for tp in assigned])


class KafkaSource:
    """Consumer group member with at-least-once, per-partition commits and a DLQ producer."""

    def __init__(
        self,
        settings: Settings,
        exporter: Exporter,
        *,
        client_id: str = "rag-monitor",
        revoke_timeout_seconds: float = 10.0,
        pause_after_seconds: float = PAUSE_AFTER_SECONDS,
        probe_seconds: float = PROBE_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.exporter = exporter
        self.topic = settings.kafka_topic
        self.client_id = client_id
        self.revoke_timeout = revoke_timeout_seconds
        self.pause_after = pause_after_seconds
        self.probe_seconds = probe_seconds
        #: whether the brokers answered the last probe (`_watch`; ``/readyz`` check ``kafka``)
        self.reachable = False
        self._watcher: asyncio.Task[None] | None = None
        self._ticker: asyncio.Task[None] | None = None
        #: the clock of the stall check, and when the event loop was last seen running
        self._clock = clock
        self._ticked: float | None = None
        self.max_in_flight = settings.max_in_flight
        self.tracker = OffsetTracker()
        #: called at the start of a revoke so the pipeline can checkpoint finished work
        self.on_revoke: Callable[[], Awaitable[object]] | None = None
        #: records of a partition held on purpose (spans of traces still being buffered):
        #: a revoke does not wait for them (they are re-read by the new owner)
        self.held: Callable[[Partition], int] | None = None
        #: called after every assignment with (assigned partitions, the topic's partitions)
        self.on_assigned: Callable[[int, int], None] | None = None
        #: the token budget whose ledger the commits carry (None: offsets only)
        self.budget: PartitionBudget | None = None
        #: the ledger entry last committed per partition of the topic
        self._ledger_committed: dict[int, str] = {}
        #: partitions of the topic whose last commit (or its absence) the assignment read
        self._commits_read: set[int] = set()
        self._consumer: AIOKafkaConsumer | None = None
        #: the consumer from the moment it is created (`_consumer`: once started)
        self._member: AIOKafkaConsumer | None = None
        self._producer: AIOKafkaProducer | None = None
        self._paused = False
        #: since when the in-flight window has been full (None: there is room)
        self._full_since: float | None = None
        self._room = asyncio.Event()
        self._commit_lock = asyncio.Lock()

    # --- lifecycle

    async def start(self) -> None:
        """Start the DLQ producer and the consumer; KafkaUnreachable when no broker answers."""
        release_frames()
        with quiet_client_log():  # its "Unable connect" lines: KafkaUnreachable says why
            await self._start()
        self.reachable = True
        self._watcher = asyncio.create_task(self._watch(), name="kafka-watch")
        self._ticked = self._clock()
        self._ticker = asyncio.create_task(self._tick(), name="kafka-stall-check")
        log.info("kafka source started", topic=self.topic, group=self.settings.kafka_group_id)

    async def _start(self) -> None:
        options = client_options(self.settings)
        producer = AIOKafkaProducer(
            **options,
            client_id=f"{self.client_id}-dlq",
            acks="all",
            max_request_size=MAX_REQUEST_BYTES,
        )
        try:
            await producer.start()
        except KafkaError as exc:
            await producer.stop()  # closes its client: no "Unclosed AIOKafkaProducer" later
            raise KafkaUnreachable(
                self.settings.kafka_bootstrap_servers, await why_unreachable(self.settings, exc)
            ) from None
        self._producer = producer
        consumer = AIOKafkaConsumer(
            **options,
            client_id=self.client_id,
            group_id=self.settings.kafka_group_id,
            # static membership: a restarted replica takes over its old member id instead of
            # waiting for the broker to expire it (noida-db never expires a crashed member)
            group_instance_id=self.settings.kafka_group_instance_id or None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            # a partition fetch asks for one record's worth; larger batches still
            # arrive one at a time (the broker always returns the first batch)
            max_partition_fetch_bytes=max(1_048_576, self.settings.max_record_bytes + 65_536),
            fetch_max_bytes=max(FETCH_MAX_BYTES, self.settings.max_record_bytes + 65_536),
            session_timeout_ms=self.settings.kafka_session_timeout_ms,
            heartbeat_interval_ms=self.settings.kafka_heartbeat_interval_ms,
            # how long a join waits for every member: our revoke work, plus a margin
            # (the default, max_poll_interval_ms = 5 min, keeps a crashed member's
            # replacement waiting that long on some brokers)
            rebalance_timeout_ms=max(
                self.settings.kafka_session_timeout_ms, int((self.revoke_timeout + 5) * 1000)
            ),
        )
        consumer.subscribe([self.topic], listener=_Rebalance(self))
        self._member = consumer
        try:
            await consumer.start()
        except BaseException as exc:
            await consumer.stop()
            await producer.stop()
            self._producer = None
            if isinstance(exc, KafkaError):
                detail = await why_unreachable(self.settings, exc)
                raise KafkaUnreachable(self.settings.kafka_bootstrap_servers, detail) from None
            raise
        self._consumer = consumer

    async def stop(self) -> None:
        """Commit what is finished, leave the group, close both clients."""
        for task in (self._watcher, self._ticker):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._watcher = self._ticker = None
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                await self._commit_with(consumer, ledger=True)
            finally:
                await consumer.stop()
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()
        log.info("kafka source stopped", topic=self.topic)

    # --- what the pipeline calls

    @property
    def assignment(self) -> list[Partition]:
        return self.tracker.partitions()

    @property
    def in_flight(self) -> int:
        return self.tracker.in_flight()

    @property
    def paused(self) -> bool:
        """True while the partitions are paused (the window has been full for a stall)."""
        return self._paused

    async def fetch(self, wait_seconds: float = 0.5) -> list[SourceRecord]:
        """Up to ``max_in_flight`` minus unfinished records; nothing while the window is full.

        Waits up to ``wait_seconds`` for room (half the window finished). A window
        full for ``pause_after_seconds`` pauses the partitions (see the module docstring).
        """
        consumer = self._require_consumer()
        room = self.max_in_flight - self.tracker.in_flight()
        if room <= 0:
            # Full: usually the pipeline is simply busy (it is the bottleneck while it
            # scores), and the partitions stay fetchable: the client holds at most one
            # response per partition. Pause only a stall: aiokafka drops the records it
            # has buffered for a paused partition, so every pause costs their new fetch.
            now = time.monotonic()
            if self._full_since is None:
                self._full_since = now
            self._room.clear()
            try:
                await asyncio.wait_for(self._room.wait(), wait_seconds)
            except TimeoutError:
                if time.monotonic() - self._full_since >= self.pause_after:
                    self._pause(consumer)
            return []
        self._full_since = None
        if self._paused and self.tracker.in_flight() <= self.max_in_flight // 2:
            self._resume(consumer)
        try:
            batches = await consumer.getmany(timeout_ms=int(wait_seconds * 1000), max_records=room)
        except KafkaError as exc:  # the client retries connections itself; report and go on
            log.warning("fetch failed", error=type(exc).__name__)
            await asyncio.sleep(wait_seconds)
            return []
        out: list[SourceRecord] = []
        for tp, messages in batches.items():
            key = (tp.topic, tp.partition)
            generation = self.tracker.generation(key)
            if generation is None:
                continue  # revoked while the fetch was in flight
            for m in messages:
                record = SourceRecord(
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=m.offset,
                    key=m.key,
                    value=m.value,
                    timestamp_ms=m.timestamp,
                    generation=generation,
                )
                if self.tracker.start(key, m.offset, generation):
                    out.append(record)
        if out:
            self.exporter.records_consumed.labels(topic=self.topic).inc(len(out))
        self._update_lag(consumer)
        return out

    def finish(self, record: SourceRecord) -> None:
        """The record needs nothing more: its offset may be committed."""
        self.tracker.finish(record.tp, record.offset, record.generation)
        if self.tracker.in_flight() <= self.max_in_flight // 2:
            self._room.set()

    def owns(self, record: SourceRecord) -> bool:
        """False once the record's partition was revoked (its work can be dropped), or the
        replica stood still past the session timeout (`_check_stall`)."""
        self._check_stall()
        return self.tracker.generation(record.tp) == record.generation

    async def dead_letter(self, record: SourceRecord, reason: str, detail: str) -> None:
        """Send the original key and value to the DLQ topic; raises DeadLetterError."""
        producer = self._producer
        if producer is None:
            raise DeadLetterError("the source is not started")
        headers = [
            (HEADER_REASON, reason.encode()),
            (HEADER_DETAIL, detail[:1000].encode("utf-8", "replace")),
            (HEADER_TOPIC, record.topic.encode()),
            (HEADER_PARTITION, str(record.partition).encode()),
            (HEADER_OFFSET, str(record.offset).encode()),
        ]
        value = record.value
        try:
            try:
                await producer.send_and_wait(
                    self.settings.kafka_dlq_topic, value=value, key=record.key, headers=headers
                )
            except MessageSizeTooLargeError:
                headers.append((HEADER_VALUE_DROPPED, b"too_large"))
                await producer.send_and_wait(
                    self.settings.kafka_dlq_topic, value=None, key=record.key, headers=headers
                )
        except KafkaError as exc:
            raise DeadLetterError(f"{type(exc).__name__}") from exc
        self.exporter.records_invalid.labels(reason=reason).inc()

    async def commit(self) -> dict[Partition, int]:
        """Commit each partition up to its first unfinished record; returns what was committed."""
        consumer = self._consumer
        if consumer is None:
            return {}
        return await self._commit_with(consumer)

    # --- internals

    async def _tick(self) -> None:
        while True:
            self._check_stall()
            await asyncio.sleep(STALL_TICK_SECONDS)

    def _check_stall(self) -> None:
        """Fence the replica when the loop was last seen running a session timeout ago."""
        now = self._clock()
        last, self._ticked = self._ticked, now
        if last is None or now - last <= self.settings.kafka_session_timeout_ms / 1000:
            return
        held = self.tracker.partitions()
        for tp in held:
            self.tracker.revoke(tp)
        if self.budget is not None:
            self.budget.revoke()
        self._room.set()
        # aiokafka has no public call for it; the join then tells whether the member
        # is still known (the same partitions come back) or expired (a new assignment)
        coordinator = getattr(self._member, "_coordinator", None)
        if coordinator is not None:
            coordinator.request_rejoin()
        log.warning(
            "stood still past the session timeout: work in flight let go, rejoining the group",
            stalled_seconds=round(now - last, 1),
            partitions=sorted(p for _, p in held),
        )

    async def _watch(self) -> None:
        """Probe the brokers (a metadata request) every ``probe_seconds``; back off while down.

        The client reconnects by itself; this only notices, logs the outage and its end,
        and keeps ``reachable`` for ``/readyz``.
        """
        delay = 0.0
        while self._consumer is not None:
            try:
                await asyncio.wait_for(self._consumer.topics(), PROBE_TIMEOUT_SECONDS)
            except (KafkaError, TimeoutError) as exc:
                delay = min(PROBE_BACKOFF_CAP, delay * 2) if delay else self.probe_seconds / 5
                event = "cannot reach Kafka: retrying" if self.reachable else "Kafka still away"
                (log.warning if self.reachable else log.info)(
                    event,
                    bootstrap_servers=self.settings.kafka_bootstrap_servers,
                    error=type(exc).__name__,
                    retry_in=round(delay, 2),
                )
                self.reachable = False
                await asyncio.sleep(delay)
                continue
            if not self.reachable:
                log.info(
                    "Kafka reachable again", bootstrap_servers=self.settings.kafka_bootstrap_servers
                )
            self.reachable = True
            delay = 0.0
            await asyncio.sleep(self.probe_seconds)

    async def _commit_with(
        self, consumer: AIOKafkaConsumer, *, ledger: bool = False
    ) -> dict[Partition, int]:
        """Commit the positions that moved, with the ledger entries that changed.

        A commit is sent only when a position moved, or with ``ledger`` (revoke, stop)
        when an entry changed.
        """
        async with self._commit_lock:
            positions = self.tracker.committable()
            entries = self.budget.ledger() if self.budget is not None else {}
            if not positions and not ledger:
                return {}
            for partition, entry in entries.items():
                tp = (self.topic, partition)
                if entry != self._ledger_committed.get(partition) and tp not in positions:
                    # the entry changed, the offset did not: the same offset again, where
                    # that offset is known (never a guessed 0 over a commit not read)
                    at = self._at(tp)
                    if at is not None:
                        positions[tp] = at
            if not positions:
                return {}
            offsets = {
                TopicPartition(t, p): OffsetAndMetadata(
                    pos, entries.get(p, "") if t == self.topic else ""
                )
                for (t, p), pos in positions.items()
            }
            try:
                await consumer.commit(offsets)
            except KafkaError as exc:
                # a rebalance or a broker hiccup: the positions stay, the next commit retries
                # (while the brokers are away, `_watch` has said so: once, not every commit)
                (log.warning if self.reachable else log.debug)(
                    "commit failed", error=type(exc).__name__, partitions=len(offsets)
                )
                return {}
            self.tracker.mark_committed(positions)
            for (topic, partition), _ in positions.items():
                if topic == self.topic and partition in entries:
                    self._ledger_committed[partition] = entries[partition]
            return positions

    def _at(self, tp: Partition) -> int | None:
        """Where ``tp`` stands: its first unfinished record, else its last commit, else 0
        when the assignment read that it has no commit; None when that is not known (the
        read failed), so a ledger-only commit never moves a real commit back to 0."""
        position = self.tracker.position(tp)
        if position is None:
            position = self.tracker.committed(tp)
        if position is None and tp[0] == self.topic and tp[1] in self._commits_read:
            return 0
        return position

    async def _read_ledger(self, assigned: list[Partition]) -> dict[int, str | None]:
        """The last commit's ledger entry of each assigned partition of the topic."""
        mine = [tp for tp in assigned if tp[0] == self.topic]
        member = self._member
        if not mine or member is None:
            return {}
        try:
            # the coordinator call behind `consumer.committed()`, which returns the offset
            # only: the metadata is what is wanted here
            got = await asyncio.wait_for(
                member._coordinator.fetch_committed_offsets(
                    [TopicPartition(t, p) for t, p in mine]
                ),
                LEDGER_READ_SECONDS,
            )
        except (KafkaError, TimeoutError) as exc:
            log.warning("token ledger not read: the budget counts from 0 for these partitions",
                        error=type(exc).__name__)  # fmt: skip
            return {p: None for _, p in mine}
        out: dict[int, str | None] = {p: None for _, p in mine}
        self._commits_read.update(p for _, p in mine)
        for tp, committed in got.items():
            if committed is None or committed.offset < 0:
                continue
            out[tp.partition] = committed.metadata
            self._ledger_committed[tp.partition] = committed.metadata or ""
            self.tracker.mark_committed({(tp.topic, tp.partition): committed.offset})
        return out

    def _require_consumer(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError("KafkaSource.start() was not awaited")
        return self._consumer

    def _pause(self, consumer: AIOKafkaConsumer) -> None:
        if not self._paused:
            consumer.pause(*consumer.assignment())
            self._paused = True
            log.info("backpressure: partitions paused", in_flight=self.tracker.in_flight())

    def _resume(self, consumer: AIOKafkaConsumer) -> None:
        consumer.resume(*consumer.assignment())
        self._paused = False
        log.info("backpressure: partitions resumed", in_flight=self.tracker.in_flight())

    def _update_lag(self, consumer: AIOKafkaConsumer) -> None:
        for topic, partition in self.tracker.partitions():
            highwater = consumer.highwater(TopicPartition(topic, partition))
            if highwater is None:
                continue
            position = self.tracker.position((topic, partition))
            if position is None:
                continue
            self.exporter.consumer_lag.labels(partition=str(partition)).set(
                max(0, highwater - position)
            )

    async def _on_assigned(self, assigned: list[Partition]) -> None:
        for tp in assigned:
            self.tracker.assign(tp)
        if self._paused and self._consumer is not None:
            self._consumer.pause(*self._consumer.assignment())
        log.info("partitions assigned", partitions=sorted(p for _, p in assigned))
        if self._member is None:
            return
        # (the first assignment can come while `start` is still waiting for the consumer)
        held = [tp for tp in self.tracker.partitions() if tp[0] == self.topic]
        total = max(len(self._member.partitions_for_topic(self.topic) or ()), len(held))
        if self.budget is not None:
            ledger = await self._read_ledger(held)
            self.budget.assign(ledger, total)
        if self.on_assigned is not None:
            self.on_assigned(len(held), total)

    async def _on_revoked(self, revoked: list[Partition]) -> None:
        if not revoked:
            return
        deadline = time.monotonic() + self.revoke_timeout
        while time.monotonic() < deadline:
            if self.on_revoke is not None:
                await self.on_revoke()
            held = self.held or (lambda tp: 0)
            if all(self.tracker.in_flight(tp) <= held(tp) for tp in revoked):
                break
            await asyncio.sleep(0.05)
        dropped = sum(self.tracker.in_flight(tp) for tp in revoked)
        if self._consumer is not None:
            await self._commit_with(self._consumer, ledger=True)  # the entries go with them
        if self.budget is not None:
            self.budget.revoke()  # nothing reserved until the new assignment has read them
        for topic, partition in revoked:
            self.tracker.revoke((topic, partition))
            if topic == self.topic:
                self._ledger_committed.pop(partition, None)
                self._commits_read.discard(partition)
            try:
                self.exporter.consumer_lag.remove(str(partition))
            except KeyError:
                pass
        self._room.set()
        log.info(
            "partitions revoked",
            partitions=sorted(p for _, p in revoked),
            dropped_in_flight=dropped,
        )
