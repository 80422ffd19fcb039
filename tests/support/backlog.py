"""Backlog test helpers: a scored record that the backlog queues, and reading Postgres directly."""

from __future__ import annotations

import math
from typing import Any

import asyncpg

from monitor.backlog.store import BacklogStore
from monitor.config import Settings
from monitor.records import Context, Interaction, MetricResult, ScoredRecord


def scored(
    rid: str,
    question: str = "When do I need to attach a receipt?",
    *,
    faithfulness: float = 0.2,
    response: str = "Always attach it.",
    contexts: tuple[str, ...] = ("Receipts are needed for expenses over $100.",),
    metadata: dict[str, Any] | None = None,
    details: dict[str, Any] | None = None,
) -> ScoredRecord:
    interaction = Interaction(
        id=rid,
        user_input=question,
        retrieved_contexts=tuple(Context(text=c) for c in contexts),
        response=response,
        metadata=metadata or {"route": "hr"},
    )
    return ScoredRecord(
        interaction=interaction,
        results={
            "faithfulness": MetricResult(
                metric="faithfulness",
                score=faithfulness,
                details=details or {"statements": [{"statement": response, "verdict": 0}]},
            ),
            "context_utility": MetricResult(metric="context_utility", score=math.nan),
        },
        inclusion_probability=0.1,
    )


async def fetch(dsn: str, sql: str, *args: object) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        rows: list[asyncpg.Record] = await conn.fetch(sql, *args)
        return rows
    finally:
        await conn.close()


async def migrate(dsn: str, settings: Settings) -> None:
    """Bring the backlog schema at ``dsn`` up to date, as `rag-monitor migrate` does."""
    store = BacklogStore(dsn, settings)
    await store.start()
    try:
        await store.migrate()
    finally:
        await store.close()
