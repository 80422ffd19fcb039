"""structlog's captured events at a chosen level (the session's logging filters at info)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import structlog
from structlog.testing import capture_logs
from structlog.typing import EventDict


@contextmanager
def captured_logs(level: str = "debug") -> Iterator[list[EventDict]]:
    """`structlog.testing.capture_logs`, with loggers passing ``level`` and above meanwhile."""
    wrapper = structlog.get_config()["wrapper_class"]
    numeric = logging.getLevelNamesMapping()[level.upper()]
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(numeric))
    try:
        with capture_logs() as logs:
            yield logs
    finally:
        structlog.configure(wrapper_class=wrapper)
