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
from monitor.kafka.ledger import LedgerUnavailable

#: no Kafka broker answered at start, or it refused the budget's ledger topic (settings
#: errors exit 2, a clean shutdown 0)
EXIT_KAFKA_UNREACHABLE = 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """None: the sidecar reads its settings only."""


def handle(args: argparse.Namespace) -> int:
    settings = command_settings(args)
    pin_mmap_threshold()  # docs/operations.md, "Memory over time"
    try:
        return asyncio.run(serve(settings))
    except (KafkaUnreachable, LedgerUnavailable) as exc:
        return fail(exc, EXIT_KAFKA_UNREACHABLE)
