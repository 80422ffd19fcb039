"""Where records come from. Every source has the same contract, `Source`, over `SourceRecord`s.

A source hands the pipeline `SourceRecord`s and nothing else: what only it knows
about a record (that it could not decode it, that it left it unread because the
sampler drops it on its key alone) travels in the record's own fields, and the
source finds its own state again when the pipeline hands a record back
(`Source.finish`, `Source.owns`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from monitor.records import InvalidRecord
from monitor.sources.offsets import Partition


@dataclass(frozen=True)
class SourceRecord:
    """One record as the pipeline sees it: a Kafka record, or one a source made of several
    (a trace of OTLP spans)."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int
    generation: int
    #: the source found the record invalid (an OTLP message that does not decode, one
    #: over the size limit): the pipeline dead-letters it with this reason, unparsed
    invalid: InvalidRecord | None = None
    #: the source left the record unread (no value) because the sampler drops it on its
    #: key alone (`monitor.sampling.Sampler.drops_unread`); the pipeline decides on the key
    unread: bool = False

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
