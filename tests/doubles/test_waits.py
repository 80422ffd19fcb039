"""tests.support.waits: the one polling helper."""

from __future__ import annotations

import time

import pytest

from tests.support.waits import wait_until


async def test_returns_as_soon_as_a_plain_condition_holds() -> None:
    calls: list[float] = []

    def third_time() -> bool:
        calls.append(time.monotonic())
        return len(calls) == 3

    await wait_until(third_time, 10, "the third call", interval=0.01)
    assert len(calls) == 3


async def test_awaits_an_async_condition() -> None:
    calls = 0

    async def second_time() -> bool:
        nonlocal calls
        calls += 1
        return calls == 2

    await wait_until(second_time, 10, "the second call", interval=0.01)
    assert calls == 2


async def test_a_condition_that_never_holds_fails_naming_what_and_how_long() -> None:
    started = time.monotonic()
    with pytest.raises(AssertionError, match=r"timed out after 0\.3 s waiting for the moon"):
        await wait_until(lambda: False, 0.3, "the moon", interval=0.05)
    assert 0.3 <= time.monotonic() - started < 5


async def test_a_timed_out_read_is_not_yet_and_other_errors_end_the_wait() -> None:
    calls = 0

    async def slow_then_true() -> bool:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise TimeoutError
        return True

    await wait_until(slow_then_true, 10, "the read", interval=0.01)
    assert calls == 2

    def broken() -> bool:
        raise KeyError("no such metric")

    with pytest.raises(KeyError):
        await wait_until(broken, 10, "a broken check")


async def test_the_condition_is_asked_at_least_once_even_with_no_time() -> None:
    asked: list[float] = []

    def now() -> bool:
        asked.append(time.monotonic())
        return True

    started = time.monotonic()
    await wait_until(now, 0, "an immediate answer", interval=10)
    assert len(asked) == 1 and asked[0] - started < 1  # asked once, at once: no interval slept
