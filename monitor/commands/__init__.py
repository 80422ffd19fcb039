"""The `rag-monitor` commands, one module each (see `monitor.cli`), and what they share:
how a handler reads its settings and says why it stops, and the options more than one
command takes (the exit codes: `monitor.commands.exits`).
"""

from __future__ import annotations

import argparse
import sys
from typing import cast

from monitor.commands.exits import EXIT_USAGE
from monitor.config import Settings, load_settings
from monitor.logging import configure_logging


def fail(message: object, code: int = EXIT_USAGE, *, command: str = "") -> int:
    """Say ``rag-monitor[ COMMAND]: MESSAGE`` on stderr; returns ``code``, the exit code."""
    prefix = f"rag-monitor {command}" if command else "rag-monitor"
    print(f"{prefix}: {message}", file=sys.stderr)
    return code


def command_settings(args: argparse.Namespace) -> Settings:
    """The settings of ``--config`` and the environment, their log level applied."""
    settings = load_settings(cast(str | None, args.config))
    configure_logging(settings.log_level, force=True)
    return settings


def backlog_dsn(settings: Settings) -> str | None:
    """The backlog's Postgres DSN; None, having said how to set it, when there is none."""
    if settings.pg_dsn is None:
        fail("set RAG_MONITOR_PG_DSN (or pg_dsn in --config)")
        return None
    return settings.pg_dsn.get_secret_value()


def add_judge_option(parser: argparse.ArgumentParser) -> None:
    """``--judge auto|llm|local``: which judge scores."""
    parser.add_argument(
        "--judge",
        choices=("auto", "llm", "local"),
        default="auto",
        help="llm: the OpenAI-compatible endpoint of RAG_MONITOR_JUDGE_BASE_URL; local: the "
        "in-process judge; auto (default): llm when the base URL is set, else local",
    )
