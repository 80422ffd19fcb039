"""A Kafka producer for the sinks that write to Kafka (the scores topic).

`KafkaPublisher` is the `monitor.sinks.scores_topic.Publisher` the sidecar hands
that sink: an ``acks=all`` producer made with the monitor's client options, raising
the sink's `PublishError` (retryable or not) when Kafka does not take a batch.
"""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, MessageSizeTooLargeError

from monitor.config import Settings
from monitor.kafka.client import client_options
from monitor.kafka.frames import release_frames
from monitor.sinks.scores_topic import PublishError


class KafkaPublisher:
    """``acks=all`` producer; `publish` returns once Kafka has every record of the batch."""

    def __init__(self, settings: Settings, *, client_id: str = "rag-monitor-scores") -> None:
        self.settings = settings
        self.client_id = client_id
        self._producer: AIOKafkaProducer | None = None

    async def start(self) -> None:
        release_frames()
        producer = AIOKafkaProducer(
            **client_options(self.settings), client_id=self.client_id, acks="all"
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
