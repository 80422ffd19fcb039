"""The backlog through the real path: broker → `run.build`/`serve` → judge server → Postgres.

Issue 4's two guarantees, end to end (the sink-level version is
``test_backlog_restart.py``):

- Postgres stopped mid-stream and restarted (same port, same data): the group's
  committed offsets, read from the broker while Postgres is down, never pass a
  flagged record that is not in Postgres yet; afterwards every flagged record
  is in the backlog exactly once, ``seen_count`` is not inflated by the
  retries, and every record's offset is committed.
- Kafka redelivery: after the group's offsets are reset, a second monitor in
  the same group scores every record again and the backlog does not change.

Records are built so that the deterministic judge flags exactly the
hallucinated ones (faithfulness 0; the supported ones score 1 on every online
metric), each with a question of its own, plus one more interaction repeating
an earlier flagged question (its row's ``seen_count`` is 2, never more).
Whether a flagged record was in Postgres at a given moment is read from
``backlog_interactions.created_at`` (the enqueue transaction's start, earlier
than its commit, earlier than any offset commit that may follow it).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import asyncpg
import pytest

from monitor.app import Components, build, serve
from monitor.config import Settings
from monitor.kafka.topics import committed_offsets, produce
from tests.fixtures.kafka import Topic, monitor_settings
from tests.support.backlog import fetch, migrate
from tests.support.embedded import Broker, EmbeddedPostgres
from tests.support.judge_server import JudgeServer
from tests.support.kafka import reset_offsets
from tests.support.logs import captured_logs
from tests.support.monitor import readyz
from tests.support.records import encode, interaction
from tests.support.waits import wait_until

pytestmark = [pytest.mark.kafka, pytest.mark.postgres]
HALLUCINATION = "hallucination"
#: the earlier flagged question a later interaction asks again
REPEATED = 3


@dataclass(frozen=True)
class Sent:
    """One produced interaction and where the broker put it."""

    id: str
    flagged: bool
    partition: int
    offset: int


def traffic(numbers: Sequence[int], *, repeat: bool = False) -> list[tuple[str, bool, bytes]]:
    """(id, flagged, value) for records ``bp-N``; every third one hallucinates.

    With ``repeat``, one more interaction (``bp-3-again``) asks record 3's question.
    """
    out: list[tuple[str, bool, bytes]] = []
    asks = [(f"bp-{n}", n, n % 3 == 0) for n in numbers]
    if repeat:
        asks.append((f"bp-{REPEATED}-again", REPEATED, True))
    for record_id, question, flagged in asks:
        body: dict[str, Any] = interaction(question, supported=not flagged, route="search")
        body["id"] = record_id
        # a question of its own, which the supported answer answers (relevancy 1)
        body["user_input"] = (
            f"Are receipts required for travel expenses over {100 + question} dollars?"
        )
        out.append((record_id, flagged, encode(body)))
    return out


#: bound on one admin read of the broker (a fresh client each time): a read stuck on a
#: broker hiccup is abandoned and retried by `until` instead of hanging the test
READ_SECONDS = 10.0


async def send(topic: Topic, records: list[tuple[str, bool, bytes]]) -> list[Sent]:
    placed = await asyncio.wait_for(
        produce(topic.bootstrap, topic.name, [(rid.encode(), body) for rid, _, body in records]),
        30,
    )
    return [
        Sent(rid, flagged, partition, offset)
        for (rid, flagged, _), (partition, offset) in zip(records, placed, strict=True)
    ]


def ends(sent: Sequence[Sent], partitions: int) -> dict[int, int]:
    """The commit position of each partition once every record is finished."""
    out = dict.fromkeys(range(partitions), 0)
    for s in sent:
        out[s.partition] = max(out[s.partition], s.offset + 1)
    return out


async def committed(topic: Topic) -> dict[int, int]:
    positions = await asyncio.wait_for(
        committed_offsets(topic.bootstrap, topic.group, topic.name, topic.partitions),
        READ_SECONDS,
    )
    return {p: (pos or 0) for p, pos in positions.items()}


async def reset_group(broker: Broker, topic: Topic) -> None:
    """Commit offset 0 on every partition of the (otherwise empty) group."""
    await reset_offsets(
        topic.bootstrap,
        topic.group,
        topic.name,
        topic.partitions,
        session_timeout_ms=broker.session_timeout_ms,
        heartbeat_interval_ms=broker.heartbeat_interval_ms,
    )


async def stored(dsn: str) -> dict[str, datetime]:
    """Every interaction id in the backlog → when its enqueue transaction started."""
    conn = await asyncpg.connect(dsn, timeout=5)
    try:
        rows = await conn.fetch("SELECT interaction_id, created_at FROM backlog_interactions")
    finally:
        await conn.close()
    return {r["interaction_id"]: r["created_at"] for r in rows}


async def backlog_rows(dsn: str) -> dict[str, tuple[Any, ...]]:
    """id → (seen_count, reasons, created_at, updated_at, last_seen_at)."""
    rows = await fetch(
        dsn, "SELECT id, seen_count, reasons, created_at, updated_at, last_seen_at FROM backlog"
    )
    ((per_id,),) = await fetch(
        dsn, "SELECT coalesce(max(n), 0) FROM (SELECT count(*) AS n FROM backlog GROUP BY id) t"
    )
    assert per_id <= 1  # one row per id
    return {
        r["id"]: (r["seen_count"], list(r["reasons"]), r["created_at"], r["updated_at"],
                  r["last_seen_at"])
        for r in rows
    }  # fmt: skip


def assert_one_row_each(rows: dict[str, tuple[Any, ...]], flagged: set[str]) -> None:
    """One row per flagged interaction, except the repeated question's two, which share one.

    The shared row carries the id of whichever of the two reached Postgres first: they sit on
    different partitions, scored concurrently, so either may win.
    """
    pair = {f"bp-{REPEATED}", f"bp-{REPEATED}-again"}
    assert len(pair & set(rows)) == 1, sorted(pair & set(rows))
    assert set(rows) | pair == flagged
    assert {rid: row[0] for rid, row in rows.items()} == {
        rid: 2 if rid in pair else 1 for rid in rows
    }


def total(parts: Components, name: str) -> float:
    """The sum of a sample over all its label sets (0 when never observed)."""
    return sum(
        sample.value
        for family in parts.exporter.registry.collect()
        for sample in family.samples
        if sample.name == name
    )


@contextlib.asynccontextmanager
async def monitor(settings: Settings) -> AsyncIterator[Components]:
    """`rag-monitor run` in-process (`build` + `serve`), stopped when the block ends."""
    parts = build(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop, parts), name="monitor")
    try:

        async def running() -> bool:
            if task.done():
                task.result()  # raises what stopped it
                raise AssertionError("the monitor stopped on its own")
            return bool(parts.source.assignment)  # sinks started (migrated) before the source

        await wait_until(running, 30, "the monitor to start and get its partitions")
        yield parts
    finally:
        stop.set()
        try:
            assert await asyncio.wait_for(task, 30) == 0
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(BaseException):
                    await task


def backlog_settings(broker: Broker, topic: Topic, judge: JudgeServer, dsn: str) -> Settings:
    return monitor_settings(
        broker,
        topic,
        judge,
        pg_dsn=dsn,
        migrate_on_start=True,
        control_share=0.0,
        sample_rate=1.0,
        max_in_flight=64,
        shutdown_grace_seconds=5.0,
    )


async def test_postgres_outage_holds_offsets_and_every_flagged_record_lands_once(
    broker: Broker, topic: Topic, judge_server: JudgeServer, own_postgres: EmbeddedPostgres
) -> None:
    pg = own_postgres
    dsn = pg.dsn
    settings = backlog_settings(broker, topic, judge_server, dsn)
    snapshots: list[tuple[datetime, dict[int, int]]] = []

    async def poll_offsets() -> None:
        while True:
            with contextlib.suppress(TimeoutError):  # a stuck read: try again with a new client
                positions = await committed(topic)
                snapshots.append((datetime.now(UTC), positions))
            await asyncio.sleep(0.2)  # a sampler: a snapshot every 0.2 s, not a wait

    records = traffic(range(48), repeat=True)
    sent: list[Sent] = []
    outage = asyncio.Event()

    async def stream() -> None:
        """Small batches; the last third only once Postgres is down."""
        for k in range(0, len(records), 4):
            if k >= 32:
                await asyncio.wait_for(outage.wait(), 45)
            sent.extend(await send(topic, records[k : k + 4]))
            await asyncio.sleep(0.1)  # pacing: records keep coming while Postgres is down

    tasks: list[asyncio.Task[None]] = []
    async with monitor(settings) as parts:
        try:
            tasks.append(asyncio.create_task(poll_offsets(), name="offset-poller"))
            producer = asyncio.create_task(stream(), name="producer")
            tasks.append(producer)

            async def some_stored() -> bool:
                return len(await stored(dsn)) >= 4

            await wait_until(some_stored, 45, "the first flagged records in Postgres")

            # --- the outage, mid-stream: records keep coming, Postgres is gone
            await asyncio.to_thread(pg.stop)
            outage_start = datetime.now(UTC)
            outage.set()

            async def stuck() -> bool:
                consumed = producer.done() and (
                    total(parts, "rag_monitor_records_sampled_total") >= len(records)
                )
                errors = total(parts, "rag_monitor_backlog_write_errors_total") > 0
                during = sum(1 for t, _ in snapshots if t > outage_start)
                return consumed and errors and during >= 5

            await wait_until(stuck, 30, "the monitor to score everything while Postgres is down")
            producer.result()
            errors = total(parts, "rag_monitor_backlog_write_errors_total")
            seen = len(snapshots)
            await wait_until(
                lambda: (
                    total(parts, "rag_monitor_backlog_write_errors_total") >= errors + 2
                    and len(snapshots) >= seen + 3
                ),
                30,
                "a few more retries and snapshots",
            )
            restart = datetime.now(UTC)
            await asyncio.to_thread(pg.start)
            assert pg.dsn == dsn  # same port, same data

            final_ends = ends(sent, topic.partitions)
            flagged = {s.id for s in sent if s.flagged}

            async def all_committed() -> bool:
                return await committed(topic) == final_ends

            # sinks before offsets: once everything is committed, everything is stored
            await wait_until(all_committed, 40, "every offset to be committed after the restart")
            assert not tasks[0].done(), "the offset poller stopped early"
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    # --- committed offsets never ran ahead of the backlog
    present = await stored(dsn)
    checked = 0
    for seen_at, positions in snapshots:
        for s in sent:
            if s.flagged and s.offset < positions[s.partition]:
                assert s.id in present and present[s.id] <= seen_at, (
                    f"offset {s.offset} of partition {s.partition} committed by {seen_at} "
                    f"before {s.id} was in Postgres ({present.get(s.id)})"
                )
                checked += 1
    assert checked > 0
    during = [(t, p) for t, p in snapshots if outage_start < t < restart]
    assert len(during) >= 5
    held = [s for s in sent if s.flagged and present[s.id] > restart]
    assert held, "no flagged record waited for Postgres: the outage tested nothing"
    for _, positions in during:
        for s in held:
            assert positions[s.partition] <= s.offset
    assert total(parts, "rag_monitor_backlog_write_errors_total") > 0

    # --- every flagged record once, nothing lost, nothing counted twice
    assert set(present) == flagged
    rows = await backlog_rows(dsn)
    assert_one_row_each(rows, flagged)
    assert all(row[1] and row[1][0] == HALLUCINATION for row in rows.values())
    enqueued = parts.exporter.registry.get_sample_value(
        "rag_monitor_backlog_enqueued_total", {"reason": HALLUCINATION}
    )
    # one per interaction queued, never more: failed attempts count nothing. It may be
    # fewer: a COMMIT that Postgres applied as it shut down, whose reply never arrived, is
    # retried, finds its interactions there and (rightly) stores nothing new, so they go
    # uncounted
    assert enqueued is not None and 0 < enqueued <= len(present)
    # the sink retries counted nothing twice; only a rebalance (a legitimate redelivery,
    # e.g. a missed heartbeat on a loaded machine) could score a record again
    assert total(parts, "rag_monitor_records_skipped_total") == 0
    assert total(parts, "rag_monitor_records_scored_total") >= len(sent)
    assert total(parts, "rag_monitor_hallucinations_total") >= len(flagged)
    assert await committed(topic) == final_ends


async def test_redelivered_records_leave_the_backlog_unchanged(
    broker: Broker, topic: Topic, judge_server: JudgeServer, pg_dsn: str
) -> None:
    settings = backlog_settings(broker, topic, judge_server, pg_dsn)
    sent = await send(topic, traffic(range(0, 24), repeat=True))
    flagged = {s.id for s in sent if s.flagged}
    final_ends = ends(sent, topic.partitions)

    async def done(parts: Components) -> bool:
        return (
            total(parts, "rag_monitor_records_scored_total") >= len(sent)
            and flagged <= set(await stored(pg_dsn))
            and await committed(topic) == final_ends
        )

    async with monitor(settings) as first:
        await wait_until(lambda: done(first), 45, "the first monitor to finish")
    rows = await backlog_rows(pg_dsn)
    links = await stored(pg_dsn)
    assert set(links) == flagged
    assert_one_row_each(rows, flagged)

    # the last batches were never committed, as far as the group knows
    await reset_group(broker, topic)
    assert await committed(topic) == dict.fromkeys(range(topic.partitions), 0)

    async with monitor(settings) as second:
        await wait_until(lambda: done(second), 45, "the second monitor to finish the redelivery")
    assert total(second, "rag_monitor_records_sampled_total") >= len(sent)  # all redelivered
    assert total(second, "rag_monitor_backlog_enqueued_total") == 0
    assert total(second, "rag_monitor_backlog_write_errors_total") == 0
    assert await backlog_rows(pg_dsn) == rows  # seen_count, reasons, timestamps untouched
    assert await stored(pg_dsn) == links


async def test_readyz_reports_an_unmigrated_schema_and_the_log_names_migrate(
    broker: Broker, topic: Topic, judge_server: JudgeServer, pg_dsn: str
) -> None:
    from monitor.backlog.migrations import migration_files

    settings = backlog_settings(broker, topic, judge_server, pg_dsn).model_copy(
        update={"migrate_on_start": False}
    )
    with captured_logs() as logs:
        async with monitor(settings) as parts:
            status, body = await asyncio.to_thread(readyz, parts.server.port)
            assert status == 200  # consuming and exporting: the schema is reported, not gated
            assert body["checks"]["postgres"] is True and body["checks"]["schema"] is False
            assert body["checks"]["partitions"] is True
            said = [e for e in logs if "rag-monitor migrate" in e["event"]]
            bundled = [version for version, _ in migration_files()]
            assert len(said) == 1 and said[0]["missing"] == bundled
            assert (await asyncio.to_thread(readyz, parts.server.port))[1]["ready"] is True
            assert len([e for e in logs if "rag-monitor migrate" in e["event"]]) == 1  # once
            await migrate(pg_dsn, settings)
            status, body = await asyncio.to_thread(readyz, parts.server.port)
            assert status == 200 and body["checks"]["schema"] is True


async def test_no_context_is_its_own_flag_and_an_empty_response_is_dead_lettered(
    broker: Broker, topic: Topic, judge_server: JudgeServer, pg_dsn: str
) -> None:
    """Issue 21: a retrieval failure is not a hallucination; an answer of nothing is invalid.

    Two answers come with no context (none, and one blank chunk): faithfulness 0 by
    definition, flagged ``no_context``, out of the hallucination rate. Two responses are
    empty or blank: dead-lettered as ``empty_response``, never scored. One hallucinates
    with a context and one is supported: the rate is 1 of those 2.
    """
    import json
    import urllib.request

    from monitor.kafka.dead_letter import HEADER_REASON
    from tests.support.kafka import read_topic
    from tests.support.records import samples

    def record(rid: str, n: int, **fields: Any) -> tuple[str, bool, bytes]:
        body: dict[str, Any] = {**interaction(n, supported=True, route="search"), **fields}
        body["id"] = rid
        body["user_input"] = f"Are receipts required for travel expenses over {100 + n} dollars?"
        return rid, False, encode(body)

    unsupported = interaction(2, supported=False)["response"]
    records = [
        record("nc-none", 0, retrieved_contexts=[], response=unsupported),
        record("nc-blank", 1, retrieved_contexts=["  "], response=unsupported),
        record("hallucinated", 2, response=unsupported),
        record("supported", 3),
        record("empty", 4, response=""),
        record("blank", 5, response=" \n "),
    ]
    dead = {"empty", "blank"}
    sent = await send(topic, records)
    final_ends = ends(sent, topic.partitions)
    settings = backlog_settings(broker, topic, judge_server, pg_dsn)

    def scrape(port: int) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            text: str = r.read().decode()
        return text

    async with monitor(settings) as parts:

        async def done() -> bool:
            return (
                total(parts, "rag_monitor_records_scored_total") >= 4
                and total(parts, "rag_monitor_records_invalid_total") >= 2
                and await committed(topic) == final_ends
            )

        await wait_until(done, 45, "every record scored or dead-lettered, and committed")
        text = await asyncio.to_thread(scrape, parts.server.port)

    def series(name: str) -> dict[tuple[tuple[str, str], ...], float]:
        return {k: v for k, v in samples(text, name).items() if v}

    search = (("judge", "llm"), ("route", "search"))
    # counted: four scored, two invalid, nothing skipped, every offset committed
    assert sum(samples(text, "rag_monitor_records_scored_total").values()) == 4
    assert series("rag_monitor_records_invalid_total") == {(("reason", "empty_response"),): 2}
    assert series("rag_monitor_records_skipped_total") == {}
    # the retrieval failures on their own series, the hallucination rate without them
    assert series("rag_monitor_no_context_total") == {search: 2}
    assert series("rag_monitor_no_context_weight_total") == {search: 2}
    assert series("rag_monitor_hallucinations_total") == {search: 1}
    assert series("rag_monitor_hallucination_weight_total") == {search: 1}
    assert series("rag_monitor_scored_weight_total") == {search: 2}  # rate 1/2, not 3/4
    # the metric keeps its definition: faithfulness 0 against no context, a fail verdict
    fails = samples(text, "rag_monitor_verdicts_total")
    assert fails[(("judge", "llm"), ("metric", "faithfulness"), ("verdict", "fail"))] == 3
    enqueued = series("rag_monitor_backlog_enqueued_total")
    assert enqueued[(("reason", "no_context"),)] == 2
    assert enqueued[(("reason", "hallucination"),)] == 1
    # the backlog: no_context rows, not hallucination ones
    rows = await backlog_rows(pg_dsn)
    reasons = {rid: row[1] for rid, row in rows.items()}
    assert set(reasons) == {"nc-none", "nc-blank", "hallucinated"}
    assert reasons["nc-none"][0] == reasons["nc-blank"][0] == "no_context"
    assert "hallucination" not in reasons["nc-none"] + reasons["nc-blank"]
    assert reasons["hallucinated"][0] == "hallucination"
    # the empty responses in the dead-letter topic, with their reason and original bytes
    letters = await read_topic(topic.bootstrap, topic.dlq, expected=2)
    by_key = {d.key.decode(): d for d in letters if d.key is not None}
    assert set(by_key) == dead
    for rid, _, value in records:
        if rid in dead:
            assert dict(by_key[rid].headers)[HEADER_REASON] == b"empty_response"
            assert by_key[rid].value == value
            assert json.loads(value)["response"].strip() == ""
