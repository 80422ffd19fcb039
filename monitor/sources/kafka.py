"""The Kafka source: the only module of the product that imports aiokafka.

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
answers with the whole rest of each partition). aiokafka (0.14) keeps the
last response frame of a connection referenced until the next frame arrives,
which after a large fetch doubled what the consumer holds, and grows a large
frame in the stream's buffer, copying it on every growth; `_release_frames`
fixes both in the client when its reader is the one we know.

Invalid records go to the dead-letter topic with their original key and
value and the error in headers (``rag-monitor-error-reason``,
``rag-monitor-error-detail``, plus the source coordinates). Lag is the fetch
high watermark minus the commit position (`consumer.highwater`, not
``end_offsets()``, which some brokers report wrong).

With ``kafka_group_instance_id`` set the consumer is a *static* member
(KIP-345): a replica restarted with the same id (a crashed container in the
same pod) rejoins as its old member at once. It does not leave the group when
it stops, so a replica that is gone for good gives up its partitions only when
its session times out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import ssl
import struct
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, ConsumerRebalanceListener, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.conn import AIOKafkaConnection
from aiokafka.errors import (
    KafkaConnectionError,
    KafkaError,
    MessageSizeTooLargeError,
    TopicAlreadyExistsError,
)

from monitor.config import PREFIX, ConfigError, Settings
from monitor.sinks.prometheus import Exporter
from monitor.sources.offsets import OffsetTracker, Partition

log = structlog.get_logger("monitor.sources.kafka")

HEADER_REASON = "rag-monitor-error-reason"
HEADER_DETAIL = "rag-monitor-error-detail"
HEADER_TOPIC = "rag-monitor-source-topic"
HEADER_PARTITION = "rag-monitor-source-partition"
HEADER_OFFSET = "rag-monitor-source-offset"
HEADER_VALUE_DROPPED = "rag-monitor-value-dropped"

#: what a DLQ record may carry at most (larger originals are sent without their value)
DLQ_MAX_REQUEST_BYTES = 16 * 1024 * 1024

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


@dataclass(frozen=True)
class SourceRecord:
    """One Kafka record as the pipeline sees it."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    generation: int

    @property
    def tp(self) -> Partition:
        return (self.topic, self.partition)

    @property
    def size(self) -> int:
        return len(self.value) if self.value is not None else 0


class DeadLetterError(Exception):
    """The dead-letter topic did not take the record (retryable: the record stays unfinished)."""


class KafkaUnreachable(Exception):
    """No broker of ``bootstrap_servers`` could be reached at start (the message says why)."""

    def __init__(self, bootstrap_servers: str, detail: str) -> None:
        super().__init__(f"cannot reach Kafka at {bootstrap_servers}: {detail}")
        self.bootstrap_servers = bootstrap_servers
        self.detail = detail


TLS_PROTOCOLS = ("SSL", "SASL_SSL")


def ssl_context(settings: Settings) -> ssl.SSLContext:
    """The TLS context of every Kafka client; ConfigError naming the setting that is wrong.

    The broker's certificate is always verified: against ``kafka_ssl_cafile``, else the
    system's CAs; its name is checked unless ``kafka_ssl_check_hostname`` is off. A client
    certificate (``kafka_ssl_certfile``, with ``kafka_ssl_keyfile`` unless the key is in
    the same file) is presented when set.
    """
    if settings.kafka_security_protocol not in TLS_PROTOCOLS:
        for name in ("cafile", "certfile", "keyfile"):
            if getattr(settings, f"kafka_ssl_{name}") is not None:
                raise ConfigError(
                    f"{PREFIX}KAFKA_SSL_{name.upper()} is set, but "
                    f"{PREFIX}KAFKA_SECURITY_PROTOCOL is {settings.kafka_security_protocol} "
                    "(SSL or SASL_SSL uses it)"
                )
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH)
    if settings.kafka_ssl_cafile is not None:
        try:
            context.load_verify_locations(cafile=settings.kafka_ssl_cafile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{PREFIX}KAFKA_SSL_CAFILE: cannot load {settings.kafka_ssl_cafile}: "
                f"{_file_error(exc)}"
            ) from None
    if settings.kafka_ssl_keyfile is not None and settings.kafka_ssl_certfile is None:
        raise ConfigError(f"{PREFIX}KAFKA_SSL_KEYFILE is set without {PREFIX}KAFKA_SSL_CERTFILE")
    if settings.kafka_ssl_certfile is not None:
        try:
            context.load_cert_chain(settings.kafka_ssl_certfile, settings.kafka_ssl_keyfile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                f"{PREFIX}KAFKA_SSL_CERTFILE/_KEYFILE: cannot load "
                f"{settings.kafka_ssl_certfile}: {_file_error(exc)}"
            ) from None
    context.check_hostname = settings.kafka_ssl_check_hostname
    return context


def _file_error(exc: OSError | ssl.SSLError) -> str:
    if isinstance(exc, ssl.SSLError):
        return f"not a usable PEM file ({exc.reason or exc})"
    return exc.strerror.lower() if exc.strerror else str(exc)


def _client_options(settings: Settings) -> dict[str, object]:
    options: dict[str, object] = {
        "bootstrap_servers": settings.kafka_bootstrap_servers,
        "security_protocol": settings.kafka_security_protocol,
    }
    if settings.kafka_security_protocol in TLS_PROTOCOLS:
        options["ssl_context"] = ssl_context(settings)
    if settings.kafka_sasl_mechanism:
        options["sasl_mechanism"] = settings.kafka_sasl_mechanism
        options["sasl_plain_username"] = settings.kafka_sasl_username
        if settings.kafka_sasl_password is not None:
            options["sasl_plain_password"] = settings.kafka_sasl_password.get_secret_value()
    return options


@contextlib.contextmanager
def _quiet_client_log() -> Iterator[None]:
    client_log = logging.getLogger("aiokafka")
    level = client_log.level
    client_log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        client_log.setLevel(level)


async def why_unreachable(settings: Settings, error: BaseException) -> str:
    """Why the brokers cannot be reached, in words: each bootstrap address's own failure.

    aiokafka only says "Unable to bootstrap"; a direct connection (TLS when configured,
    with the same context) names the cause: refused, timed out, certificate not trusted.
    """
    tls = settings.kafka_security_protocol in TLS_PROTOCOLS
    context = ssl_context(settings) if tls else None
    addresses = [a.strip() for a in settings.kafka_bootstrap_servers.split(",") if a.strip()]
    failures: list[str] = []
    for address in addresses:
        failure = await _connect_failure(address, context)
        if failure is not None:
            failures.append(failure if len(addresses) == 1 else f"{address}: {failure}")
    if not failures:
        return f"the brokers accept connections, but the client failed: {type(error).__name__}"
    return "; ".join(failures)


async def _connect_failure(address: str, context: ssl.SSLContext | None) -> str | None:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return "not of the form host:port"
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(host.strip("[]"), int(port), ssl=context), 5.0
        )
    except TimeoutError:
        return "no answer within 5 s"
    except ssl.SSLCertVerificationError as exc:
        return f"TLS: certificate verify failed: {exc.verify_message}"
    except ssl.SSLError as exc:
        return f"TLS: {exc.reason or exc}"
    except socket.gaierror as exc:
        return f"cannot resolve {host}: {exc.strerror}"
    except OSError as exc:
        return os.strerror(exc.errno).lower() if exc.errno else str(exc)
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


class _Rebalance(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, source: KafkaSource) -> None:
        self._source = source

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        await self._source._on_revoked([(tp.topic, tp.partition) for tp in revoked])

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        self._source._on_assigned([(tp.topic, tp.partition) for tp in assigned])


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
        self.max_in_flight = settings.max_in_flight
        self.tracker = OffsetTracker()
        #: called at the start of a revoke so the pipeline can checkpoint finished work
        self.on_revoke: Callable[[], Awaitable[object]] | None = None
        #: records of a partition held on purpose (spans of traces still being buffered):
        #: a revoke does not wait for them (they are re-read by the new owner)
        self.held: Callable[[Partition], int] | None = None
        #: called after every assignment with (assigned partitions, the topic's partitions)
        self.on_assigned: Callable[[int, int], None] | None = None
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
        _release_frames()
        with _quiet_client_log():  # its "Unable connect" lines: KafkaUnreachable says why
            await self._start()
        self.reachable = True
        self._watcher = asyncio.create_task(self._watch(), name="kafka-watch")
        log.info("kafka source started", topic=self.topic, group=self.settings.kafka_group_id)

    async def _start(self) -> None:
        options = _client_options(self.settings)
        producer = AIOKafkaProducer(
            **options,
            client_id=f"{self.client_id}-dlq",
            acks="all",
            max_request_size=DLQ_MAX_REQUEST_BYTES,
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
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            try:
                await self._commit_with(consumer)
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
        """False once the record's partition was revoked (its work can be dropped)."""
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

    async def _commit_with(self, consumer: AIOKafkaConsumer) -> dict[Partition, int]:
        async with self._commit_lock:
            positions = self.tracker.committable()
            if not positions:
                return {}
            offsets = {TopicPartition(t, p): pos for (t, p), pos in positions.items()}
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
            return positions

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

    def _on_assigned(self, assigned: list[Partition]) -> None:
        for tp in assigned:
            self.tracker.assign(tp)
        if self._paused and self._consumer is not None:
            self._consumer.pause(*self._consumer.assignment())
        log.info("partitions assigned", partitions=sorted(p for _, p in assigned))
        if self.on_assigned is not None and self._member is not None:
            # (the first assignment can come while `start` is still waiting for the consumer)
            mine = sum(1 for topic, _ in self.tracker.partitions() if topic == self.topic)
            total = len(self._member.partitions_for_topic(self.topic) or ())
            self.on_assigned(mine, max(total, mine))

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
            await self._commit_with(self._consumer)
        for topic, partition in revoked:
            self.tracker.revoke((topic, partition))
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


# --- aiokafka's connection reader, releasing each frame once handled


async def _read_frames(self_ref: Callable[[], Any]) -> None:
    """`AIOKafkaConnection._read` (as in aiokafka 0.14) with two changes, both about memory.

    1. ``del resp`` once a frame is handled. The original keeps the last frame in
       ``resp`` while it waits for the next one, so a connection's last fetch
       response (up to ``fetch_max_bytes``; the whole rest of every partition from a
       broker that ignores it) stays in memory next to the records decoded from it
       for as long as no other response comes on that connection — while the
       consumer is busy, for good.
    2. A large frame is read into a buffer of its size (`_read_frame`), not grown
       chunk by chunk in the stream's buffer, whose every growth copies it.
    """
    self = self_ref()
    if self is None:
        return
    reader = self._reader
    del self
    while True:
        resp = await reader.readexactly(4)
        (size,) = struct.unpack(">i", resp)
        resp = await _read_frame(reader, size)
        self = self_ref()
        if self is None:
            return
        self._handle_frame(resp)
        del self, resp


#: frames up to this size are read in one piece (the stream's own buffer)
_FRAME_PIECE = 1 << 20


async def _read_frame(reader: asyncio.StreamReader, size: int) -> bytes:
    """``size`` bytes from ``reader``; a large frame costs twice its size at most, briefly."""
    if size <= _FRAME_PIECE:
        return await reader.readexactly(size)
    frame = bytearray(size)
    with memoryview(frame) as view:
        for start in range(0, size, _FRAME_PIECE):
            end = min(size, start + _FRAME_PIECE)
            view[start:end] = await reader.readexactly(end - start)
    return bytes(frame)


#: the local names of the aiokafka reader `_read_frames` replaces, in order
_KNOWN_READER = ("self_ref", "self", "reader", "resp", "size")


def _release_frames() -> bool:
    """Install `_read_frames` if aiokafka's reader is the one it was written for; True if so.

    The check is structural (same arguments and local names, same calls), so a
    changed reader in a later aiokafka is left alone rather than replaced blindly.
    """
    current = AIOKafkaConnection.__dict__.get("_read")
    function = getattr(current, "__func__", None)
    if function is _read_frames:
        return True
    code = getattr(function, "__code__", None)
    if (
        code is None
        or code.co_varnames != _KNOWN_READER
        or not {"readexactly", "_handle_frame", "_reader"} <= set(code.co_names)
    ):
        return False
    AIOKafkaConnection._read = staticmethod(_read_frames)
    return True


# --- helpers for the embedded broker and the demo (and the bench and the tests)


async def create_topics(
    bootstrap_servers: str,
    topics: Mapping[str, int],
    *,
    max_message_bytes: int | None = None,
    ready_within: float = 20.0,
) -> None:
    """Create ``topics`` (name → partitions); existing ones are left alone. Retries until ready."""
    configs = {"max.message.bytes": str(max_message_bytes)} if max_message_bytes else {}
    deadline = time.monotonic() + ready_within
    while True:
        admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=5000)
        try:
            await admin.start()
            try:
                await admin.create_topics(
                    [
                        NewTopic(name, n, replication_factor=1, topic_configs=configs)
                        for name, n in topics.items()
                    ]
                )
            finally:
                await admin.close()
            return
        except TopicAlreadyExistsError:
            return
        except (KafkaConnectionError, KafkaError, OSError):
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def produce(
    bootstrap_servers: str,
    topic: str,
    records: Iterable[tuple[bytes | None, bytes | None]],
    *,
    partition: int | None = None,
    per_second: float | None = None,
) -> list[tuple[int, int]]:
    """Send ``(key, value)`` pairs and wait for every ack; returns (partition, offset) of each.

    With ``per_second``, record ``i`` is sent ``i / per_second`` seconds after the first.
    """
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers, acks="all", max_request_size=DLQ_MAX_REQUEST_BYTES
    )
    await producer.start()
    try:
        futures = []
        started = time.monotonic()
        for i, (key, value) in enumerate(records):
            if per_second:
                await asyncio.sleep(max(0.0, started + i / per_second - time.monotonic()))
            futures.append(await producer.send(topic, value=value, key=key, partition=partition))
        await producer.flush()
        return [((meta := await future).partition, meta.offset) for future in futures]
    finally:
        await producer.stop()


async def committed_offsets(
    bootstrap_servers: str, group_id: str, topic: str, partitions: int
) -> dict[int, int | None]:
    """The group's committed position per partition (None when nothing was committed)."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers, group_id=group_id, enable_auto_commit=False
    )
    await consumer.start()
    try:
        out: dict[int, int | None] = {}
        for p in range(partitions):
            out[p] = await consumer.committed(TopicPartition(topic, p))
        return out
    finally:
        await consumer.stop()


# --- a producer for sinks that write to Kafka (the scores topic)


class PublishError(Exception):
    """Kafka did not take a batch; ``retryable`` False for a record it will never take."""

    def __init__(self, detail: str, *, retryable: bool) -> None:
        super().__init__(detail)
        self.retryable = retryable


class KafkaPublisher:
    """``acks=all`` producer; `publish` returns once Kafka has every record of the batch."""

    def __init__(self, settings: Settings, *, client_id: str = "rag-monitor-scores") -> None:
        self.settings = settings
        self.client_id = client_id
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        _release_frames()
        producer = AIOKafkaProducer(
            **_client_options(self.settings), client_id=self.client_id, acks="all"
        )
        await producer.start()
        self._producer = producer

    async def stop(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    async def publish(self, topic: str, records: Iterable[tuple[bytes | None, bytes]]) -> None:
        producer = self._producer
        if producer is None:
            raise PublishError("the publisher is not started", retryable=True)
        try:
            futures = [await producer.send(topic, value=v, key=k) for k, v in records]
            for future in futures:
                await future
        except MessageSizeTooLargeError as exc:
            raise PublishError(type(exc).__name__, retryable=False) from exc
        except KafkaError as exc:
            raise PublishError(type(exc).__name__, retryable=True) from exc
