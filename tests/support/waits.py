"""Waiting on a condition inside a running event loop."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable


async def run_until(done: Callable[[], bool], within: float) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if done():
            return
        await asyncio.sleep(0.1)
