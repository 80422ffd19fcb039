"""`BackgroundTask`: one coroutine run beside the rest until it is stopped (the backlog's
gauges, the broker probe)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any


class BackgroundTask:
    """Runs ``run()`` as a task named ``name``: `start` starts it once, `stop` cancels it
    and waits until it has ended. Construction starts nothing."""

    def __init__(self, run: Callable[[], Coroutine[Any, Any, None]], name: str) -> None:
        self.run = run
        self.name = name
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=self.name)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
