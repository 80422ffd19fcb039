"""A base for the suite's own sinks (`monitor.sinks.Sink`): a test writes `write`, and
flushing and closing do nothing unless it says otherwise."""

from __future__ import annotations


class SinkBase:
    """Nothing to flush, nothing to close."""

    async def flush(self) -> None:
        return None

    async def aclose(self) -> None:
        return None
