"""``rag-monitor migrate``: apply the backlog's pending Postgres migrations.

See docs/review.md, "The backlog" (the exit codes).
"""

from __future__ import annotations

import argparse

from monitor.commands.backlog import run_action


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """None: the database is the settings' RAG_MONITOR_PG_DSN."""


def handle(args: argparse.Namespace) -> int:
    return run_action(args, "migrate")
