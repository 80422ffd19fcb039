"""The offline runner: parallel runners score each annotated row once; budget; the report."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any

import asyncpg
import pytest

from monitor.backlog.reviews import ImportRow
from monitor.backlog.store import BacklogStore, StoreError
from monitor.config import Settings
from monitor.offline import (
    NOISE_IRRELEVANT,
    NOISE_RELEVANT,
    MetricSummary,
    OfflineReport,
    diagnose,
    noise_modes,
    offline_scores,
    run_offline,
)
from monitor.records import Context, Interaction, MetricResult, ScoredRecord
from monitor.sinks.backlog import BacklogSink
from tests.support.judge_server import JudgeServer

SettingsFactory = Callable[..., Settings]

QUESTION = "When do I need to attach a receipt for travel expenses?"
RELEVANT = "Receipts must be attached for travel expenses over $100."
IRRELEVANT = "The office cafeteria opens at 8am."


# --- pure


def _noise_details() -> dict[str, Any]:
    # one relevant context (0), one irrelevant (1); response: a copied relevant sentence,
    # and a sentence copied from the irrelevant chunk that the reference does not support
    return {
        "mode": "relevant",
        "relevant_contexts": [True, False],
        "reference_statements": [{"statement": "over $100", "in_contexts": [1, 0]}],
        "response_statements": [
            {"statement": "over $100", "in_contexts": [1, 0], "wrong": False},
            {"statement": "cafeteria at 8", "in_contexts": [0, 1], "wrong": True},
        ],
    }


def test_noise_sensitivity_both_modes_from_one_result() -> None:
    assert noise_modes(0.0, _noise_details()) == (0.0, 0.5)  # docs/design.md's worked example
    assert noise_modes(math.nan, {}) == (None, None)
    record = ScoredRecord(
        interaction=Interaction(
            id="x", user_input=QUESTION, retrieved_contexts=(), response="r", reference="ref"
        ),
        results={
            "noise_sensitivity": MetricResult(
                metric="noise_sensitivity", score=0.0, details=_noise_details()
            ),
            "context_recall": MetricResult(
                metric="context_recall", score=math.nan, error="timeout"
            ),
        },
    )
    scores, details = offline_scores(record)
    assert scores == {NOISE_RELEVANT: 0.0, NOISE_IRRELEVANT: 0.5, "context_recall": None}
    assert details["context_recall"]["error"] == "timeout"
    assert details["noise_sensitivity"]["relevant_contexts"] == [True, False]


@pytest.mark.parametrize(
    ("values", "needle"),
    [
        ({"context_precision": 0.9, "context_recall": 0.3}, "top-k is likely too small"),
        ({"faithfulness": 0.9, "factual_correctness": 0.2}, "retrieved document was wrong"),
        ({"faithfulness": 0.2, "factual_correctness": 0.9}, "its own knowledge"),
        ({NOISE_IRRELEVANT: 0.5, NOISE_RELEVANT: 0.0}, "retrieval is dirty"),
    ],
)
def test_reading_rules(values: dict[str, float | None], needle: str) -> None:
    found = diagnose(values)
    assert len(found) == 1 and needle in found[0]


def test_reading_rules_stay_quiet_on_healthy_or_missing_scores() -> None:
    assert diagnose({"context_precision": 0.9, "context_recall": 0.9}) == []
    assert diagnose({"context_precision": 0.9, "context_recall": None}) == []
    assert diagnose({NOISE_IRRELEVANT: 0.5, NOISE_RELEVANT: 0.5}) == []


def test_report_renders_means_counts_and_findings() -> None:
    report = OfflineReport(evaluated=2)
    report.metrics["context_precision"] = MetricSummary()
    report.metrics["context_recall"] = MetricSummary()
    for v in (1.0, 0.8):
        report.metrics["context_precision"].add(v)
    report.metrics["context_recall"].add(0.2)
    report.metrics["context_recall"].add(None)
    text = report.render()
    assert "context_precision" in text and "0.900" in text
    assert "context_recall                  0.200       1            1" in text
    assert "top-k is likely too small" in text


def test_a_mean_does_not_depend_on_the_order_rows_were_evaluated_in() -> None:
    """Runners and batches finish rows in varying order; the mean is the same to the bit."""
    values = [0.1, 0.2, 0.3]  # (0.1 + 0.2) + 0.3 != (0.3 + 0.2) + 0.1 in floating point
    means = set()
    for order in (values, values[::-1]):
        summary = MetricSummary()
        for value in order:
            summary.add(value)
        means.add(summary.mean)
    assert len(means) == 1 and summary.scored == len(values)


def test_report_names_the_rows_each_rule_matches() -> None:
    report = OfflineReport(evaluated=30)
    report.rule_rows = {"recall_gap": 2, "own_knowledge": 25}
    report.rule_ids = {"recall_gap": ["row-b", "row-a"],
                       "own_knowledge": [f"k-{i:02d}" for i in range(25)]}  # fmt: skip
    lines = report.render().splitlines()
    at = lines.index("  rows matching 'recall_gap': 2 of 30")
    assert lines[at + 1] == "    row-a, row-b"
    at = lines.index("  rows matching 'own_knowledge': 25 of 30")
    assert lines[at + 1] == "    " + ", ".join(f"k-{i:02d}" for i in range(20)) + " and 5 more"


# --- with Postgres and the real HTTP judge server


async def seed(sink: BacklogSink, n: int, *, annotate: bool = True) -> list[str]:
    records = []
    for i in range(n):
        interaction = Interaction(
            id=f"row-{i}",
            user_input=f"{QUESTION} (case {i})",
            retrieved_contexts=(Context(text=IRRELEVANT), Context(text=RELEVANT)),
            response=f"Attach receipts for travel expenses over $100. Case {i}.",
        )
        records.append(
            ScoredRecord(
                interaction=interaction,
                results={"faithfulness": MetricResult(metric="faithfulness", score=0.25)},
            )
        )
    await sink.write(records)
    ids = [r.interaction.id for r in records]
    if annotate:
        report = await sink.store.import_references(
            ImportRow(line=i + 1, id=rid, reference=RELEVANT) for i, rid in enumerate(ids)
        )
        assert not report.rejected
    return ids


def offline_settings(
    make_settings: SettingsFactory, dsn: str, judge: JudgeServer, **overrides: Any
) -> Settings:
    values: dict[str, Any] = {
        "pg_dsn": dsn,
        "judge_base_url": judge.base_url,
        "judge_api_key": "test-key",
        "judge_max_retries": 0,
        "judge_timeout_seconds": 10.0,
        "judge_concurrency": 4,
    }
    values.update(overrides)
    return make_settings(**values)


@pytest.mark.postgres
async def test_two_runners_in_parallel_score_every_row_exactly_once(
    backlog: BacklogSink, pg_dsn: str, judge_server: JudgeServer, make_settings: SettingsFactory
) -> None:
    ids = await seed(backlog, 24)
    await backlog.write([])  # nothing to do, no error
    judge_server.latency_seconds = 0.005  # let the two runners interleave
    settings = offline_settings(make_settings, pg_dsn, judge_server)
    first, second = await asyncio.wait_for(
        asyncio.gather(
            run_offline(settings, judge_kind="llm", batch=2),
            run_offline(settings, judge_kind="llm", batch=3),
        ),
        timeout=240,
    )
    assert first.evaluated + second.evaluated == len(ids)
    assert first.evaluated > 0 and second.evaluated > 0
    assert first.lease_lost == second.lease_lost == 0
    conn = await asyncpg.connect(pg_dsn, timeout=10)
    try:
        rows = await conn.fetch("SELECT id, status, evaluation_count FROM backlog")
    finally:
        await conn.close()
    assert {(r["status"], r["evaluation_count"]) for r in rows} == {("evaluated", 1)}
    assert sorted(r["id"] for r in rows) == sorted(ids)

    row = await backlog.store.get("row-0")
    assert row is not None and row.offline_scores is not None
    assert set(row.offline_scores) == {
        "context_precision",
        "precision_at_k",
        "context_recall",
        "factual_correctness",
        NOISE_RELEVANT,
        NOISE_IRRELEVANT,
        "semantic_similarity",
    }
    for value in row.offline_scores.values():
        assert value is None or 0.0 <= value <= 1.0
    # statement-level details are stored
    assert row.offline_details is not None
    assert "response_statements" in row.offline_details["noise_sensitivity"]
    # one irrelevant chunk, then the relevant one (docs/design.md's worked example)
    assert row.offline_scores["context_precision"] == pytest.approx(0.5)
    assert row.offline_scores["precision_at_k"] == pytest.approx(0.5)
    # the report has a line per metric, both noise modes, and the online faithfulness
    text = first.render()
    for name in (*row.offline_scores, "faithfulness (online)"):
        assert name in text
    for report in (first, second):  # every matching row is named under its rule
        assert {k: len(v) for k, v in report.rule_ids.items()} == report.rule_rows
        for rule_ids in report.rule_ids.values():
            assert set(rule_ids) <= set(ids)
            assert ", ".join(sorted(rule_ids)[:20]) in report.render()
    assert (await backlog.store.stats()).counts["evaluated"] == len(ids)


@pytest.mark.postgres
async def test_a_crashed_runners_rows_come_back(
    backlog: BacklogSink, pg_dsn: str, judge_server: JudgeServer, make_settings: SettingsFactory
) -> None:
    await seed(backlog, 4)
    crashed = BacklogStore(pg_dsn, make_settings())
    await crashed.start()
    loop = asyncio.get_running_loop()
    try:
        claimed_at = loop.time()
        assert len(await crashed.claim_annotated(3, lease_seconds=3.0)) == 3
    finally:
        await crashed.close()  # "crashes" without storing anything
    settings = offline_settings(make_settings, pg_dsn, judge_server)
    report = await run_offline(settings, judge_kind="llm", batch=2, lease_seconds=60)
    assert report.evaluated == 1  # the three leased rows are not claimable yet
    assert loop.time() - claimed_at < 3.0, "too slow to tell leased rows from expired ones"
    # the lease is a clock: it has to run out, there is nothing to await
    await asyncio.sleep(max(0.0, claimed_at + 3.2 - loop.time()))  # the 3 s lease expires
    report = await run_offline(settings, judge_kind="llm", batch=2, limit=10)
    assert report.evaluated == 3
    assert (await backlog.store.stats()).counts["evaluated"] == 4


@pytest.mark.postgres
async def test_budget_exhaustion_stops_and_hands_rows_back(
    backlog: BacklogSink, pg_dsn: str, judge_server: JudgeServer, make_settings: SettingsFactory
) -> None:
    await seed(backlog, 6)
    settings = offline_settings(make_settings, pg_dsn, judge_server, offline_token_budget="3000/h")
    report = await run_offline(settings, judge_kind="llm", batch=2)
    assert report.stopped is not None and "budget" in report.stopped
    assert report.released >= 1
    stats = await backlog.store.stats()
    assert stats.counts["evaluating"] == 0
    assert stats.counts["evaluated"] == report.evaluated < 6
    assert stats.counts["annotated"] == 6 - report.evaluated
    assert report.usage.total_tokens <= 3000 + 2000  # reservations are estimates


@pytest.mark.postgres
async def test_limit_and_metric_selection(
    backlog: BacklogSink, pg_dsn: str, judge_server: JudgeServer, make_settings: SettingsFactory
) -> None:
    await seed(backlog, 5)
    settings = offline_settings(make_settings, pg_dsn, judge_server)
    report = await run_offline(
        settings, judge_kind="llm", metrics=["context_recall"], limit=3, batch=2
    )
    assert report.evaluated == 3
    assert list(report.metrics)[:1] == ["context_recall"]
    evaluated = [r async for r in backlog.store.rows("evaluated")]
    assert len(evaluated) == 3
    assert all(set(r.offline_scores or {}) == {"context_recall"} for r in evaluated)


@pytest.mark.postgres
async def test_unreachable_postgres_is_reported(
    judge_server: JudgeServer, make_settings: SettingsFactory
) -> None:
    from tests.support.embedded import free_port

    dsn = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    with pytest.raises(StoreError) as failed:
        await run_offline(offline_settings(make_settings, dsn, judge_server), judge_kind="llm")
    assert failed.value.retryable
