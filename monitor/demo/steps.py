"""One step of the demo, awaited under the stop event and a deadline; `Interrupted` when the
stop event (SIGINT/SIGTERM) ends it first, `DemoError` when the deadline does.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import TypeVar

from monitor.demo import DemoError

T = TypeVar("T")

#: the longest any single setup or bookkeeping step may take
PHASE_TIMEOUT = 120.0


class Interrupted(Exception):
    """SIGINT/SIGTERM arrived while a phase was running."""


async def until(
    awaitable: Awaitable[T],
    stop: asyncio.Event,
    *,
    what: str = "a step",
    within: float = PHASE_TIMEOUT,
) -> T:
    """Await ``awaitable`` unless ``stop`` is set first (then raise Interrupted) or it
    takes longer than ``within`` seconds (DemoError); either way it is cancelled."""
    if stop.is_set():
        if asyncio.iscoroutine(awaitable):
            awaitable.close()
        raise Interrupted
    task = asyncio.ensure_future(awaitable)
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, stopper}, timeout=within, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if task.done():
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError, Exception):
        await task
    if stop.is_set():
        raise Interrupted
    raise DemoError(f"{what} did not finish in {within:g} s")


async def in_thread(function: Callable[[], T], stop: asyncio.Event) -> T:
    """Run a blocking start in a thread; a stop waits for it (a thread cannot be cancelled)."""
    task = asyncio.ensure_future(asyncio.to_thread(function))
    stopper = asyncio.create_task(stop.wait())
    try:
        await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    if not task.done():
        with contextlib.suppress(Exception):
            await task  # let it finish so that cleanup can stop what it started
        raise Interrupted
    result = task.result()
    if stop.is_set():
        raise Interrupted
    return result
