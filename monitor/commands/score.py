"""``rag-monitor score FILE.jsonl``: score a file of interactions with the sidecar's scorer.

One JSON line per input line, in input order (docs/design.md, "Contracts"):
``{"id", "scores": {metric: float | null}, "details": {...}, "usage": {...}, "error"?}``.
A line that is not a valid record gets ``{"id": <its id or null>, ..., "error": "invalid
record ..."}`` and the run goes on; a judge failure gets the failing step's reason as
``error``. A progress bar and a summary table (mean, count and unscoreable per metric; judge
calls and tokens per record) go to stderr. Exit 0 when every line was handled, 2 on unusable
input or arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import sys
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO

from tqdm import tqdm

from monitor.config import load_settings
from monitor.judges import Judge
from monitor.judges.factory import JudgeConfigError, build_judge
from monitor.records import Interaction, InvalidRecord, ScoredRecord, Usage, parse_record
from monitor.scoring import Scorer, UnknownMetric, parse_metric_names

#: records scored at once when --concurrency is not given, by judge kind
DEFAULT_CONCURRENCY = {"llm": 8, "local": 64}


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "score",
        help="score a JSON-lines file of interactions (same scorer as the sidecar)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "file", metavar="FILE.jsonl", help="one interaction per line (the README's record schema)"
    )
    parser.add_argument(
        "--metrics",
        metavar="A,B",
        help="comma-separated metrics (default: the online metrics of the settings)",
    )
    parser.add_argument(
        "--out", metavar="FILE", help="write the result lines here (default: stdout)"
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help="records scored at once (default: 8 with an LLM judge, a polite load for its "
        "endpoint; 64 with the local judge, whose MiniLM passes then take many texts at once)",
    )
    parser.add_argument(
        "--judge",
        choices=("auto", "llm", "local"),
        default="auto",
        help="llm: the OpenAI-compatible endpoint of RAG_MONITOR_JUDGE_BASE_URL; local: the "
        "in-process judge; auto (default): llm when the base URL is set, else local",
    )
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    settings = load_settings(args.config)
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
    try:
        judge = build_judge(settings, kind=args.judge)
    except JudgeConfigError as exc:
        return _fail(str(exc))
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
            _score_file(
                path,
                scorer,
                judge,
                out,
                concurrency=args.concurrency or DEFAULT_CONCURRENCY.get(judge.kind, 8),
                max_bytes=settings.max_record_bytes,
                total=total,
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
    return 0


def _fail(message: str) -> int:
    print(f"rag-monitor score: {message}", file=sys.stderr)
    return 2


@dataclass
class Summary:
    """What the run did, for the table on stderr."""

    records: int = 0
    invalid: int = 0
    judge_errors: int = 0
    usage: Usage = field(default_factory=Usage)
    scores: dict[str, list[float]] = field(default_factory=dict)
    unscoreable: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)

    def add(self, record: ScoredRecord) -> None:
        self.records += 1
        self.usage.add(record.usage)
        if record.error is not None:
            self.judge_errors += 1
        for name, result in record.results.items():
            if result.scoreable:
                self.scores.setdefault(name, []).append(result.score)
            else:
                self.unscoreable[name] = self.unscoreable.get(name, 0) + 1
            if result.error is not None:
                self.errors[name] = self.errors.get(name, 0) + 1

    def print(self, metrics: Sequence[str], stream: TextIO) -> None:
        width = max(len("metric"), *(len(m) for m in metrics))
        lines = [
            f"{'metric':<{width}}  {'mean':>6}  {'scored':>6}  {'unscoreable':>11}  {'errors':>6}"
        ]
        for name in metrics:
            values = self.scores.get(name, [])
            mean = f"{math.fsum(values) / len(values):.3f}" if values else "-"
            lines.append(
                f"{name:<{width}}  {mean:>6}  {len(values):>6}  "
                f"{self.unscoreable.get(name, 0):>11}  {self.errors.get(name, 0):>6}"
            )
        scored = max(self.records, 1)
        lines.append(
            f"records: {self.records + self.invalid} read, {self.records} scored, "
            f"{self.invalid} invalid, {self.judge_errors} with judge errors"
        )
        lines.append(
            f"judge per scored record: {self.usage.calls / scored:.1f} calls, "
            f"{self.usage.prompt_tokens / scored:.0f} prompt + "
            f"{self.usage.completion_tokens / scored:.0f} completion tokens "
            f"(total {self.usage.calls} calls, {self.usage.total_tokens} tokens)"
        )
        print("\n".join(lines), file=stream)


def _lines(path: Path) -> Iterator[tuple[int, bytes]]:
    with path.open("rb") as f:
        for number, raw in enumerate(f, start=1):
            if raw.strip():
                yield number, raw.rstrip(b"\r\n")


def invalid_line(raw: bytes, error: InvalidRecord, number: int) -> dict[str, Any]:
    """The output line of an input line that is not a record: its id if it has one, else null."""
    record_id: str | None = None
    try:
        data = json.loads(raw)
        if isinstance(data, dict) and isinstance(data.get("id"), str | int):
            record_id = str(data["id"])
    except (UnicodeDecodeError, json.JSONDecodeError):
        pass
    return {
        "id": record_id,
        "scores": {},
        "details": {},
        "usage": Usage().model_dump(),
        "error": f"invalid record on line {number}: {error.reason}: {error.detail}",
    }


async def _score_file(
    path: Path,
    scorer: Scorer,
    judge: Judge,
    out: IO[str],
    *,
    concurrency: int,
    max_bytes: int,
    total: int,
) -> Summary:
    """Score every line, ``concurrency`` records at a time, writing results in input order."""
    summary = Summary()
    window: deque[asyncio.Future[dict[str, Any]]] = deque()
    progress = tqdm(total=total, file=sys.stderr, unit="record", disable=None, leave=False)

    def write(line: dict[str, Any]) -> None:
        out.write(json.dumps(line, ensure_ascii=False) + "\n")
        progress.update(1)

    async def score(interaction: Interaction) -> dict[str, Any]:
        record = await scorer.score(interaction)
        summary.add(record)
        return record.output_line()

    try:
        for number, raw in _lines(path):
            try:
                interaction = parse_record(raw, max_bytes=max_bytes)
            except InvalidRecord as exc:
                summary.invalid += 1
                window.append(_resolved(invalid_line(raw, exc, number)))
            else:
                window.append(asyncio.ensure_future(score(interaction)))
            while True:
                while window and window[0].done():
                    write(window.popleft().result())
                in_flight = [f for f in window if not f.done()]
                # bounded: at most `concurrency` records scoring, a few finished ones waiting
                if len(in_flight) < concurrency and len(window) <= 4 * concurrency:
                    break
                await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
        while window:
            write(await window.popleft())
    finally:
        for pending in window:
            pending.cancel()
        progress.close()
        await judge.aclose()
    return summary


def _resolved(line: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
    future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    future.set_result(line)
    return future
