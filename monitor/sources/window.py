"""The in-flight window: the Kafka source's backpressure (docs/design.md, "The Kafka source").

`InFlightWindow` bounds the unfinished records, waits for room when the window is
full, and pauses the consumer's partitions only once it has stayed full for a stall.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, Protocol

import structlog

log = structlog.get_logger("monitor.sources.window")

#: how long the window must stay full before the partitions are paused
PAUSE_AFTER_SECONDS = 30.0


class Pausable(Protocol):
    """The part of the consumer the window uses (`aiokafka.AIOKafkaConsumer`)."""

    def assignment(self) -> Any: ...

    def pause(self, *partitions: Any) -> None: ...

    def resume(self, *partitions: Any) -> None: ...


class InFlightWindow:
    """At most ``size`` unfinished records; room again once half of them are finished.

    A full window usually means the pipeline is busy, and the partitions stay
    fetchable (the client holds at most one response per partition). Only a window
    full for ``pause_after`` seconds pauses them: aiokafka drops what it has buffered
    for a paused partition, so every pause costs a new fetch.
    """

    def __init__(
        self,
        size: int,
        in_flight: Callable[[], int],
        *,
        pause_after: float = PAUSE_AFTER_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.size = size
        self.pause_after = pause_after
        self._in_flight = in_flight
        self._clock = clock
        self._paused = False
        #: since when the window has been full (None: there is room)
        self._full_since: float | None = None
        self._room = asyncio.Event()

    @property
    def paused(self) -> bool:
        """True while the partitions are paused (the window has been full for a stall)."""
        return self._paused

    def room(self) -> int:
        """How many more records may be fetched now (0 or less: full)."""
        return self.size - self._in_flight()

    async def wait(self, consumer: Pausable, seconds: float) -> None:
        """The window is full: wait up to ``seconds`` for room; pause a stall."""
        now = self._clock()
        if self._full_since is None:
            self._full_since = now
        self._room.clear()
        try:
            await asyncio.wait_for(self._room.wait(), seconds)
        except TimeoutError:
            if self._clock() - self._full_since >= self.pause_after:
                self._pause(consumer)

    def opened(self, consumer: Pausable) -> None:
        """There is room: a stall is over; paused partitions resume at half the window."""
        self._full_since = None
        if self._paused and self._in_flight() <= self.size // 2:
            consumer.resume(*consumer.assignment())
            self._paused = False
            log.info("backpressure: partitions resumed", in_flight=self._in_flight())

    def freed(self) -> None:
        """Records were finished or let go: a waiting fetch goes on once half are done."""
        if self._in_flight() <= self.size // 2:
            self._room.set()

    def assigned(self, consumer: Pausable) -> None:
        """New partitions come paused while the window is paused."""
        if self._paused:
            consumer.pause(*consumer.assignment())

    def _pause(self, consumer: Pausable) -> None:
        if not self._paused:
            consumer.pause(*consumer.assignment())
            self._paused = True
            log.info("backpressure: partitions paused", in_flight=self._in_flight())
