"""Where records come from. Every source has the same contract, `Source`, over `SourceRecord`s.

What only a source knows about a record travels in the record's own fields. See
docs/design.md, "Decisions, and why" (one sampling decision per record).
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Iterator
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
    """The dead-letter topic did not take the record now: it stays unfinished, and the
    pipeline asks again in ``retry_after`` seconds."""

    def __init__(self, detail: str, retry_after: float) -> None:
        super().__init__(detail)
        self.retry_after = retry_after


class RevokeHook:
    """What a source calls at the start of a revoke, before it waits for its records: the
    pipeline's checkpoint, while a pipeline serves the hook (`Pipeline.run`).

    The app makes it before the source and the pipeline and hands it to both
    (`monitor.app.build`), so neither sets hooks on the other; a revoke while no
    pipeline runs calls nothing.
    """

    def __init__(self) -> None:
        self._checkpoint: Callable[[float], Awaitable[object]] | None = None

    @contextlib.contextmanager
    def served_by(self, checkpoint: Callable[[float], Awaitable[object]]) -> Iterator[None]:
        """``checkpoint(deadline)`` answers the revokes that come while the block runs."""
        if self._checkpoint is not None:
            raise RuntimeError("the revoke hook is served by another pipeline")
        self._checkpoint = checkpoint
        try:
            yield
        finally:
            self._checkpoint = None

    async def __call__(self, deadline: float) -> None:
        """Checkpoint what is finished, waiting for a sink no later than ``deadline``
        (`time.monotonic`)."""
        if self._checkpoint is not None:
            await self._checkpoint(deadline)


class Source(Protocol):
    """What the pipeline needs from a source (`monitor.sources.kafka.KafkaSource`)."""

    async def fetch(self, wait_seconds: float = 0.5) -> list[SourceRecord]: ...

    def finish(self, record: SourceRecord) -> None: ...

    def owns(self, record: SourceRecord) -> bool: ...

    def fence(self) -> None:
        """Let go of every partition if the replica stood still so long that its group may
        have given them away; `owns` then says so. Called before work reaches a sink."""

    async def dead_letter(self, record: SourceRecord, reason: str, detail: str) -> None: ...

    async def commit(self) -> object: ...
