"""The offline runner: reference-based metrics on annotated backlog rows, and its report.

See docs/review.md, "The backlog" (``rag-monitor offline``).
"""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TextIO

from tqdm import tqdm

from monitor.backlog.migrations import check_schema
from monitor.backlog.rows import ANNOTATED, BacklogRow
from monitor.backlog.store import BacklogStore
from monitor.budget import BUDGET, TokenBudget
from monitor.config import Settings
from monitor.judges.factory import build_judge
from monitor.metrics import noise_sensitivity as ns
from monitor.records import ScoredRecord, Usage
from monitor.scoring import OFFLINE_METRICS, Scorer

NOISE = ns.NAME
NOISE_RELEVANT = f"{NOISE}_relevant"
NOISE_IRRELEVANT = f"{NOISE}_irrelevant"
#: the online faithfulness stored on the row, reported when the run did not score faithfulness
ONLINE_FAITHFULNESS = "faithfulness (online)"

#: thresholds of the reading rules: "high" is at least HIGH, "low" is below LOW
HIGH = 0.7
LOW = 0.5
#: noise sensitivity is an error rate (lower is better): "high" from NOISE_HIGH
NOISE_HIGH = 0.3


class OfflineStore(Protocol):
    """What the runner needs from the backlog (`monitor.backlog.store.BacklogStore`)."""

    async def claim_annotated(
        self, limit: int, *, lease_seconds: float = ...
    ) -> list[BacklogRow]: ...

    async def store_offline(
        self, backlog_id: str, scores: Mapping[str, float | None], details: Mapping[str, Any]
    ) -> bool: ...

    async def release(self, backlog_id: str) -> bool: ...


# --- pure parts


def offline_scores(record: ScoredRecord) -> tuple[dict[str, float | None], dict[str, Any]]:
    """Scores (None = unscoreable) and details to store; noise_sensitivity in both modes."""
    scores: dict[str, float | None] = {}
    details: dict[str, Any] = {}
    for name, result in record.results.items():
        metric_details = dict(result.details)
        if result.error is not None:
            metric_details["error"] = result.error
        details[name] = metric_details
        if name != NOISE:
            scores[name] = result.json_score()
            continue
        relevant, irrelevant = noise_modes(result.score, result.details)
        scores[NOISE_RELEVANT] = relevant
        scores[NOISE_IRRELEVANT] = irrelevant
    return scores, details


def noise_modes(score: float, details: Mapping[str, Any]) -> tuple[float | None, float | None]:
    """(relevant, irrelevant) from one noise_sensitivity result and its verdict matrices."""
    if math.isnan(score):
        return None, None
    try:
        g = [s["in_contexts"] for s in details["reference_statements"]]
        a = [s["in_contexts"] for s in details["response_statements"]]
        wrong = [s["wrong"] for s in details["response_statements"]]
        contexts = len(details["relevant_contexts"])
    except (KeyError, TypeError):
        return (score, None) if details.get("mode", "relevant") == "relevant" else (None, score)
    both = {mode: ns.score(g, a, wrong, contexts=contexts, mode=mode) for mode in ns.MODES}
    return _finite(both["relevant"]), _finite(both["irrelevant"])


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


@dataclass
class MetricSummary:
    unscoreable: int = 0
    #: the scored values, summed exactly (`math.fsum`): the mean does not depend on the
    #: order the rows were evaluated in, which concurrent runners and batches vary
    values: list[float] = field(default_factory=list)

    def add(self, value: float | None) -> None:
        if value is None or not math.isfinite(value):
            self.unscoreable += 1
        else:
            self.values.append(value)

    @property
    def scored(self) -> int:
        return len(self.values)

    @property
    def mean(self) -> float | None:
        return math.fsum(self.values) / len(self.values) if self.values else None


@dataclass(frozen=True)
class ReadingRule:
    """One of the "reading them together" rules (docs/design.md, "Metrics")."""

    name: str
    message: str

    def applies(self, s: Mapping[str, float | None]) -> bool:
        def val(key: str) -> float | None:
            return s.get(key)

        def high(key: str) -> bool:
            v = val(key)
            return v is not None and v >= HIGH

        def low(key: str) -> bool:
            v = val(key)
            return v is not None and v < LOW

        if self.name == "recall_gap":
            return high("context_precision") and low("context_recall")
        if self.name == "wrong_document":
            return high("faithfulness") and low("factual_correctness")
        if self.name == "own_knowledge":
            return low("faithfulness") and high("factual_correctness")
        if self.name == "dirty_retrieval":
            irrelevant, relevant = val(NOISE_IRRELEVANT), val(NOISE_RELEVANT)
            return (
                irrelevant is not None
                and irrelevant >= NOISE_HIGH
                and (relevant is None or relevant < NOISE_HIGH)
            )
        raise ValueError(f"unknown rule {self.name}")


RULES = (
    ReadingRule(
        "recall_gap",
        "context precision high, context recall low: top-k is likely too small "
        "or chunking loses evidence",
    ),
    ReadingRule(
        "wrong_document",
        "faithfulness high, factual correctness low: the answer follows the retrieved "
        "documents, so the retrieved document was wrong",
    ),
    ReadingRule(
        "own_knowledge",
        "faithfulness low, factual correctness high: the model answered from its own "
        "knowledge, not from the contexts",
    ),
    ReadingRule(
        "dirty_retrieval",
        "only irrelevant-context noise is high: retrieval is dirty; check context precision first",
    ),
)


def diagnose(values: Mapping[str, float | None]) -> list[str]:
    """The reading rules that apply to these (mean or per-row) scores."""
    return [rule.message for rule in RULES if rule.applies(values)]


#: row ids listed under each reading rule in the report (the rest are counted)
RULE_IDS_SHOWN = 20


@dataclass
class OfflineReport:
    evaluated: int = 0
    released: int = 0
    lease_lost: int = 0
    failed_metrics: int = 0
    stopped: str | None = None
    metrics: dict[str, MetricSummary] = field(default_factory=dict)
    #: how many rows each reading rule applied to, by rule name
    rule_rows: dict[str, int] = field(default_factory=dict)
    #: the ids of those rows, by rule name, in the order they were evaluated
    rule_ids: dict[str, list[str]] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)

    def means(self) -> dict[str, float | None]:
        return {name: m.mean for name, m in self.metrics.items()}

    def diagnoses(self) -> list[str]:
        values = self.means()
        if values.get("faithfulness") is None:
            values["faithfulness"] = values.get(ONLINE_FAITHFULNESS)
        return diagnose(values)

    def render(self) -> str:
        lines = [
            f"offline run: {self.evaluated} row(s) evaluated"
            + (f", {self.released} handed back" if self.released else "")
            + (f", {self.lease_lost} lost to an expired lease" if self.lease_lost else "")
            + (f"; stopped: {self.stopped}" if self.stopped else ""),
            "",
            f"{'metric':<30} {'mean':>6} {'scored':>7} {'unscoreable':>12}",
        ]
        for name, m in self.metrics.items():
            mean = "-" if m.mean is None else f"{m.mean:.3f}"
            lines.append(f"{name:<30} {mean:>6} {m.scored:>7} {m.unscoreable:>12}")
        lines.append("")
        lines.append(
            f"judge: {self.usage.calls} call(s), {self.usage.prompt_tokens} prompt + "
            f"{self.usage.completion_tokens} completion tokens"
        )
        findings = self.diagnoses()
        lines.append("")
        lines.append("reading the run:")
        if not findings:
            lines.append("  - no rule applies to the run's means")
        lines.extend(f"  - {message}" for message in findings)
        for rule in RULES:
            n = self.rule_rows.get(rule.name, 0)
            if n:
                lines.append(f"  rows matching '{rule.name}': {n} of {self.evaluated}")
                ids = sorted(self.rule_ids.get(rule.name, []))
                shown = ", ".join(ids[:RULE_IDS_SHOWN])
                more = f" and {len(ids) - RULE_IDS_SHOWN} more" if len(ids) > RULE_IDS_SHOWN else ""
                lines.append(f"    {shown}{more}")
        return "\n".join(lines) + "\n"


# --- the runner


class OfflineRunner:
    """Claims, scores and stores annotated rows until none is left (or ``limit``)."""

    def __init__(
        self,
        store: OfflineStore,
        scorer: Scorer,
        *,
        batch: int = 8,
        limit: int | None = None,
        concurrency: int = 4,
        lease_seconds: float = 900.0,
        progress: TextIO | None = None,
        total: int | None = None,
    ) -> None:
        if batch < 1 or concurrency < 1:
            raise ValueError("batch and concurrency must be >= 1")
        self._store = store
        self._scorer = scorer
        self._batch = batch
        self._limit = limit
        self._concurrency = concurrency
        self._lease = lease_seconds
        self._progress = progress
        self._total = total

    async def run(self) -> OfflineReport:
        report = OfflineReport()
        for name in self._scorer.metrics:
            if name == NOISE:
                report.metrics[NOISE_RELEVANT] = MetricSummary()
                report.metrics[NOISE_IRRELEVANT] = MetricSummary()
            else:
                report.metrics[name] = MetricSummary()
        total = self._total if self._limit is None else min(self._total or self._limit, self._limit)
        bar = tqdm(
            total=total,
            unit="row",
            desc="offline",
            file=self._progress or sys.stderr,
            disable=self._progress is None,
            dynamic_ncols=True,
        )
        semaphore = asyncio.Semaphore(self._concurrency)
        taken = 0
        try:
            while report.stopped is None:
                want = self._batch if self._limit is None else min(self._batch, self._limit - taken)
                if want <= 0:
                    break
                rows = await self._store.claim_annotated(want, lease_seconds=self._lease)
                if not rows:
                    break
                taken += len(rows)
                tasks = [
                    asyncio.create_task(self._one(row, report, semaphore, bar)) for row in rows
                ]
                try:
                    await asyncio.gather(*tasks)
                except BaseException:
                    # e.g. Postgres went away: stop the batch; its leases expire and come back
                    for task in tasks:
                        task.cancel()
                    await asyncio.gather(*tasks, return_exceptions=True)
                    raise
        finally:
            bar.close()
        return report

    async def _one(
        self, row: BacklogRow, report: OfflineReport, semaphore: asyncio.Semaphore, bar: tqdm[Any]
    ) -> None:
        async with semaphore:
            if report.stopped is not None:
                await self._store.release(row.id)
                report.released += 1
                return
            record = await self._scorer.score(row.to_interaction())
        report.usage.add(record.usage)
        if any(r.error == BUDGET for r in record.results.values()):
            report.stopped = "offline token budget exhausted"
            await self._store.release(row.id)
            report.released += 1
            return
        scores, details = offline_scores(record)
        if not await self._store.store_offline(row.id, scores, details):
            report.lease_lost += 1  # another runner took the row over; its result counts
            return
        report.evaluated += 1
        report.failed_metrics += sum(1 for r in record.results.values() if r.error is not None)
        for name, value in scores.items():
            report.metrics.setdefault(name, MetricSummary()).add(value)
        row_values: dict[str, float | None] = dict(scores)
        if "faithfulness" not in row_values:
            row_values["faithfulness"] = row.online_scores.get("faithfulness")
        for rule in RULES:
            if rule.applies(row_values):
                report.rule_rows[rule.name] = report.rule_rows.get(rule.name, 0) + 1
                report.rule_ids.setdefault(rule.name, []).append(row.id)
        if "faithfulness" not in scores:
            report.metrics.setdefault(ONLINE_FAITHFULNESS, MetricSummary()).add(
                row.online_scores.get("faithfulness")
            )
        bar.update(1)


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
    """One offline run against ``settings.pg_dsn`` (``rag-monitor offline``, and the demo).

    Raises JudgeConfigError (bad judge settings), StoreError (Postgres) and
    SchemaBehind (the backlog is not migrated).
    """
    assert settings.pg_dsn is not None
    judge = build_judge(settings, kind=judge_kind, gate=TokenBudget(settings.offline_token_budget))
    scorer = Scorer(
        judge,
        metrics or list(OFFLINE_METRICS),
        call_pattern=settings.call_pattern,
        cache_size=settings.judge_cache_size,
    )
    store = BacklogStore(settings.pg_dsn.get_secret_value(), settings)
    await store.start()
    try:
        await check_schema(store)
        total = (await store.stats()).counts[ANNOTATED] if progress else None
        runner = OfflineRunner(
            store,
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
        await store.close()
        await judge.aclose()
