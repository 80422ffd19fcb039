"""Where scored records go. Every sink has the same tiny contract."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from monitor.records import ScoredRecord


class Sink(Protocol):
    """``write`` must be idempotent per interaction id (records can be re-delivered).

    It raises `SinkError` when the batch is not stored; the pipeline then keeps
    the records' offsets uncommitted and retries. ``name`` labels the sink in
    logs and in ``records_skipped_total{reason="sink_<name>"}``; ``aclose``
    releases what the sink holds (once, at shutdown).
    """

    name: str

    async def write(self, batch: Sequence[ScoredRecord]) -> None: ...

    async def flush(self) -> None: ...

    async def aclose(self) -> None: ...


class SinkError(Exception):
    def __init__(self, sink: str, detail: str, *, retryable: bool = True) -> None:
        super().__init__(f"{sink}: {detail}")
        self.sink = sink
        self.retryable = retryable
