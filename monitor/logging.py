"""structlog JSON logs, configured once per process.

One JSON object per line on stderr: ``timestamp``, ``level``, ``logger``,
``event`` and the event's fields. Logs carry ids, offsets, reasons and counts,
never interaction text or secrets: as a last line of defence, fields whose
names say they hold text or secrets are replaced by ``"[redacted]"``.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import MutableMapping
from typing import Any, TextIO

import structlog

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

_configured = False


def redact_fields(
    _logger: object, _method: str, event: MutableMapping[str, Any]
) -> MutableMapping[str, Any]:
    for key in event.keys() & REDACTED_FIELDS:
        event[key] = "[redacted]"
    return event


def configure_logging(level: str = "info", stream: TextIO | None = None) -> None:
    """Set up structlog (and the stdlib root logger) for JSON lines. Later calls are no-ops."""
    global _configured
    if _configured:
        return
    _configured = True
    numeric = logging.getLevelNamesMapping()[level.upper()]
    out = stream if stream is not None else sys.stderr
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            redact_fields,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(out),
        cache_logger_on_first_use=True,
    )
    # libraries (aiokafka, asyncpg) log through the stdlib: same stream, JSON too
    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                redact_fields,
                structlog.processors.JSONRenderer(),
            ],
            foreign_pre_chain=[
                structlog.stdlib.add_log_level,
                structlog.stdlib.add_logger_name,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
            ],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
    for noisy in ("aiokafka", "httpx", "httpx2", "httpcore", "openai"):
        logging.getLogger(noisy).setLevel(max(numeric, logging.WARNING))
