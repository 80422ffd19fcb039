"""Waiting on a condition: the suite's one polling helper (`wait_until` inside a running
event loop, `wait_until_sync` in plain test code)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

Condition = Callable[[], bool] | Callable[[], Awaitable[bool]]


async def wait_until(
    condition: Condition, within: float, what: str, *, interval: float = 0.1
) -> None:
    """Return once ``condition()`` is true; AssertionError naming ``what`` after ``within`` s.

    ``condition`` is a plain or an async callable, asked at least once and then every
    ``interval`` seconds. A check that raises TimeoutError (a broker or database read
    that timed out) counts as "not yet"; any other error ends the wait.
    """
    deadline = time.monotonic() + within
    while True:
        try:
            answer = condition()
            if await answer if isinstance(answer, Awaitable) else answer:
                return
        except TimeoutError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {within:g} s waiting for {what}")
        await asyncio.sleep(interval)


def wait_until_sync(
    condition: Callable[[], bool],
    within: float,
    what: str | Callable[[], str],
    *,
    interval: float = 0.1,
) -> None:
    """`wait_until` for a plain condition outside an event loop (a subprocess's output, a
    broker read through a helper that runs its own loop). ``what`` may be a callable, asked
    only on a timeout (to name the state then: a process's output so far); a condition
    may raise AssertionError to end the wait early (the process it watches exited)."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            named = what() if callable(what) else what
            raise AssertionError(f"timed out after {within:g} s waiting for {named}")
        time.sleep(interval)
