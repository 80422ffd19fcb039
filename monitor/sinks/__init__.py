"""Where scored records go. Every sink has the same tiny contract, and two ways to fail."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from monitor.records import ScoredRecord


class Sink(Protocol):
    """``write`` must be idempotent per interaction id (records can be re-delivered).

    A sink that cannot take the batch now (Postgres away, Kafka not answering)
    raises `SinkBackpressure` with how long to wait: the pipeline keeps the records
    pending, their offsets uncommitted, and asks again after that. A sink that will
    never take a record (the data itself is refused) raises `SinkError`: the
    pipeline narrows it to the records refused and gives up on those. ``name``
    labels the sink in logs and in ``records_skipped_total{reason="sink_<name>"}``;
    ``aclose`` releases what the sink holds (once, at shutdown).
    """

    name: str

    async def write(self, batch: Sequence[ScoredRecord]) -> None: ...

    async def flush(self) -> None: ...

    async def aclose(self) -> None: ...


class SinkError(Exception):
    """The sink refuses the batch for good: writing it again cannot succeed."""

    def __init__(self, sink: str, detail: str) -> None:
        super().__init__(f"{sink}: {detail}")
        self.sink = sink
        self.detail = detail


class SinkBackpressure(Exception):
    """The sink cannot take the batch now; ask again in ``retry_after`` seconds (the shape
    of quix-streams' ``SinkBackpressureError``). Nothing is given up on."""

    def __init__(self, sink: str, detail: str, retry_after: float) -> None:
        super().__init__(f"{sink}: {detail}")
        self.sink = sink
        self.detail = detail
        self.retry_after = retry_after
