"""The review tests' app: the review web app over the `backlog` fixture's store, on a free
loopback port (no tokens needed there)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from monitor.review.app import ReviewApp
from monitor.sinks.backlog import BacklogSink


@pytest.fixture
async def app(backlog: BacklogSink) -> AsyncIterator[ReviewApp]:
    review = ReviewApp(backlog.store)
    await review.start("127.0.0.1", 0)
    try:
        yield review
    finally:
        await review.stop()
