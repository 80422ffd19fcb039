"""The backlog store and its sink: migrations, idempotent enqueue, seen_count, redaction, claims."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import socket
from collections.abc import Callable

import asyncpg
import pytest

from monitor.backlog.entries import is_control, normalise_question, question_hash
from monitor.backlog.export import export_rows
from monitor.backlog.gauges import BacklogGauges
from monitor.backlog.migrations import MigrationError, apply_migrations, migration_files
from monitor.backlog.reviews import ImportRow
from monitor.backlog.store import BacklogStore, StoreError
from monitor.config import RedactionPattern, Settings
from monitor.records import MetricResult, ScoredRecord
from monitor.sinks import SinkBackpressure
from monitor.sinks.backlog import BacklogSink
from monitor.telemetry import Exporter
from tests.fixtures.postgres import BacklogFactory
from tests.support.backlog import fetch, scored
from tests.support.embedded import free_port
from tests.support.waits import wait_until

pytestmark = pytest.mark.postgres

SettingsFactory = Callable[..., Settings]


def counter(exporter: Exporter | None, name: str, **labels: str) -> float:
    assert exporter is not None
    value = exporter.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def enqueued(sink: BacklogSink, reason: str) -> float:
    return counter(sink.exporter, "rag_monitor_backlog_enqueued_total", reason=reason)


# --- pure helpers


def test_normalised_question() -> None:
    assert normalise_question("  When do I NEED a receipt?!  ") == "when do i need a receipt"
    assert normalise_question("when do\ti need\n a receipt") == "when do i need a receipt"
    assert question_hash("When do I need a receipt?") == question_hash("when do i need a receipt")
    assert question_hash("When do I need a receipt?") != question_hash("When do I need a taxi?")


def test_control_share_is_deterministic_and_near_the_share() -> None:
    ids = [f"id-{i}" for i in range(20000)]
    picked = [i for i in ids if is_control(i, 0.01)]
    assert 140 <= len(picked) <= 260  # 1% of 20000 = 200, ±~4 sigma
    assert picked == [i for i in ids if is_control(i, 0.01)]
    assert not any(is_control(i, 0.0) for i in ids[:1000])
    assert all(is_control(i, 1.0) for i in ids[:1000])


def test_migration_files_are_numbered() -> None:
    versions = [v for v, _ in migration_files()]
    assert versions and versions[0].startswith("0001_")
    assert versions == sorted(versions)


# --- migrations


async def test_migrate_from_empty_and_rerun(pg_dsn: str, make_settings: SettingsFactory) -> None:
    store = BacklogStore(pg_dsn, make_settings())
    await store.start()
    try:
        applied = await store.migrate()
        assert applied == [v for v, _ in migration_files()]
        assert await store.migrate() == []
        # concurrent migrators: the advisory lock serialises them, nothing is applied twice
        assert await asyncio.gather(*(store.migrate() for _ in range(3))) == [[], [], []]
    finally:
        await store.close()
    rows = await fetch(pg_dsn, "SELECT version FROM schema_migrations")
    assert [r["version"] for r in rows] == applied
    tables = await fetch(
        pg_dsn,
        "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1",
    )
    assert [r["tablename"] for r in tables] == [
        "backlog",
        "backlog_answers",
        "backlog_interactions",
        "backlog_traffic",
        "backlog_verdicts",
        "schema_migrations",
    ]


async def test_concurrent_first_migrations_apply_once(pg_dsn: str) -> None:
    conns = [await asyncpg.connect(pg_dsn, timeout=10) for _ in range(3)]
    try:
        results = await asyncio.gather(*(apply_migrations(c) for c in conns))
    finally:
        for c in conns:
            await c.close()
    assert sorted(len(r) for r in results) == [0, 0, len(migration_files())]


async def test_changed_migration_is_refused(backlog: BacklogSink, pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn, timeout=10)
    try:
        await conn.execute("UPDATE schema_migrations SET checksum = 'edited'")
    finally:
        await conn.close()
    with pytest.raises(MigrationError, match="changed"):
        await backlog.store.migrate()


async def test_migrate_on_start(pg_dsn: str, make_settings: SettingsFactory) -> None:
    store = BacklogStore(pg_dsn, make_settings(migrate_on_start=True))
    await store.start()
    try:
        assert (await store.stats()).rows == 0
    finally:
        await store.close()


async def test_constructor_has_no_side_effects(make_settings: SettingsFactory) -> None:
    # a listener where Postgres would be: a connection attempt would wait in its queue
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        dsn = f"postgresql://nobody@127.0.0.1:{listener.getsockname()[1]}/none"
        settings = make_settings()
        tasks = asyncio.all_tasks()
        sink = BacklogSink(BacklogStore(dsn, settings), settings, Exporter())
        BacklogGauges(sink.store, Exporter(), stats_interval=0.01)
        await asyncio.sleep(0.2)  # whatever construction scheduled has run by now
        assert asyncio.all_tasks() == tasks  # no stats or calibration task
        with pytest.raises(BlockingIOError):
            listener.accept()  # nobody connected
    with pytest.raises(StoreError) as caught:
        async with sink.store.connection():
            pass
    assert caught.value.detail == "not started" and not caught.value.retryable


# --- enqueue


async def test_flagged_records_are_queued_unflagged_are_not(backlog: BacklogSink) -> None:
    await backlog.write([scored("bad", "q one"), scored("good", "q two", faithfulness=1.0)])
    row = await backlog.store.get("bad")
    assert row is not None
    assert row.status == "pending"
    assert row.reasons == ["hallucination"]
    assert row.seen_count == 1
    assert row.online_scores == {"faithfulness": 0.2, "context_utility": None}
    assert row.online_details["faithfulness"]["statements"][0]["verdict"] == 0
    assert row.record["user_input"] == "q one"
    assert await backlog.store.get("good") is None
    assert enqueued(backlog, "hallucination") == 1


async def test_redelivery_is_idempotent(backlog: BacklogSink, pg_dsn: str) -> None:
    batch = [scored("a", "first question"), scored("b", "second question")]
    for _ in range(3):
        await backlog.write(batch)
    rows = await fetch(pg_dsn, "SELECT id, seen_count FROM backlog ORDER BY id")
    assert [(r["id"], r["seen_count"]) for r in rows] == [("a", 1), ("b", 1)]
    assert enqueued(backlog, "hallucination") == 2


async def test_repeated_question_increments_seen_count(backlog: BacklogSink, pg_dsn: str) -> None:
    await backlog.write([scored("q1", "When do I need a receipt?")])
    await backlog.write([scored("q2", "  when do i NEED a receipt  ")])
    low_relevancy = scored("q3", "When do I need... a receipt!", faithfulness=1.0)
    low_relevancy.results["response_relevancy"] = MetricResult(
        metric="response_relevancy", score=0.1
    )
    await backlog.write([low_relevancy])
    # redeliveries of a merged id and of the first id change nothing
    await backlog.write([scored("q2", "  when do i NEED a receipt  ")])
    await backlog.write([scored("q1", "When do I need a receipt?")])
    rows = await fetch(pg_dsn, "SELECT id, seen_count, reasons FROM backlog")
    assert [(r["id"], r["seen_count"], r["reasons"]) for r in rows] == [
        ("q1", 3, ["hallucination", "low_relevancy"])
    ]
    links = await fetch(
        pg_dsn, "SELECT interaction_id, backlog_id FROM backlog_interactions ORDER BY 1"
    )
    assert [(r["interaction_id"], r["backlog_id"]) for r in links] == [
        ("q1", "q1"),
        ("q2", "q1"),
        ("q3", "q1"),
    ]
    stats = await backlog.store.stats()
    assert stats.interactions == 3
    assert stats.seen_total == 3


async def test_a_pending_row_holds_the_lowest_ids_record_in_any_delivery_order(
    backlog: BacklogSink, pg_dsn: str
) -> None:
    """The contexts the offline metrics read come from one interaction chosen by id, not by
    arrival, so replaying the same traffic gives the same offline figures; once a row is
    annotated its record no longer changes under the reference."""

    def asked(rid: str, question: str) -> ScoredRecord:
        return scored(rid, question, contexts=(f"context of {rid}",), metadata={"route": rid})

    # two questions, each asked twice, delivered in opposite orders
    await backlog.write([asked("b-2", "Who signs off travel?"), asked("c-1", "Is it taxed?")])
    await backlog.write([asked("b-1", "who signs off travel"), asked("c-2", "is it TAXED")])
    rows = await fetch(
        pg_dsn, "SELECT id, record->>'id' AS kept, route, seen_count FROM backlog ORDER BY id"
    )
    assert [tuple(r) for r in rows] == [("b-2", "b-1", "b-1", 2), ("c-1", "c-1", "c-1", 2)]
    row = await backlog.store.get("b-2")
    assert row is not None
    assert row.to_interaction().retrieved_contexts[0].text == "context of b-1"
    # annotated: a lower id arriving later is counted, its record not taken
    taxed = await backlog.store.get("c-1")
    assert taxed is not None
    await backlog.store.review("c-1", version=taxed.version, reviewer="ana", reference="No.")
    await backlog.write([asked("c-0", "Is it taxed??")])
    (kept,) = await fetch(pg_dsn, "SELECT record->>'id', seen_count FROM backlog WHERE id = 'c-1'")
    assert tuple(kept) == ("c-1", 3)


async def test_enqueued_counts_interactions_and_the_traffic_totals_every_scored_record(
    backlog: BacklogSink, pg_dsn: str
) -> None:
    merged = scored("m2", "  when do i NEED a receipt  ")
    merged.inclusion_probability = 0.5
    unscored = scored("u", "no faithfulness")
    del unscored.results["faithfulness"]
    batch = [
        scored("m1", "When do I need a receipt?"),
        merged,  # merged into m1's row: a second interaction queued, not a second row
        scored("fine", "a good one", faithfulness=1.0),  # not queued, but scored
        unscored,  # in neither total: no faithfulness score
    ]
    await backlog.write(batch)
    assert enqueued(backlog, "hallucination") == 2
    stats = await backlog.store.stats()
    assert stats.rows == 1 and stats.interactions == 2
    assert stats.interactions_by_reason == {"hallucination": 2}
    calibration = await backlog.store.calibration()
    assert calibration.traffic is not None
    assert (calibration.traffic.scored, calibration.traffic.hallucinations) == (3, 2)
    # weights 1/p: 1/0.1 for the records of `scored`, 1/0.5 for the merged one
    assert calibration.traffic.scored_weight == pytest.approx(10 + 2 + 10)
    assert calibration.traffic.hallucination_weight == pytest.approx(10 + 2)
    assert calibration.raw_rate == pytest.approx(12 / 22)
    # a redelivery queues nothing new; like the exporter's counters, the totals count it
    await backlog.write(batch)
    assert enqueued(backlog, "hallucination") == 2
    again = await backlog.store.calibration()
    assert again.traffic is not None and again.traffic.scored == 6


async def test_same_question_in_one_batch_and_concurrent_writers(
    backlog: BacklogSink, pg_dsn: str
) -> None:
    await backlog.write([scored("x1", "same?"), scored("x2", "Same"), scored("x1", "same?")])
    await asyncio.gather(*(backlog.write([scored(f"y{i}", "SAME!")]) for i in range(4)))
    rows = await fetch(pg_dsn, "SELECT id, seen_count FROM backlog")
    assert [(r["id"], r["seen_count"]) for r in rows] == [("x1", 6)]


async def test_control_share_queues_unflagged_records(make_backlog: BacklogFactory) -> None:
    async with make_backlog(control_share=1.0) as sink:
        await sink.write([scored("fine", "a good one", faithfulness=1.0)])
        row = await sink.store.get("fine")
        assert row is not None and row.reasons == ["control"]
        assert counter(sink.exporter, "rag_monitor_backlog_enqueued_total", reason="control") == 1


async def test_records_with_scoring_errors_are_not_queued(backlog: BacklogSink) -> None:
    record = scored("err")
    record.error = "timeout"
    await backlog.write([record])
    assert await backlog.store.get("err") is None


async def test_pii_is_redacted_before_storage(pg_dsn: str, make_backlog: BacklogFactory) -> None:
    async with make_backlog(
        redaction_patterns=[RedactionPattern(name="employee_id", pattern=r"\bEMP-\d{6}\b")]
    ) as sink:
        await sink.write(
            [
                scored(
                    "pii",
                    "I am jane.doe@example.com, EMP-123456, card 4111 1111 1111 1111?",
                    response="Call +1 (555) 123-4567; refund to DE89 3704 0044 0532 0130 00.",
                    contexts=("Contact hr@example.org for help.",),
                    metadata={"route": "hr", "feedback": "mail me at jane.doe@example.com"},
                    details={"statements": [{"statement": "Call +1 (555) 123-4567", "v": 0}]},
                )
            ]
        )
    rows = await fetch(
        pg_dsn, "SELECT record::text AS r, online_details::text AS d, redactions FROM backlog"
    )
    stored = rows[0]["r"] + rows[0]["d"]
    for secret in ("jane.doe", "hr@example.org", "4111", "123-4567", "DE89", "EMP-123456"):
        assert secret not in stored
    record = json.loads(rows[0]["r"])
    assert record["user_input"] == "I am [EMAIL], [EMPLOYEE_ID], card [CARD]?"
    assert record["response"] == "Call [PHONE]; refund to [IBAN]."
    assert record["retrieved_contexts"][0]["text"] == "Contact [EMAIL] for help."
    assert record["metadata"]["feedback"] == "mail me at [EMAIL]"
    redactions = {r["kind"]: r["count"] for r in json.loads(rows[0]["redactions"])}
    assert redactions == {"email": 3, "iban": 1, "card": 1, "phone": 2, "employee_id": 1}


async def test_redaction_can_be_turned_off(make_backlog: BacklogFactory) -> None:
    async with make_backlog(redact_pii=False) as sink:
        await sink.write([scored("raw", "I am jane@example.com")])
        row = await sink.store.get("raw")
        assert row is not None and row.user_input == "I am jane@example.com"
        assert row.redactions == []


INJECTIONS = [
    "'); DROP TABLE backlog; --",
    "Robert'); DROP TABLE backlog_interactions;--",
    "x' OR '1'='1",
    "$1 $2 \\x00 %s {0} \\' \" ; -- /* */",
    "1; UPDATE backlog SET status = 'discarded' WHERE true; --",
    "NUL\x00byte",
]


async def test_sql_injection_strings_are_stored_verbatim(backlog: BacklogSink, pg_dsn: str) -> None:
    for i, evil in enumerate(INJECTIONS):
        await backlog.write(
            [
                scored(
                    evil,
                    f"{i} {evil}",
                    response=evil,
                    contexts=(evil, "plain"),
                    metadata={"route": evil, evil: evil},
                )
            ]
        )
    tables = await fetch(
        pg_dsn, "SELECT count(*) AS n FROM pg_tables WHERE schemaname = current_schema()"
    )
    assert tables[0]["n"] == 6
    for i, evil in enumerate(INJECTIONS):
        stored = evil.replace("\x00", "\ufffd")  # Postgres text cannot hold NUL
        row = await backlog.store.get(stored)
        assert row is not None, evil
        assert row.status == "pending"
        assert row.user_input == f"{i} {stored}"
        assert row.response == stored
        assert row.context_texts == [stored, "plain"]
        assert row.record["metadata"] == {"route": stored, stored: stored}
    report = await backlog.store.import_references(
        ImportRow(line=i + 1, id=e.replace("\x00", "\ufffd"), reference=e)
        for i, e in enumerate(INJECTIONS)
    )
    assert report.rejected == []
    assert len(report.changed) == len(INJECTIONS)
    row = await backlog.store.get(INJECTIONS[0])
    assert row is not None and row.reference == INJECTIONS[0] and row.status == "annotated"
    lines = [
        json.loads(line) async for line in export_rows(backlog.store.rows("annotated"), "jsonl")
    ]
    assert sorted(line["response"] for line in lines) == sorted(
        e.replace("\x00", "\ufffd") for e in INJECTIONS
    )
    assert (await backlog.store.stats()).counts["annotated"] == len(INJECTIONS)


# --- durability


async def test_write_asks_to_wait_when_postgres_is_unreachable(
    make_settings: SettingsFactory,
) -> None:
    exporter = Exporter()
    settings = make_settings()
    dsn = f"postgresql://postgres@127.0.0.1:{free_port()}/postgres"
    store = BacklogStore(dsn, settings, connect_timeout=1.0)
    sink = BacklogSink(store, settings, exporter)
    with pytest.raises(SinkBackpressure) as failed_start:
        await sink.start()
    assert failed_start.value.retry_after > 0
    try:
        with pytest.raises(SinkBackpressure) as failed:
            await sink.write([scored("lost", "q")])
        assert failed.value.retry_after > failed_start.value.retry_after  # it backs off
        assert counter(exporter, "rag_monitor_backlog_write_errors_total") == 1
        # nothing to store: no connection needed, no error
        await sink.write([scored("fine", "q", faithfulness=1.0)])
        assert counter(exporter, "rag_monitor_backlog_write_errors_total") == 1
    finally:
        await sink.aclose()


async def test_write_before_migrate_is_retried_not_dropped(
    pg_dsn: str, make_settings: SettingsFactory
) -> None:
    settings = make_settings()
    sink = BacklogSink(BacklogStore(pg_dsn, settings), settings, Exporter())
    await sink.start()
    try:
        with pytest.raises(SinkBackpressure) as failed:
            await sink.write([scored("a", "q")])
        # not refused for good: an operator runs `rag-monitor migrate`, then it works
        assert failed.value.retry_after > 0
        assert "42P01" in str(failed.value)
        await sink.store.migrate()
        await sink.write([scored("a", "q")])
        assert await sink.store.get("a") is not None
    finally:
        await sink.aclose()


async def test_stats_refresh_the_size_gauge(pg_dsn: str, make_settings: SettingsFactory) -> None:
    exporter = Exporter()
    settings = make_settings(migrate_on_start=True)
    sink = BacklogSink(BacklogStore(pg_dsn, settings), settings, exporter)
    gauges = BacklogGauges(sink.store, exporter, stats_interval=0.05)
    await sink.start()
    await gauges.start()
    try:
        await sink.write([scored("a", "q1"), scored("b", "q2")])
        await sink.store.discard(["b"])
        await wait_until(
            lambda: counter(exporter, "rag_monitor_backlog_size", status="discarded") == 1,
            5,
            "a stats refresh after the discard",
            interval=0.05,
        )
        assert counter(exporter, "rag_monitor_backlog_size", status="pending") == 1
        assert counter(exporter, "rag_monitor_backlog_size", status="discarded") == 1
        assert counter(exporter, "rag_monitor_backlog_size", status="evaluated") == 0
    finally:
        await gauges.aclose()
        await sink.aclose()


# --- export


async def test_export_formats(backlog: BacklogSink) -> None:
    await backlog.write(
        [
            scored("e1", 'Question one, with "quotes"\nand a newline?', contexts=("c1", "c2")),
            scored("e2", "Question two"),
        ]
    )
    await backlog.store.import_references([ImportRow(line=1, id="e1", reference="The reference.")])

    lines = [
        json.loads(line) async for line in export_rows(backlog.store.rows("annotated"), "jsonl")
    ]
    assert len(lines) == 1
    line = lines[0]
    assert {"id", "user_input", "retrieved_contexts", "response", "reasons", "scores"} <= set(line)
    assert line["id"] == "e1"
    assert line["retrieved_contexts"] == ["c1", "c2"]
    assert line["reasons"] == ["hallucination"]
    assert line["scores"]["faithfulness"] == 0.2
    assert line["reference"] == "The reference."

    text = "".join([chunk async for chunk in export_rows(backlog.store.rows("pending"), "csv")])
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [r["id"] for r in rows] == ["e2"]
    assert json.loads(rows[0]["retrieved_contexts"]) == [
        "Receipts are needed for expenses over $100."
    ]
    assert json.loads(rows[0]["reasons"]) == ["hallucination"]
    assert json.loads(rows[0]["scores"]) == {"faithfulness": 0.2, "context_utility": None}

    text = "".join([chunk async for chunk in export_rows(backlog.store.rows("annotated"), "csv")])
    assert list(csv.DictReader(io.StringIO(text)))[0]["user_input"] == (
        'Question one, with "quotes"\nand a newline?'
    )

    ragas = [
        json.loads(line) async for line in export_rows(backlog.store.rows("annotated"), "ragas")
    ]
    assert ragas == [
        {
            "id": "e1",  # Ragas ignores it; the golden set keeps its way back to the row
            "user_input": 'Question one, with "quotes"\nand a newline?',
            "retrieved_contexts": ["c1", "c2"],
            "response": "Always attach it.",
            "reference": "The reference.",
        }
    ]
    with pytest.raises(ValueError, match="unknown status"):
        [x async for x in export_rows(backlog.store.rows("nonsense"), "jsonl")]


# --- import and claims


async def test_import_references_rules(backlog: BacklogSink) -> None:
    await backlog.write([scored(f"r{i}", f"question {i}") for i in range(5)])
    await backlog.store.discard(["r4"])
    first = await backlog.store.import_references(
        [
            ImportRow(line=1, id="r0", reference="ref 0"),
            ImportRow(line=2, id="missing", reference="x"),
            ImportRow(line=3, id="r1", reference="   "),
            ImportRow(line=4, error="broken JSON: Expecting value"),
            ImportRow(line=5, id="r4", reference="ref 4"),
            ImportRow(line=6, id="r0", reference="ref 0 again"),
        ]
    )
    assert first.changed == [(1, "r0", "pending"), (6, "r0", "annotated")]
    assert [(line, rid) for line, rid, _ in first.rejected] == [
        (2, "missing"),
        (3, "r1"),
        (4, None),
        (5, "r4"),
    ]
    assert "unknown id" in first.rejected[0][2]
    assert "discarded" in first.rejected[3][2]

    claimed = await backlog.store.claim_annotated(10)
    assert [r.id for r in claimed] == ["r0"]
    assert claimed[0].reference == "ref 0 again"
    busy = await backlog.store.import_references([ImportRow(line=1, id="r0", reference="x")])
    assert "being evaluated" in busy.rejected[0][2]
    assert await backlog.store.store_offline("r0", {"context_recall": 1.0}, {"context_recall": {}})

    refused = await backlog.store.import_references([ImportRow(line=1, id="r0", reference="new")])
    assert refused.changed == [] and "--force" in refused.rejected[0][2]
    forced = await backlog.store.import_references(
        [ImportRow(line=1, id="r0", reference="new")], force=True
    )
    assert forced.changed == [(1, "r0", "evaluated")]
    row = await backlog.store.get("r0")
    assert row is not None
    assert (row.status, row.reference, row.offline_scores) == ("annotated", "new", None)


async def test_claims_skip_locked_rows_and_expired_leases_come_back(
    backlog: BacklogSink, pg_dsn: str, make_settings: SettingsFactory
) -> None:
    await backlog.write([scored(f"c{i}", f"question {i}") for i in range(10)])
    await backlog.store.import_references(
        ImportRow(line=i, id=f"c{i}", reference=f"ref {i}") for i in range(10)
    )
    other = BacklogStore(pg_dsn, make_settings())
    await other.start()
    try:
        mine, theirs = await asyncio.gather(
            backlog.store.claim_annotated(6), other.claim_annotated(6)
        )
        ids_mine = {r.id for r in mine}
        ids_theirs = {r.id for r in theirs}
        assert not ids_mine & ids_theirs
        assert len(ids_mine | ids_theirs) == 10
        assert await other.claim_annotated(5) == []

        # a crashed runner: its lease runs out and another runner takes the rows over
        crashed = BacklogStore(pg_dsn, make_settings())
        await crashed.start()
        try:
            await backlog.store.import_references(
                [ImportRow(line=1, id="c0", reference="again")], force=True
            )  # c0 is leased: refused
            for r in mine:
                assert await backlog.store.release(r.id)
            leased = await crashed.claim_annotated(100, lease_seconds=0.05)
            assert {r.id for r in leased} == ids_mine
            await asyncio.sleep(0.2)  # the lease is a clock: 0.05 s must pass, nothing to await
            taken = await other.claim_annotated(100)
            assert {r.id for r in taken} == ids_mine
            # the crashed runner's late result is refused: it no longer holds the lease
            assert not await crashed.store_offline(leased[0].id, {"m": 0.0}, {})
        finally:
            await crashed.close()
        for r in [*theirs, *taken]:
            assert await other.store_offline(r.id, {"m": 1.0}, {"m": {"n": 1}})
        rows = await fetch(pg_dsn, "SELECT status, evaluation_count, offline_scores FROM backlog")
        assert {(r["status"], r["evaluation_count"]) for r in rows} == {("evaluated", 1)}
    finally:
        await other.close()
