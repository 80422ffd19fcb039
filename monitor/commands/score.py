"""``rag-monitor score FILE.jsonl``: score a file of interactions with the sidecar's scorer.

See docs/design.md, "Contracts" (the output lines and exit codes).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import IO

import structlog

from monitor.allocator import pin_mmap_threshold
from monitor.commands import add_judge_option, command_settings, fail
from monitor.config import UNUSED_API_KEY, ambient_api_key
from monitor.judges.factory import JudgeConfigError, build_judge
from monitor.score_file import DEFAULT_CONCURRENCY, score_file
from monitor.scoring import Scorer, UnknownMetric, parse_metric_names

log = structlog.get_logger("monitor.commands.score")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "file",
        metavar="FILE.jsonl",
        help="the interactions to score, one per line (docs/configuration.md#the-record-schema)",
    )
    parser.add_argument(
        "--metrics",
        metavar="A,B",
        help="score these comma-separated metrics (default: RAG_MONITOR_ONLINE_METRICS)",
    )
    parser.add_argument(
        "--out", metavar="FILE", help="write the result lines to FILE (default: stdout)"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help="score N records at once (default: 8 with an LLM judge, to spare its endpoint; "
        "64 with the local judge)",
    )
    add_judge_option(parser)


def handle(args: argparse.Namespace) -> int:
    settings = command_settings(args)
    pin_mmap_threshold()  # as `run` does: docs/operations.md, "Memory over time"
    if args.concurrency is not None and args.concurrency < 1:
        return _fail("--concurrency must be at least 1")
    try:
        metrics = (
            parse_metric_names(args.metrics) if args.metrics else list(settings.online_metrics)
        )
    except (UnknownMetric, ValueError) as exc:
        return _fail(f"--metrics: {exc}")
    path = Path(args.file)
    try:
        with path.open("rb") as f:
            total = sum(1 for line in f if line.strip())
    except OSError as exc:
        return _fail(f"cannot read {path}: {exc.strerror or exc}")
    if total == 0:
        return _fail(f"no record to score: {path} has no non-empty line")
    try:
        judge = build_judge(settings, kind=args.judge)
    except JudgeConfigError as exc:
        return _fail(str(exc))
    if judge.kind == "local" and ambient_api_key(settings):
        log.warning(UNUSED_API_KEY)
    try:
        scorer = Scorer(
            judge,
            metrics,
            call_pattern=settings.call_pattern,
            relevancy_questions=settings.relevancy_questions,
            cache_size=settings.judge_cache_size,
        )
    except (UnknownMetric, ValueError) as exc:
        return _fail(str(exc))
    out: IO[str]
    try:
        out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout
    except OSError as exc:
        return _fail(f"cannot write {args.out}: {exc.strerror or exc}")
    try:
        summary = asyncio.run(
            score_file(
                path,
                scorer,
                judge,
                out,
                concurrency=args.concurrency or DEFAULT_CONCURRENCY.get(judge.kind, 8),
                max_bytes=settings.max_record_bytes,
                total=total,
                thresholds=settings.thresholds,
            )
        )
    except OSError as exc:
        return _fail(f"cannot read {path}: {exc.strerror or exc}")
    finally:
        if out is not sys.stdout:
            out.close()
        else:
            out.flush()
    summary.print(metrics, sys.stderr)
    failure = summary.failure()
    if failure is not None:
        return fail(failure, 1, command="score")
    return 0


def _fail(message: str) -> int:
    return fail(message, command="score")
