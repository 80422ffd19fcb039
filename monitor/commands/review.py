"""``rag-monitor review [--host 127.0.0.1] [--port 8080]``: the review pages over the backlog.

Serves until Ctrl-C or SIGTERM. On a non-loopback address it needs
``RAG_MONITOR_REVIEW_TOKENS`` (exit 2 without). The backlog must be migrated
(``rag-monitor migrate``), or ``RAG_MONITOR_MIGRATE_ON_START=true``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys

from monitor.backlog.store import BacklogStore, StoreError
from monitor.commands import backlog_dsn, command_settings, fail
from monitor.commands.exits import EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE
from monitor.config import Settings
from monitor.http import PortUnavailable, check_port
from monitor.review.app import ReviewApp
from monitor.review.auth import TokenError, check_access, parse_tokens


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="listen on this address (default 127.0.0.1; any other needs reviewer tokens)",
    )
    parser.add_argument(
        "--port",
        type=int,
        default=8080,
        help="listen on this port (default 8080; 0: any free port)",
    )


def handle(args: argparse.Namespace) -> int:
    settings = command_settings(args)
    dsn = backlog_dsn(settings)
    if dsn is None:
        return EXIT_USAGE
    try:
        tokens = parse_tokens(
            settings.review_tokens.get_secret_value() if settings.review_tokens else None
        )
        check_access(args.host, tokens)  # before Postgres is asked anything
        check_port(args.host, args.port, "--port")
    except (TokenError, PortUnavailable) as exc:
        return fail(exc)
    try:
        return asyncio.run(serve(dsn, settings, args.host, args.port, tokens))
    except TokenError as exc:
        return fail(exc)
    except StoreError as exc:
        return fail(exc, EXIT_UNAVAILABLE)


async def serve(
    dsn: str,
    settings: Settings,
    host: str,
    port: int,
    tokens: dict[str, str],
    *,
    stop: asyncio.Event | None = None,
) -> int:
    """Run the review app until ``stop`` is set (or SIGINT/SIGTERM)."""
    stop = stop or asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, stop.set)
    store = BacklogStore(dsn, settings)
    await store.start()
    app = ReviewApp(store, tokens=tokens)
    try:
        await app.start(host, port)
        shown = f"[{host}]" if ":" in host else host
        print(f"review: http://{shown}:{app.port}/ (Ctrl-C stops it)", file=sys.stderr)
        await stop.wait()
    finally:
        await app.stop()
        await store.close()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.remove_signal_handler(sig)
    return EXIT_OK
