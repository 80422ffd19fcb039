"""Scoring a JSON-lines file of interactions: results in input order, and a summary.

See docs/design.md, "Contracts" (``rag-monitor score``).
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
from collections import Counter, deque
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO

from tqdm import tqdm

from monitor.flags import flag_reasons
from monitor.judges import Judge, model_name
from monitor.metrics.faithfulness import HALLUCINATION_PROBABILITY
from monitor.records import (
    Interaction,
    InvalidRecord,
    ScoredRecord,
    Usage,
    parse_record,
    too_large,
)
from monitor.scoring import Scorer

#: records scored at once when no concurrency is given, by judge kind
DEFAULT_CONCURRENCY = {"llm": 8, "local": 64}


@dataclass
class Summary:
    """What the run did, for the table on stderr."""

    #: the judge's kind ("local" answers in process, at zero tokens) and model
    judge_kind: str = ""
    judge_model: str = ""
    #: valid records (each was handed to the scorer)
    records: int = 0
    #: valid records with at least one metric value
    scored: int = 0
    invalid: int = 0
    judge_errors: int = 0
    usage: Usage = field(default_factory=Usage)
    scores: dict[str, list[float]] = field(default_factory=dict)
    unscoreable: dict[str, int] = field(default_factory=dict)
    errors: dict[str, int] = field(default_factory=dict)
    #: records by the judge failure that failed them ("connection: connection refused")
    judge_causes: Counter[str] = field(default_factory=Counter)
    #: unscoreable results of records the judge did not fail on, by their reason ("no reference")
    unscoreable_reasons: Counter[str] = field(default_factory=Counter)
    #: each invalid line's error, in input order ("invalid record on line 2: not_json: …")
    invalid_errors: list[str] = field(default_factory=list)
    #: records with at least one flag, and the records per flag reason
    flagged: int = 0
    flags: Counter[str] = field(default_factory=Counter)

    @property
    def first_invalid(self) -> str | None:
        return self.invalid_errors[0] if self.invalid_errors else None

    def add(self, record: ScoredRecord, flags: Sequence[str] = ()) -> None:
        """One scored record, and the reasons its output line flags it for."""
        self.records += 1
        if flags:
            self.flagged += 1
            self.flags.update(flags)
        self.usage.add(record.usage)
        if record.error is not None:
            self.judge_errors += 1
            failed = next((r for r in record.results.values() if r.error == record.error), None)
            detail = failed.details.get("detail") if failed is not None else None
            self.judge_causes[f"{record.error}: {detail}" if detail else record.error] += 1
        if any(result.scoreable for result in record.results.values()):
            self.scored += 1
        for name, result in record.results.items():
            if result.scoreable:
                self.scores.setdefault(name, []).append(result.score)
            else:
                self.unscoreable[name] = self.unscoreable.get(name, 0) + 1
                if record.error is None:
                    self.unscoreable_reasons[str(result.details.get("reason", "unscoreable"))] += 1
            if result.error is not None:
                self.errors[name] = self.errors.get(name, 0) + 1

    def add_invalid(self, error: str) -> None:
        self.invalid += 1
        self.invalid_errors.append(error)

    def failure(self) -> str | None:
        """Why no record got a value, in one line; None when at least one did."""
        if self.scored:
            return None
        if not self.records and not self.invalid:
            return "no record to score: the file has no non-empty line"
        if not self.records:
            return f"no record scored: every line is invalid ({self.first_invalid})"
        causes = []
        if self.judge_errors:
            cause, _ = self.judge_causes.most_common(1)[0]
            failed = f"{self.judge_errors} of {_records(self.records)}"
            causes.append(f"the judge failed on {failed} ({cause})")
        if self.unscoreable_reasons:
            reason, _ = self.unscoreable_reasons.most_common(1)[0]
            rest = "the others were" if self.judge_errors else "every metric was"
            causes.append(f"{rest} unscoreable (most often: {reason})")
        return "no record scored: " + "; ".join(causes)

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
        valid = max(self.records, 1)
        lines.append(
            f"records: {self.records + self.invalid} read, {self.scored} scored, "
            f"{self.invalid} invalid, {self.judge_errors} with judge errors"
        )
        reasons = ", ".join(f"{reason} {n}" for reason, n in sorted(self.flags.items()))
        lines.append(
            f"flagged: {self.flagged} of {_records(self.records)}"
            + (f" ({reasons}; a record can have several)" if reasons else "")
        )
        for error in self.invalid_errors[:SHOWN_INVALID]:
            lines.append(f"invalid: {error.removeprefix('invalid record ')}")
        if self.invalid > SHOWN_INVALID:
            lines.append(
                f"invalid: {self.invalid - SHOWN_INVALID} more lines (each one's error is in its "
                "output line's error)"
            )
        for cause, n in self.judge_causes.most_common():
            lines.append(f"judge errors: {cause} ({_records(n)})")
        if self.judge_kind == "local":
            lines.append(
                f"judge: the local judge ({self.judge_model}), in process: 0 calls, 0 tokens"
            )
        else:
            lines.append(
                f"judge: the LLM judge ({self.judge_model}) per valid record: "
                f"{self.usage.calls / valid:.1f} calls (requests to "
                f"the judge), {self.usage.prompt_tokens / valid:.0f} prompt + "
                f"{self.usage.completion_tokens / valid:.0f} completion tokens "
                f"(total {self.usage.calls} calls, {self.usage.total_tokens} tokens)"
            )
        print("\n".join(lines), file=stream)


#: invalid lines whose error the summary prints; the rest are counted
SHOWN_INVALID = 20


def _records(n: int) -> str:
    return f"{n} record" if n == 1 else f"{n} records"


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
        "flags": [],
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
    thresholds: Mapping[str, float] | None = None,
) -> Summary:
    """Score every line, ``concurrency`` records at a time, writing results in input order."""
    summary = Summary(judge_kind=judge.kind, judge_model=model_name(judge))
    window: deque[asyncio.Future[dict[str, Any]]] = deque()
    progress = tqdm(total=total, file=sys.stderr, unit="record", disable=None, leave=False)

    def write(line: dict[str, Any]) -> None:
        out.write(json.dumps(line, ensure_ascii=False) + "\n")
        progress.update(1)

    async def score(interaction: Interaction) -> dict[str, Any]:
        record = await scorer.score(interaction)
        line = output_line(record, thresholds)
        summary.add(record, line["flags"])
        return line

    try:
        for number, raw in _lines(path):
            try:
                oversized = too_large(len(raw), max_bytes)
                if oversized is not None:
                    raise oversized
                interaction = parse_record(raw)
            except InvalidRecord as exc:
                line = invalid_line(raw, exc, number)
                summary.add_invalid(line["error"])
                window.append(_resolved(line))
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


#: decimals of a score in the output: enough for any threshold, and Ragas's guard against an
#: empty denominator (one useful context scores 0.9999999999) reads as the 1.0 it means
SCORE_DECIMALS = 6


def output_line(record: ScoredRecord, thresholds: Mapping[str, float] | None) -> dict[str, Any]:
    """The record's JSON line: its scores (rounded), ``flags`` (the reasons the sidecar would
    queue it in the backlog for; none when the judge failed, as the sidecar skips it), the
    judge's ``hallucination_probability`` where it gives one (the local judge: the probability
    that the answer holds an unsupported claim, to rank a file by), then the details, the
    usage and any error."""
    line = record.output_line()
    scores = {name: None if value is None else round(value, SCORE_DECIMALS)
              for name, value in line["scores"].items()}  # fmt: skip
    failed = record.error is not None
    flags = [] if failed else flag_reasons(record, thresholds or {})
    found = record.results.get("faithfulness")
    probability = found.details.get(HALLUCINATION_PROBABILITY) if found is not None else None
    local = {} if probability is None else {HALLUCINATION_PROBABILITY: probability}
    return {"id": line["id"], "scores": scores, "flags": flags, **local,
            **{k: v for k, v in line.items() if k not in ("id", "scores")}}  # fmt: skip


def _resolved(line: dict[str, Any]) -> asyncio.Future[dict[str, Any]]:
    future: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    future.set_result(line)
    return future
