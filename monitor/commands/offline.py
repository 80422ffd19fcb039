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
from typing import Literal, cast

from monitor.budget import TokenBudget
from monitor.config import Settings, load_settings
from monitor.judges.factory import JudgeConfigError, build_judge
from monitor.offline import OfflineReport, OfflineRunner
from monitor.scoring import OFFLINE_METRICS, Scorer, UnknownMetric, parse_metric_names
from monitor.sinks import SinkError
from monitor.sinks.backlog import BacklogSink
from monitor.sinks.schema import SchemaBehind, check_schema

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
EXIT_SCHEMA = 4


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    offline = subparsers.add_parser(
        "offline", help="score annotated backlog rows with the reference-based metrics"
    )
    offline.add_argument("--limit", type=int, default=None, metavar="N", help="at most N rows")
    offline.add_argument("--batch", type=int, default=8, metavar="B", help="rows per claim")
    offline.add_argument(
        "--metrics",
        default=",".join(OFFLINE_METRICS),
        metavar="LIST",
        help=f"comma list (default: {','.join(OFFLINE_METRICS)})",
    )
    offline.add_argument("--judge", choices=("auto", "llm", "local"), default="auto")
    offline.add_argument(
        "--lease-seconds",
        type=float,
        default=900.0,
        help="how long a claimed batch stays reserved; a crashed runner's rows return after it",
    )
    offline.add_argument("--no-progress", action="store_true", help="no progress bar")
    offline.set_defaults(handler=_offline)


def _offline(args: argparse.Namespace) -> int:
    settings = load_settings(cast(str | None, args.config))
    if settings.pg_dsn is None:
        print("rag-monitor: set RAG_MONITOR_PG_DSN (or pg_dsn in --config)", file=sys.stderr)
        return EXIT_USAGE
    if (args.limit is not None and args.limit < 1) or args.batch < 1:
        print("rag-monitor: --limit and --batch must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    try:
        metrics = parse_metric_names(args.metrics)
    except (UnknownMetric, ValueError) as exc:
        print(f"rag-monitor: --metrics: {exc}", file=sys.stderr)
        return EXIT_USAGE
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
        print(f"rag-monitor: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except SinkError as exc:
        print(f"rag-monitor: {exc}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except SchemaBehind as exc:
        print(f"rag-monitor: {exc}", file=sys.stderr)
        return EXIT_SCHEMA
    sys.stdout.write(report.render())
    return EXIT_OK


async def run_offline(
    settings: Settings,
    *,
    metrics: list[str] | None = None,
    judge_kind: Literal["auto", "llm", "local"] = "auto",
    limit: int | None = None,
    batch: int = 8,
    lease_seconds: float = 900.0,
    progress: bool = False,
) -> OfflineReport:
    """One offline run against ``settings.pg_dsn`` (also what the demo calls)."""
    assert settings.pg_dsn is not None
    judge = build_judge(
        settings, kind=judge_kind, gate=TokenBudget(settings.offline_token_budget)
    )
    scorer = Scorer(
        judge,
        metrics or list(OFFLINE_METRICS),
        call_pattern=settings.call_pattern,
        cache_size=settings.judge_cache_size,
    )
    sink = BacklogSink(settings.pg_dsn.get_secret_value(), settings, stats_interval=0)
    await sink.start()
    try:
        await check_schema(sink)
        total = (await sink.stats()).counts["annotated"] if progress else None
        runner = OfflineRunner(
            sink,
            scorer,
            batch=batch,
            limit=limit,
            concurrency=min(settings.judge_concurrency, batch),
            lease_seconds=lease_seconds,
            progress=sys.stderr if progress else None,
            total=total,
        )
        return await runner.run()
    finally:
        await sink.close()
        await judge.aclose()
