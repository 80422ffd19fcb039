"""``rag-monitor offline``: reference-based metrics on annotated backlog rows, with a report.

Runs beside other runners safely (rows are leased with FOR UPDATE SKIP LOCKED).
The judge is the configured one (``--judge auto|llm|local``) behind its own
token budget, ``RAG_MONITOR_OFFLINE_TOKEN_BUDGET`` (unlimited by default).
Progress goes to stderr, the report to stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from monitor.backlog.migrations import SchemaBehind
from monitor.backlog.store import StoreError
from monitor.commands import add_judge_option, backlog_dsn, command_settings, fail
from monitor.commands.exits import EXIT_OK, EXIT_SCHEMA, EXIT_UNAVAILABLE, EXIT_USAGE
from monitor.judges.factory import JudgeConfigError
from monitor.offline import run_offline
from monitor.scoring import OFFLINE_METRICS, UnknownMetric, parse_metric_names


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--limit",
        type=int,
        default=None,
        metavar="N",
        help="score at most N rows (default: every annotated row)",
    )
    parser.add_argument(
        "--batch", type=int, default=8, metavar="N", help="claim N rows at a time (default 8)"
    )
    parser.add_argument(
        "--metrics",
        default=",".join(OFFLINE_METRICS),
        metavar="LIST",
        help=f"score these comma-separated metrics (default: {','.join(OFFLINE_METRICS)})",
    )
    add_judge_option(parser)
    parser.add_argument(
        "--lease-seconds",
        type=float,
        default=900.0,
        metavar="SECONDS",
        help="keep a claimed batch reserved this long (default 900); the rows of a runner that "
        "crashed return to the queue after it",
    )
    parser.add_argument(
        "--no-progress", action="store_true", help="do not draw the progress bar on stderr"
    )


def handle(args: argparse.Namespace) -> int:
    settings = command_settings(args)
    if backlog_dsn(settings) is None:
        return EXIT_USAGE
    if (args.limit is not None and args.limit < 1) or args.batch < 1:
        return fail("--limit and --batch must be at least 1")
    try:
        metrics = parse_metric_names(args.metrics)
    except (UnknownMetric, ValueError) as exc:
        return fail(f"--metrics: {exc}")
    try:
        report = asyncio.run(
            run_offline(
                settings,
                metrics=metrics,
                judge_kind=args.judge,
                limit=args.limit,
                batch=args.batch,
                lease_seconds=args.lease_seconds,
                progress=not args.no_progress,
            )
        )
    except JudgeConfigError as exc:
        return fail(exc)
    except StoreError as exc:
        return fail(exc, EXIT_UNAVAILABLE)
    except SchemaBehind as exc:
        return fail(exc, EXIT_SCHEMA)
    sys.stdout.write(report.render())
    return EXIT_OK
