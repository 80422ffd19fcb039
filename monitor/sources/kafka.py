"""The Kafka source the pipeline reads: consume, track, commit (docs/design.md, "The Kafka source").

`KafkaSource` is a consumer-group member with manual commits: each partition is committed
up to its first unfinished record (`monitor.sources.offsets`), once the budget's ledger
(`monitor.kafka.ledger`) has kept what was spent. Its backpressure is
`monitor.sources.window`, its lag gauge `monitor.sources.lag`, its dead letters and broker
probe are in `monitor.kafka`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable

import structlog
from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import KafkaError, NoOffsetForPartitionError, OffsetOutOfRangeError
from aiokafka.structs import OffsetAndMetadata, OffsetAndTimestamp

from monitor.background import BackgroundTask
from monitor.config import Settings
from monitor.kafka.client import (
    KafkaUnreachable,
    client_options,
    quiet_client_log,
    why_unreachable,
)
from monitor.kafka.dead_letter import DeadLetterFailed, DeadLetterProducer
from monitor.kafka.frames import release_frames
from monitor.kafka.ledger import LedgerListener, LedgerUnavailable
from monitor.kafka.probe import PROBE_SECONDS, BrokerProbe
from monitor.records import too_large
from monitor.sources import DeadLetterError, RevokeHook, SourceRecord
from monitor.sources.lag import ConsumerLag
from monitor.sources.offsets import OffsetTracker, Partition
from monitor.sources.window import PAUSE_AFTER_SECONDS, InFlightWindow
from monitor.telemetry import Exporter

log = structlog.get_logger("monitor.sources.kafka")

#: the most a fetch response may hold (KIP-74: a larger first batch still comes, alone).
#: The client holds up to about twice this per broker while it reads and decodes a response.
FETCH_MAX_BYTES = 16 * 1024 * 1024
#: how often the source notes that its event loop runs (a gap longer than the session
#: timeout between two notes means the group may have given its partitions away)
STALL_TICK_SECONDS = 0.25


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    """The source's listener: it finishes and commits what it can on a revoke and tracks
    what it is assigned, then lets the ledger's listener do the same."""

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
        max_poll_interval_seconds: float = 300.0,
        probe_seconds: float = PROBE_SECONDS,
        ledger: LedgerListener | None = None,
        on_revoke: RevokeHook | None = None,
        held: Callable[[Partition], int] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings
        self.exporter = exporter
        self.topic = settings.kafka_topic
        self.client_id = client_id
        self.revoke_timeout = revoke_timeout_seconds
        self.max_poll_interval = max_poll_interval_seconds
        self._probe: BrokerProbe | None = None
        self._probe_seconds = probe_seconds
        self._ticker = BackgroundTask(self._tick, "kafka-stall-check")
        #: the clock of the stall check, and when the event loop was last seen running
        self._clock = clock
        self._ticked: float | None = None
        self._dead_letters = DeadLetterProducer(settings, client_id=f"{client_id}-dlq")
        self.max_in_flight = settings.max_in_flight
        self.tracker = OffsetTracker()
        #: the backpressure: at most ``max_in_flight`` unfinished records
        self.window = InFlightWindow(
            self.max_in_flight, self.tracker.in_flight, pause_after=pause_after_seconds
        )
        self._lag = ConsumerLag(exporter)
        #: per partition, the newest record time (ms) this process fetched, kept through
        #: reassignments (an older time only means reading more again): where reading goes
        #: on after the broker lost records this replica had read (`_reposition`)
        self._newest: dict[Partition, int] = {}
        #: called at the start of a revoke: the pipeline checkpoints what it finished
        self.on_revoke = on_revoke
        #: records of a partition held on purpose (spans of traces still being buffered):
        #: a revoke does not wait for them (they are re-read by the new owner)
        self.held = held
        #: the budget's ledger, written before each commit (None: offsets only)
        self.ledger = ledger
        self._consumer: AIOKafkaConsumer | None = None
        #: the consumer from the moment it is created (`_consumer`: once started)
        self._member: AIOKafkaConsumer | None = None
        #: the consumer's rebalance listener (subscribed again by the stall fence)
        self._listener = _Rebalance(self)
        self._commit_lock = asyncio.Lock()

    # --- lifecycle

    @property
    def reachable(self) -> bool:
        """Whether the brokers answered the last probe (``/readyz`` check ``kafka``)."""
        return self._probe is not None and self._probe.reachable

    async def start(self) -> None:
        """Start the DLQ producer and the consumer; KafkaUnreachable when no broker answers."""
        release_frames()
        with quiet_client_log():  # its "Unable connect" lines: KafkaUnreachable says why
            await self._start()
        consumer = self._require_consumer()
        self._probe = BrokerProbe(
            consumer.topics, self.settings.kafka_bootstrap_servers, every=self._probe_seconds
        )
        self._probe.start()
        self._ticked = self._clock()
        self._ticker.start()
        log.info("kafka source started", topic=self.topic, group=self.settings.kafka_group_id)

    async def _start(self) -> None:
        options = client_options(self.settings)
        await self._dead_letters.start()
        if self.ledger is not None:
            try:
                await self.ledger.start()
            except LedgerUnavailable:
                await self._dead_letters.stop()
                raise
            except KafkaError as exc:
                await self._dead_letters.stop()
                raise KafkaUnreachable(
                    self.settings.kafka_bootstrap_servers,
                    await why_unreachable(self.settings, exc),
                ) from None
        consumer = AIOKafkaConsumer(
            **options,
            client_id=self.client_id,
            group_id=self.settings.kafka_group_id,
            # static membership: a restarted replica takes over its old member id instead of
            # waiting for the broker to expire it (noida-db never expires a crashed member)
            group_instance_id=self.settings.kafka_group_instance_id or None,
            enable_auto_commit=False,
            # the client decides nothing about a partition without a usable position: a
            # commit missing or out of range is `fetch`'s to settle (`_reposition`)
            auto_offset_reset="none",
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
            # a member that has not polled for this long leaves the group; a paused window
            # still polls (`fetch`), so only a stuck event loop gets there
            max_poll_interval_ms=int(self.max_poll_interval * 1000),
        )
        consumer.subscribe([self.topic], listener=self._listener)
        self._member = consumer
        try:
            await consumer.start()
        except BaseException as exc:
            await consumer.stop()
            await self._dead_letters.stop()
            if self.ledger is not None:
                await self.ledger.stop()
            if isinstance(exc, KafkaError):
                detail = await why_unreachable(self.settings, exc)
                raise KafkaUnreachable(self.settings.kafka_bootstrap_servers, detail) from None
            raise
        self._consumer = consumer

    async def stop(self) -> None:
        """Commit what is finished, leave the group, close both clients."""
        if self._probe is not None:
            await self._probe.stop()
        await self._ticker.stop()
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                await self._commit_with(consumer)
            finally:
                await consumer.stop()
        await self._dead_letters.stop()
        if self.ledger is not None:
            await self.ledger.stop()
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
        return self.window.paused

    async def fetch(self, wait_seconds: float = 0.5) -> list[SourceRecord]:
        """Up to ``max_in_flight`` minus unfinished records; nothing while the window is full.

        Waits up to ``wait_seconds`` for room (half the window finished); a window
        full for ``pause_after_seconds`` pauses the partitions (`InFlightWindow`).
        """
        consumer = self._require_consumer()
        room = self.window.room()
        timeout_ms = int(wait_seconds * 1000)
        if room <= 0:
            await self.window.wait(consumer, wait_seconds)
            if not self.window.paused:
                return []
            # paused: poll all the same (paused partitions return nothing), or after
            # max_poll_interval_ms without a poll the client leaves the group and the
            # partitions move while this replica still holds their records
            room, timeout_ms = 1, 0
        else:
            self.window.opened(consumer)
        try:
            batches = await consumer.getmany(timeout_ms=timeout_ms, max_records=room)
        except NoOffsetForPartitionError as exc:
            await self._reposition(consumer, {exc.args[0]: None})
            return []
        except OffsetOutOfRangeError as exc:
            await self._reposition(consumer, dict(exc.args[0]))
            return []
        except KafkaError as exc:  # the client retries connections itself; report and go on
            log.warning("fetch failed", error=type(exc).__name__)
            await asyncio.sleep(wait_seconds)
            return []
        out: list[SourceRecord] = []
        limit = self.settings.max_record_bytes  # checked here, once: nothing parses them first
        for tp, messages in batches.items():
            key = (tp.topic, tp.partition)
            generation = self.tracker.generation(key)
            if generation is None:
                continue  # revoked while the fetch was in flight
            newest = max((m.timestamp for m in messages), default=-1)
            if newest >= 0:  # (-1: the broker keeps no time)
                self._newest[key] = max(self._newest.get(key, -1), newest)
            for m in messages:
                record = SourceRecord(
                    topic=tp.topic,
                    partition=tp.partition,
                    offset=m.offset,
                    key=m.key,
                    value=m.value,
                    timestamp_ms=m.timestamp,
                    generation=generation,
                    invalid=too_large(len(m.value or b""), limit),
                )
                if self.tracker.start(key, m.offset, generation):
                    out.append(record)
        if out:
            self.exporter.records_consumed.labels(topic=self.topic).inc(len(out))
        self._lag.update(
            self.tracker.partitions(),
            lambda tp: consumer.highwater(TopicPartition(*tp)),
            self.tracker.position,
        )
        # a log that ends before what this replica has already read: the broker lost
        # records (Tansu answers such a fetch with nothing, not with an error)
        past: dict[TopicPartition, int | None] = {}
        for key in self.tracker.partitions():
            tp = TopicPartition(*key)
            high, at = consumer.highwater(tp), self.tracker.position(key)
            if high is not None and at is not None and at > high:
                past[tp] = at
        if past:
            await self._reposition(consumer, past)
        return out

    def finish(self, record: SourceRecord) -> None:
        """The record needs nothing more: its offset may be committed."""
        self.tracker.finish(record.tp, record.offset, record.generation)
        self.window.freed()

    def owns(self, record: SourceRecord) -> bool:
        """False once the record's partition was revoked, or let go by `fence`: its work can
        be dropped."""
        return self.tracker.generation(record.tp) == record.generation

    def fence(self) -> None:
        """Let go of every partition held when the event loop was last seen running a
        session timeout ago: to the group the replica has left, and its partitions may be
        another member's (docs/design.md). Then rejoin the group."""
        now = self._clock()
        last, self._ticked = self._ticked, now
        if last is None or now - last <= self.settings.kafka_session_timeout_ms / 1000:
            return
        held = self.tracker.partitions()
        for tp in held:
            self.tracker.revoke(tp)
        if self.ledger is not None:
            self.ledger.on_partitions_revoked(TopicPartition(*tp) for tp in held)
        self.window.freed()
        # subscribing again makes the consumer join again (a dynamic member leaves first
        # and joins as a new one, a static member keeps its id); the assignment starts
        # each partition from its last commit, and its revoke finds nothing to wait for
        if self._member is not None:
            self._member.unsubscribe()
            self._member.subscribe([self.topic], listener=self._listener)
        log.warning(
            "stood still past the session timeout: work in flight let go, rejoining the group",
            stalled_seconds=round(now - last, 1),
            partitions=sorted(p for _, p in held),
        )

    async def dead_letter(self, record: SourceRecord, reason: str, detail: str) -> None:
        """Send the original key and value to the DLQ topic; raises DeadLetterError."""
        coordinates = (record.topic, record.partition, record.offset)
        try:
            await self._dead_letters.send(coordinates, record.key, record.value, reason, detail)
        except DeadLetterFailed as exc:
            raise DeadLetterError(str(exc), exc.retry_after) from exc
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
            self.fence()
            await asyncio.sleep(STALL_TICK_SECONDS)

    async def _commit_with(self, consumer: AIOKafkaConsumer) -> dict[Partition, int]:
        """Write the ledger's changed entries, then commit the positions that moved.

        The commit goes only once the ledger has kept the spend it covers (a replica
        taking the partitions over then knows it); when the ledger cannot be written the
        positions stay for the next checkpoint.
        """
        async with self._commit_lock:
            if self._stalled():
                # woken past the session timeout (a rejoin's revoke can come before the
                # ticker's `fence`): the partitions may be another member's now, and an
                # entry written for them would hide what their new owner spent
                return {}
            if self.ledger is not None and not await self.ledger.write():
                return {}
            positions = {TopicPartition(*tp): pos for tp, pos in self.tracker.committable().items()}
            if not positions:
                return {}
            offsets = {tp: OffsetAndMetadata(pos, "") for tp, pos in positions.items()}
            try:
                await consumer.commit(offsets)
            except KafkaError as exc:
                # a rebalance or a broker hiccup: the positions stay, the next commit retries
                # (while the brokers are away, the probe has said so: once, not every commit)
                (log.warning if self.reachable else log.debug)(
                    "commit failed", error=type(exc).__name__, partitions=len(offsets)
                )
                return {}
            committed = {(tp.topic, tp.partition): om.offset for tp, om in offsets.items()}
            self.tracker.mark_committed(committed)
            return committed

    def _stalled(self) -> bool:
        """Whether the event loop was last seen running more than a session timeout ago."""
        last = self._ticked
        timeout = self.settings.kafka_session_timeout_ms / 1000
        return last is not None and self._clock() - last > timeout

    def _require_consumer(self) -> AIOKafkaConsumer:
        if self._consumer is None:
            raise RuntimeError("KafkaSource.start() was not awaited")
        return self._consumer

    async def _on_assigned(self, assigned: list[Partition]) -> None:
        for tp in assigned:
            self.tracker.assign(tp)
        member = self._member  # (the first assignment can come while `start` still waits)
        if member is not None and self.settings.kafka_start == "latest":
            try:
                await asyncio.wait_for(
                    self._start_at_end(member, assigned),
                    self.settings.kafka_session_timeout_ms / 1000,
                )
            except (KafkaError, TimeoutError) as exc:
                # the ledger's part below must still run; these partitions then start where
                # a commit says or, without one, where `_reposition` puts them
                log.warning(
                    "could not find where to start reading; a partition without a commit "
                    "is settled at its first fetch",
                    error=type(exc).__name__,
                )
        if member is not None and self.ledger is not None:
            # the budget learns what the new partitions' ledger entries say before any of
            # their records is scored (`assign` would overwrite spend settled earlier):
            # they stay paused while the entries are read
            new = [TopicPartition(*tp) for tp in assigned]
            member.pause(*new)
            try:
                mine = [
                    TopicPartition(t, p) for t, p in self.tracker.partitions() if t == self.topic
                ]
                total = max(len(member.partitions_for_topic(self.topic) or ()), len(mine))
                await self.ledger.on_partitions_assigned(mine, total)
            finally:
                if not self.window.paused:
                    member.resume(*new)
        if self._consumer is not None:
            self.window.assigned(self._consumer)
        log.info("partitions assigned", partitions=sorted(p for _, p in assigned))

    async def _start_at_end(self, member: AIOKafkaConsumer, assigned: list[Partition]) -> None:
        """`kafka_start=latest`: a partition the group has never committed (or whose commit
        the broker lost or expired) is read from its end, not replayed from its start; the
        next checkpoint commits that end, so a restart goes on from it."""
        fresh = []
        for topic, partition in assigned:
            tp = TopicPartition(topic, partition)
            if await member.committed(tp) is None:
                fresh.append(tp)
        if not fresh:
            return
        # a definite position, not `seek_to_end`: the client may already be resetting these
        # partitions to their start, and that answer would then satisfy a reset to the end
        ends = await member.end_offsets(fresh)
        for tp in fresh:
            member.seek(tp, ends[tp])
            self.tracker.begin_at((tp.topic, tp.partition), ends[tp])
        log.info(
            "no committed offset: reading from the end",
            partitions=sorted(tp.partition for tp in fresh),
        )

    async def _reposition(
        self, consumer: AIOKafkaConsumer, lost: dict[TopicPartition, int | None]
    ) -> None:
        """Where each partition of ``lost`` (its unusable position, None without a commit)
        is read from; the client is told to decide nothing (``auto_offset_reset="none"``),
        so it asks here.

        - No committed offset: where ``kafka_start`` says (`_start_at_end` has usually
          settled it on assignment already).
        - Before the log's start (the retention deleted records before they were read):
          the oldest record left.
        - Past the log's end: the broker lost records, ones this replica may have read
          (noida-db's restart loses its log's tail), and gives their offsets to new
          records. Reading goes on from the first record at or after the newest one this
          replica fetched from the partition, found by time: nothing new is skipped and
          the log is not replayed (the client's ``earliest`` replayed all of it, in one
          answer on a broker that ignores the fetch limits). A replica that has fetched
          nothing there since it started knows no time: ``kafka_start`` decides.

        Past either end, the partition is then tracked afresh (its records in flight are
        dropped), and the next checkpoint commits the new position.
        """
        mine = [tp for tp in lost if self.tracker.generation((tp.topic, tp.partition)) is not None]
        if not mine:
            return
        latest = self.settings.kafka_start == "latest"
        try:
            starts = await consumer.beginning_offsets(mine)
            ends = await consumer.end_offsets(mine)
        except KafkaError as error:  # the next fetch raises the same again
            log.warning("could not find where to read on", error=type(error).__name__)
            await asyncio.sleep(0.5)
            return
        times = {
            tp: self._newest[(tp.topic, tp.partition)]
            for tp in mine
            if lost[tp] is not None and (tp.topic, tp.partition) in self._newest
        }
        found: dict[TopicPartition, OffsetAndTimestamp | None] = {}
        if times:
            try:
                found = await consumer.offsets_for_times(times)
            except KafkaError as error:  # a broker without the lookup: as if no time were known
                log.warning("could not look a time up", error=type(error).__name__)
                times = {}
        for tp in mine:
            key, was = (tp.topic, tp.partition), lost[tp]
            at = found.get(tp)
            if was is None:
                why, target = "no committed offset", ends[tp] if latest else starts[tp]
            elif was < starts[tp]:
                why, target = "deleted before it was read", starts[tp]
            elif tp in times:
                why = "past the log's end: the broker lost records"
                target = at.offset if at is not None else ends[tp]
            else:
                why = "past the log's end: the broker lost records"
                target = ends[tp] if latest else starts[tp]
            if was is not None:  # what was in flight there was read past the loss
                self.tracker.assign(key)
            if was is not None or latest:  # (`earliest` commits nothing before a record)
                self.tracker.begin_at(key, target)
            consumer.seek(tp, target)
            (log.info if was is None else log.warning)(
                "partition position not usable: reading from another offset",
                partition=tp.partition,
                reason=why,
                position=was,
                log_start=starts[tp],
                log_end=ends[tp],
                now_at=target,
            )
        self.window.freed()

    def _held(self, tp: Partition) -> int:
        return self.held(tp) if self.held is not None else 0

    async def _on_revoked(self, revoked: list[Partition]) -> None:
        if not revoked:
            return
        deadline = time.monotonic() + self.revoke_timeout
        while time.monotonic() < deadline:
            if self.on_revoke is not None:
                await self.on_revoke(deadline)
            if all(self.tracker.in_flight(tp) <= self._held(tp) for tp in revoked):
                break
            await asyncio.sleep(0.05)
        dropped = sum(self.tracker.in_flight(tp) for tp in revoked)
        if self._consumer is not None:
            await self._commit_with(self._consumer)  # the ledger's entries go first
        if self.ledger is not None:
            self.ledger.on_partitions_revoked(TopicPartition(*tp) for tp in revoked)
        for topic, partition in revoked:
            self.tracker.revoke((topic, partition))
            self._lag.forget(partition)
        self.window.freed()
        log.info(
            "partitions revoked",
            partitions=sorted(p for _, p in revoked),
            dropped_in_flight=dropped,
        )
