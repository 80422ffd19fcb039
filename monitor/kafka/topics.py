"""Topics made, records sent, committed positions read: the demo's plain Kafka helpers.

The sidecar does not use them; see docs/demo.md.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Mapping

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaConnectionError, KafkaError, TopicAlreadyExistsError

from monitor.kafka.client import MAX_REQUEST_BYTES


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
        bootstrap_servers=bootstrap_servers, acks="all", max_request_size=MAX_REQUEST_BYTES
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
