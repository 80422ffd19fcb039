"""`rag-monitor run` on OTLP input, SIGKILLed while traces are half-read, then restarted.

Nothing is lost (every trace reaches the backlog, whole) and nothing is stored twice
(each trace id once, every row seen once, though the restart scores the whole traces
again), with the trace ids in the rows.
"""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from monitor.backlog.export import export_rows
from monitor.backlog.store import BacklogStore
from monitor.config import Settings
from monitor.demo.spans import MS, SpanRecorder, encode, openinference_trace
from monitor.kafka.topics import committed_offsets, produce
from tests.fixtures.kafka import Topic
from tests.support.embedded import Broker, free_port
from tests.support.judge_server import JudgeServer
from tests.support.monitor import Monitor, environment
from tests.support.records import interaction
from tests.support.spans import T0
from tests.support.waits import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]
WHOLE = 16  # traces produced whole before the kill
HALF = 4  # traces whose root span arrives only after the restart


def traces() -> tuple[list[tuple[int, bytes]], list[tuple[int, bytes]], dict[str, str]]:
    """(partition, message) before and after the kill; trace id → its question."""
    recorder = SpanRecorder(service="search-api", environment="test")
    before: list[tuple[int, bytes]] = []
    after: list[tuple[int, bytes]] = []
    questions: dict[str, str] = {}
    for i in range(WHOLE + HALF):
        record = interaction(i, supported=False)  # every trace is flagged: all go to the backlog
        record["user_input"] = f"When do I need a receipt for trip number {i}?"
        trace_id = openinference_trace(recorder, record, start_ns=T0 + i * 1000 * MS,
                                       extra_spans=3)  # fmt: skip
        questions[trace_id] = record["user_input"]
        spans = recorder.take()
        partition = i % 4
        first, rest = encode(spans[:4]), encode(spans[4:])  # the retrieval, then the rest
        if i < WHOLE:
            before += [(partition, first), (partition, rest)]
        else:
            # first on its partition: while it waits, nothing after it can be committed
            before.insert(0, (partition, first))
            after.append((partition, rest))  # the root is in here
    recorder.shutdown()
    return before, after, questions


async def send(topic: Topic, messages: list[tuple[int, bytes]]) -> None:
    for partition in range(4):
        values = [(None, m) for p, m in messages if p == partition]
        if values:
            await produce(topic.bootstrap, topic.name, values, partition=partition)


async def rows(dsn: str) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(dsn, timeout=10)
    try:
        # one snapshot for both reads: the monitor may still be writing while a test waits
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            found = await conn.fetch(
                "SELECT id, trace_id, span_id, seen_count, record FROM backlog ORDER BY id"
            )
            links = await conn.fetchval("SELECT count(*) FROM backlog_interactions")
    finally:
        await conn.close()
    assert links == len(found)
    return [dict(r) | {"record": _json(r["record"])} for r in found]


def _json(value: Any) -> dict[str, Any]:
    out: dict[str, Any] = json.loads(value) if isinstance(value, str) else value
    return out


async def test_sigkill_mid_trace_then_restart_loses_nothing_and_stores_each_trace_once(
    broker: Broker, topic: Topic, judge_server: JudgeServer, pg_dsn: str, tmp_path: Path
) -> None:
    before, after, questions = traces()
    await send(topic, before)
    port = free_port()
    env = environment(broker, topic, judge_server, port, **{  # type: ignore[arg-type]
        "RAG_MONITOR_INPUT_FORMAT": "otlp_proto",
        "RAG_MONITOR_SAMPLE_RATE": "1.0",
        "RAG_MONITOR_MAX_IN_FLIGHT": "64",
        "RAG_MONITOR_TRACE_GRACE_SECONDS": "0.3",
        "RAG_MONITOR_PG_DSN": pg_dsn,
        "RAG_MONITOR_MIGRATE_ON_START": "true",
        "RAG_MONITOR_CONTROL_SHARE": "0",
        "RAG_MONITOR_KAFKA_GROUP_INSTANCE_ID": "monitor-0",
    })  # fmt: skip
    first = Monitor(env, port, tmp_path / "first.log")
    try:
        # (a record counts as scored once its row is written: `Checkpoint.commit`)
        await asyncio.to_thread(first.wait_metric, "rag_monitor_records_scored_total", WHOLE, 90)
        # the positions below are a negative (no commit passes the held messages): time for
        await asyncio.sleep(1.5)  # a few checkpoints (every 0.5 s) to commit what they can
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(10)
    finally:
        first.kill()
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    # the half-read traces hold their first message back, and with it every later one:
    # the restart reads the whole traces again (and must not store them twice)
    assert all(positions[p] in (None, 0) for p in range(4)), (positions, first.output())
    assert len(await rows(pg_dsn)) == WHOLE
    await send(topic, after)
    second = Monitor(env, port, tmp_path / "second.log")
    try:
        await asyncio.to_thread(second.wait_metric, "rag_monitor_traces_total", WHOLE + HALF, 90)

        async def all_stored() -> bool:
            return len(await rows(pg_dsn)) >= WHOLE + HALF

        await wait_until(all_stored, 20, "every trace in the backlog")
        # and every trace scored again, the redelivered ones too: written to the backlog
        await asyncio.to_thread(second.wait_metric, "rag_monitor_records_scored_total",
                                WHOLE + HALF, 60)  # fmt: skip
        second.process.send_signal(signal.SIGTERM)
        assert await asyncio.to_thread(second.process.wait, 30) == 0, second.output()
    finally:
        second.kill()
    stored = await rows(pg_dsn)
    assert {r["id"] for r in stored} == set(questions)  # nothing lost
    for row in stored:
        assert row["seen_count"] == 1, row["id"]  # the redelivered trace was not counted again
        assert row["trace_id"] == row["id"] and row["span_id"]
        assert row["record"]["user_input"] == questions[row["id"]]  # assembled whole
        assert len(row["record"]["retrieved_contexts"]) == 1
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert positions == {p: 10 for p in range(4)}
    # the export carries the links too (jsonl and csv)
    store = BacklogStore(pg_dsn, Settings())
    await store.start()
    try:
        lines = [json.loads(line) async for line in export_rows(store.rows(None), "jsonl")]
        csv_lines = [line async for line in export_rows(store.rows(None), "csv")]
    finally:
        await store.close()
    assert {line["trace_id"] for line in lines} == set(questions)
    assert all(line["span_id"] for line in lines)
    assert all(any(t in line for line in csv_lines) for t in questions)
