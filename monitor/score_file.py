"""A JSON-lines file of interactions scored with the sidecar's scorer, results in input order.

`score_file` reads one record per non-empty line, scores up to ``concurrency``
records at a time and writes one JSON line per input line, in input order: the
record's output line (`ScoredRecord.output_line`), or for a line that is not a
valid record `invalid_line` (its id if it has one, and the reason as ``error``).
A `Summary` of the run (mean, count and unscoreable per metric; judge calls and
tokens per record) is returned for the table `rag-monitor score` prints.
"""

from __future__ import annotations

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

from monitor.judges import Judge
from monitor.records import Interaction, InvalidRecord, ScoredRecord, Usage, parse_record
from monitor.scoring import Scorer

#: records scored at once when no concurrency is given, by judge kind
DEFAULT_CONCURRENCY = {"llm": 8, "local": 64}


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
        if self.usage.calls == 0 and self.usage.total_tokens == 0:
            lines.append("judge: in process (the local judge): 0 calls, 0 tokens")
        else:
            lines.append(
                f"judge per scored record: {self.usage.calls / scored:.1f} calls (requests to "
                f"the judge), {self.usage.prompt_tokens / scored:.0f} prompt + "
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


async def score_file(
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
