"""The dead-letter producer: an invalid record's original key and value, with why in headers.

Headers: ``rag-monitor-error-reason`` and ``-detail``, and the record's source topic,
partition and offset; a value too large for the topic is dropped and
``rag-monitor-value-dropped: too_large`` says so (docs/operations.md).
"""

from __future__ import annotations

from aiokafka import AIOKafkaProducer
from aiokafka.errors import KafkaError, MessageSizeTooLargeError

from monitor.backoff import Backoff
from monitor.config import Settings
from monitor.kafka.client import (
    MAX_REQUEST_BYTES,
    KafkaUnreachable,
    client_options,
    why_unreachable,
)

HEADER_REASON = "rag-monitor-error-reason"
HEADER_DETAIL = "rag-monitor-error-detail"
HEADER_TOPIC = "rag-monitor-source-topic"
HEADER_PARTITION = "rag-monitor-source-partition"
HEADER_OFFSET = "rag-monitor-source-offset"
HEADER_VALUE_DROPPED = "rag-monitor-value-dropped"


class DeadLetterFailed(Exception):
    """The dead-letter topic did not take the record (the message names the error class);
    ask again in ``retry_after`` seconds."""

    def __init__(self, detail: str, retry_after: float) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class DeadLetterProducer:
    """An ``acks=all`` producer to ``kafka_dlq_topic``. Construction opens nothing."""

    def __init__(self, settings: Settings, *, client_id: str = "rag-monitor-dlq") -> None:
        self.settings = settings
        self.client_id = client_id
        self._producer: AIOKafkaProducer | None = None
        #: the wait a failed send asks for, longer with each failure in a row
        self._backoff = Backoff()

    async def start(self) -> None:
        """Connect; KafkaUnreachable (saying why) when no broker answers."""
        producer = AIOKafkaProducer(
            **client_options(self.settings),
            client_id=self.client_id,
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

    async def stop(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    async def send(
        self,
        source: tuple[str, int, int],
        key: bytes | None,
        value: bytes | None,
        reason: str,
        detail: str,
    ) -> None:
        """Send the original ``key`` and ``value`` of the record at ``source`` (topic,
        partition, offset); returns once the topic has it, else DeadLetterFailed (with the
        wait to ask for)."""
        producer = self._producer
        if producer is None:
            raise DeadLetterFailed(
                "the dead-letter producer is not started", self._backoff.failed()
            )
        topic, partition, offset = source
        headers = [
            (HEADER_REASON, reason.encode()),
            (HEADER_DETAIL, detail[:1000].encode("utf-8", "replace")),
            (HEADER_TOPIC, topic.encode()),
            (HEADER_PARTITION, str(partition).encode()),
            (HEADER_OFFSET, str(offset).encode()),
        ]
        dlq = self.settings.kafka_dlq_topic
        try:
            try:
                await producer.send_and_wait(dlq, value=value, key=key, headers=headers)
            except MessageSizeTooLargeError:
                headers.append((HEADER_VALUE_DROPPED, b"too_large"))
                await producer.send_and_wait(dlq, value=None, key=key, headers=headers)
        except KafkaError as exc:
            raise DeadLetterFailed(type(exc).__name__, self._backoff.failed()) from exc
        self._backoff.succeeded()
