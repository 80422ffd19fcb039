"""``rag-monitor run``: the sidecar.

See docs/operations.md (running it) and docs/design.md, "Contracts" (exit codes).
"""

from __future__ import annotations

import argparse
import asyncio

from monitor.allocator import pin_mmap_threshold
from monitor.app import serve
from monitor.commands import command_settings, fail
from monitor.kafka.client import KafkaUnreachable

#: no Kafka broker answered at start (settings errors exit 2, a clean shutdown 0)
EXIT_KAFKA_UNREACHABLE = 3


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "run",
        help="the sidecar: consume Kafka, score a sample within the token budget, export metrics",
        description="Consume interactions from Kafka, score a sample of them within the token "
        "budget and export the scores on /metrics; with RAG_MONITOR_PG_DSN set, flagged "
        "records also go to the Postgres backlog. SIGTERM or Ctrl-C stops it cleanly: records "
        "in flight get RAG_MONITOR_SHUTDOWN_GRACE_SECONDS to finish, then their offsets are "
        "committed. A broker that goes away while it runs is retried until it is back.",
        epilog="Exit codes: 0 stopped cleanly, 2 invalid settings, 3 Kafka unreachable at start.",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    settings = command_settings(args)
    pin_mmap_threshold()  # docs/operations.md, "Memory over time"
    try:
        return asyncio.run(serve(settings))
    except KafkaUnreachable as exc:
        return fail(exc, EXIT_KAFKA_UNREACHABLE)
