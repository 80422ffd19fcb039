"""Kafka helpers only the tests and the benchmarks use: a broker with extras, replay,
read a topic, bare consume.

The product's own Kafka code stays in the product: the source in
`monitor.sources.kafka`, the publisher and the helpers the demo needs
(`create_topics`, `produce`, `committed_offsets`) in `monitor.kafka`, the demo's
broker in `monitor.demo.broker`.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition

from monitor.kafka.client import MAX_REQUEST_BYTES
from monitor.kafka.topics import create_topics
from tests.support.embedded import Broker, BrokerError

#: picks the tests' broker (``noida``, the default, or ``tansu``); the suite's own
#: prefix, which the product never reads
BROKER_ENV = "RAGMON_TEST_BROKER"


class LabBroker(Broker):
    """The demo's broker plus what only tests and benchmarks need: topics made from
    synchronous code, and (Tansu only) another port advertised to clients."""

    def __init__(self, kind: str | None = None, *, advertised_port: int | None = None) -> None:
        """``kind``: by default `BROKER_ENV`'s, else noida; ``advertised_port``: the port
        clients are told to use (a TLS proxy's)."""
        super().__init__(kind or os.environ.get(BROKER_ENV) or "noida")
        if advertised_port is not None and self.kind != "tansu":
            raise BrokerError(f"{self.kind} advertises the address it listens on, nothing else")
        self.advertised_port = advertised_port

    def _argv(self, data: Path) -> list[str]:
        argv = super()._argv(data)
        if self.advertised_port is not None:
            flag = argv.index("--advertised-listener-url") + 1
            argv[flag] = f"tcp://127.0.0.1:{self.advertised_port}"
        return argv

    def _wait_serving(self, ready_within: float) -> None:
        if self.advertised_port not in (None, self.port):
            return  # clients must go through what listens there (a TLS proxy): not yet up
        super()._wait_serving(ready_within)

    def create_topics(
        self, topics: Mapping[str, int], *, max_message_bytes: int | None = None
    ) -> None:
        """Create topics (name → partitions) from synchronous code."""
        asyncio.run(
            create_topics(self.bootstrap_servers, topics, max_message_bytes=max_message_bytes)
        )


async def reset_offsets(
    bootstrap_servers: str,
    group_id: str,
    topic: str,
    partitions: int,
    offset: int = 0,
    *,
    session_timeout_ms: int = 10_000,
    heartbeat_interval_ms: int = 3_000,
    within_seconds: float = 30.0,
) -> None:
    """Commit ``offset`` on every partition for the group (which must have no other member).

    Joins the group as a member, commits, leaves: some brokers (Tansu) refuse
    commits from a consumer outside the group. Used to replay a topic.
    """
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap_servers,
        group_id=group_id,
        enable_auto_commit=False,
        session_timeout_ms=session_timeout_ms,
        heartbeat_interval_ms=heartbeat_interval_ms,
    )
    await consumer.start()
    try:
        deadline = time.monotonic() + within_seconds
        while len(consumer.assignment()) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(
                    f"group {group_id}: {len(consumer.assignment())} of {partitions} "
                    f"partitions assigned after {within_seconds} s"
                )
            await consumer.getmany(timeout_ms=200, max_records=1)
        await consumer.commit(dict.fromkeys(consumer.assignment(), offset))
    finally:
        await consumer.stop()


@dataclass(frozen=True)
class ConsumedRecord:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


async def read_topic(
    bootstrap_servers: str,
    topic: str,
    *,
    expected: int | None = None,
    within_seconds: float = 20.0,
    quiet_seconds: float | None = None,
) -> list[ConsumedRecord]:
    """Read a whole topic without a group: until ``expected`` records, or until none has
    come for ``quiet_seconds``, or the timeout."""
    consumer = AIOKafkaConsumer(
        topic,
        bootstrap_servers=bootstrap_servers,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_partition_fetch_bytes=MAX_REQUEST_BYTES,
    )
    await consumer.start()
    out: list[ConsumedRecord] = []
    try:
        deadline = last = time.monotonic()
        deadline += within_seconds
        while time.monotonic() < deadline:
            if expected is not None and len(out) >= expected:
                break
            if quiet_seconds is not None and time.monotonic() - last >= quiet_seconds:
                break
            batches = await consumer.getmany(timeout_ms=200)
            for messages in batches.values():
                if messages:
                    last = time.monotonic()
                out.extend(
                    ConsumedRecord(m.partition, m.offset, m.key, m.value, tuple(m.headers))
                    for m in messages
                )
        return out
    finally:
        await consumer.stop()


@dataclass(frozen=True)
class BareConsume:
    """What `bare_consume` read, in ``seconds`` from the partition assignment to the last record.

    The clock starts when the group join has assigned the partitions, so the join and
    the final commit are outside the measurement; the first fetch is inside it.
    """

    records: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.records / self.seconds if self.seconds > 0 else 0.0


class _AssignedAt(ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self) -> None:
        self.at: float | None = None

    async def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        return None

    async def on_partitions_assigned(self, assigned: Iterable[TopicPartition]) -> None:
        if self.at is None:
            self.at = time.perf_counter()


async def bare_consume(
    bootstrap_servers: str, topic: str, group_id: str, count: int, within_seconds: float = 60.0
) -> BareConsume:
    """A plain consume loop (the benchmark's baseline): read ``count`` records, no work."""
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=group_id,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
    )
    assigned = _AssignedAt()
    consumer.subscribe([topic], listener=assigned)
    await consumer.start()
    seen = 0
    last = 0.0
    try:
        deadline = time.monotonic() + within_seconds
        while seen < count and time.monotonic() < deadline:
            batches = await consumer.getmany(timeout_ms=200)
            got = sum(len(m) for m in batches.values())
            if got:
                last = time.perf_counter()
                seen += got
        await consumer.commit()
        return BareConsume(seen, last - (assigned.at or last))
    finally:
        await consumer.stop()
