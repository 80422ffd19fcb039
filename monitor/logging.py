"""JSON log lines on stderr, configured once per process, for structlog and the stdlib alike.

See docs/design.md, "Contracts" (logs).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog
from structlog.stdlib import ProcessorFormatter

#: fields that may hold user text or credentials; never written as they are
REDACTED_FIELDS = frozenset(
    {
        "user_input",
        "question",
        "query",
        "response",
        "answer",
        "retrieved_contexts",
        "contexts",
        "documents",
        "reference",
        "ground_truth",
        "value",
        "text",
        "prompt",
        "api_key",
        "judge_api_key",
        "password",
        "secret",
        "token",
        "dsn",
        "pg_dsn",
        "authorization",
    }
)

#: library loggers held at warning or above: at debug the SDKs log request bodies
NOISY_LOGGERS = ("aiokafka", "httpx", "httpx2", "httpcore", "openai")

#: the fields every line starts with, in this order
_HEAD = ("timestamp", "level", "logger", "event")

_configured = False


def redact_fields(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for key in event.keys() & REDACTED_FIELDS:
        event[key] = "[redacted]"
    return event


def _head_first(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    """``timestamp``, ``level``, ``logger``, ``event`` lead the line (easier to read)."""
    head = {key: event.pop(key) for key in _HEAD if key in event}
    head.update(event)
    return head


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """A handler on whatever ``sys.stderr`` is when a line is written, not when it was made
    (a test that swaps stderr, an in-process command, gets the lines where it looks)."""

    @property
    def stream(self) -> TextIO:
        return sys.stderr

    @stream.setter
    def stream(self, _value: object) -> None:
        pass


def configure_logging(
    level: str = "info", stream: TextIO | None = None, *, force: bool = False
) -> None:
    """Send structlog and stdlib logging to ``stream`` (default: stderr) as JSON lines.

    The command line calls it before any command runs, so no line ever reaches
    stdout (structlog's own default). Later calls are no-ops, unless ``force``
    (a command that has read its settings' level; tests, to capture the lines):
    the handler, its stream and the stdlib levels are then replaced. Loggers are
    not cached, so every structlog logger follows the latest configuration (a
    cached one would keep the level of its first use, and structlog's
    ``capture_logs`` could not see it).
    """
    global _configured
    if _configured and not force:
        return
    _configured = True
    numeric = logging.getLevelNamesMapping()[level.upper()]
    stamp = structlog.processors.TimeStamper(fmt="iso", utc=True)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.stdlib.add_log_level,
            structlog.stdlib.add_logger_name,
            stamp,
            ProcessorFormatter.wrap_for_formatter,
        ],
        # drops calls below the level before any processor runs (the cheap path)
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.stdlib.LoggerFactory(),
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream) if stream is not None else _StderrHandler()
    handler.setFormatter(
        ProcessorFormatter(
            # records that did not come through structlog: ours and the libraries'
            foreign_pre_chain=[
                structlog.contextvars.merge_contextvars,
                structlog.stdlib.add_log_level,
                structlog.stdlib.add_logger_name,
                structlog.stdlib.ExtraAdder(),
                stamp,
            ],
            # every line, from either path
            processors=[
                ProcessorFormatter.remove_processors_meta,
                redact_fields,
                structlog.processors.format_exc_info,
                _head_first,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    for noisy in NOISY_LOGGERS:
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
