"""Where records come from. Every source has the same contract, `Source`, over `SourceRecord`s."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from monitor.sources.offsets import Partition


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


class Source(Protocol):
    """What the pipeline needs from a source (`monitor.sources.kafka.KafkaSource`)."""

    on_revoke: Callable[[], Awaitable[object]] | None

    async def fetch(self, wait_seconds: float = 0.5) -> list[SourceRecord]: ...

    def finish(self, record: SourceRecord) -> None: ...

    def owns(self, record: SourceRecord) -> bool: ...

    async def dead_letter(self, record: SourceRecord, reason: str, detail: str) -> None: ...

    async def commit(self) -> object: ...
