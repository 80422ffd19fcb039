"""Keep the evidence: every distinct answer of a question, verdicts per answer, versions."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import asyncpg
import pytest

from monitor.backlog.annotations import parse_csv, parse_jsonl
from monitor.backlog.entries import is_control
from monitor.backlog.export import export_rows
from monitor.backlog.gauges import BacklogGauges
from monitor.backlog.migrations import apply_migrations, migration_files
from monitor.backlog.reviews import ImportRow, ReviewProblem, VerdictInput
from monitor.backlog.store import BacklogStore
from monitor.config import Settings
from monitor.records import MetricResult
from monitor.sinks.backlog import BacklogSink
from monitor.telemetry import Exporter
from tests.fixtures.postgres import BacklogFactory
from tests.support.backlog import fetch, scored
from tests.support.waits import wait_until

pytestmark = pytest.mark.postgres

SettingsFactory = Callable[..., Settings]

Q = "When do I need to attach a receipt?"


async def test_every_distinct_answer_is_kept_with_its_own_evidence(
    backlog: BacklogSink, pg_dsn: str
) -> None:
    faithful = scored("a1", Q, faithfulness=1.0, response="Above $100.")
    faithful.results["response_relevancy"] = MetricResult(metric="response_relevancy", score=0.1)
    await backlog.write([faithful])
    first = await backlog.store.get("a1")
    assert first is not None and first.version == 1
    # later a hallucinated answer to the same question: the row keeps both answers
    await backlog.write([scored("a2", Q.upper(), response="Never, receipts are optional.")])
    # the same hallucinated answer again (other case and punctuation): merged into it
    await backlog.write([scored("a3", Q, response="never receipts are optional")])
    # redeliveries change nothing
    await backlog.write([scored("a3", Q, response="never receipts are optional")])
    await backlog.write([scored("a2", Q.upper(), response="Never, receipts are optional.")])

    row = await backlog.store.get("a1")
    assert row is not None
    assert row.version > first.version  # a new answer (and reason): a reviewer must see it
    version = row.version
    await backlog.write([scored("a4", Q, response="Never, receipts are optional!")])
    row = await backlog.store.get("a1")
    assert row is not None
    assert row.version == version  # merged into a known answer: nothing new to review
    assert row.seen_count == 4
    assert row.reasons == ["low_relevancy", "hallucination"]
    assert [a.interaction_id for a in row.answers] == ["a1", "a2"]
    kept, hallucinated = row.answers
    assert (kept.response, kept.reasons, kept.seen_count) == ("Above $100.", ["low_relevancy"], 1)
    assert kept.online_scores["faithfulness"] == 1.0
    assert hallucinated.response == "Never, receipts are optional."
    assert hallucinated.reasons == ["hallucination"]
    assert hallucinated.online_scores["faithfulness"] == 0.2
    assert hallucinated.statements()[0]["verdict"] == 0
    assert hallucinated.seen_count == 3
    assert hallucinated.weight == pytest.approx(3 / 0.1)  # three interactions at p = 0.1
    n = await fetch(pg_dsn, "SELECT count(*) AS n FROM backlog_answers")
    assert n[0]["n"] == 2
    links = await fetch(
        pg_dsn, "SELECT interaction_id, answer_id FROM backlog_interactions ORDER BY 1"
    )
    assert [tuple(r) for r in links] == [("a1", "a1"), ("a2", "a2"), ("a3", "a2"), ("a4", "a2")]


async def test_control_answers_are_never_merged_with_flagged_ones(
    make_backlog: BacklogFactory,
) -> None:
    async with make_backlog(control_share=1.0) as sink:
        await sink.write([scored("f", Q, response="Same text.")])
        await sink.write([scored("c", Q, response="Same text.", faithfulness=1.0)])
        row = await sink.store.get("f")
        assert row is not None
        assert [(a.interaction_id, a.reasons) for a in row.answers] == [
            ("f", ["hallucination"]),
            ("c", ["control"]),
        ]
        # a control answer stands for 1/(p * share) interactions: here share = 1
        assert row.answers[1].weight == pytest.approx(10.0)


async def test_review_saves_verdicts_reference_and_note_with_versions(
    backlog: BacklogSink, pg_dsn: str
) -> None:
    await backlog.write([scored("r1", Q, response="Always.")])
    await backlog.write([scored("r2", Q, response="Never.")])
    row = await backlog.store.get("r1")
    assert row is not None
    version = await backlog.store.review(
        "r1",
        version=row.version,
        reviewer="ana",
        reference="  Above $100, jane@example.com knows.  ",
        verdicts=[
            VerdictInput("hallucination", "confirmed", "r1"),
            VerdictInput("hallucination", "false_alarm", "r2"),
        ],
        note="checked the policy",
    )
    assert version == row.version + 1
    saved = await backlog.store.get("r1")
    assert saved is not None
    assert saved.status == "annotated"
    assert saved.reference == "Above $100, [EMAIL] knows."  # redacted like everything stored
    assert saved.review_note == "checked the policy"
    assert [
        (a.interaction_id, [(v.reason, v.verdict, v.reviewer) for v in a.verdicts])
        for a in saved.answers
    ] == [
        ("r1", [("hallucination", "confirmed", "ana")]),
        ("r2", [("hallucination", "false_alarm", "ana")]),
    ]
    # a stale version is refused and changes nothing
    with pytest.raises(ReviewProblem) as stale:
        await backlog.store.review(
            "r1",
            version=row.version,
            reviewer="bo",
            verdicts=[VerdictInput("hallucination", "unsure", "r1")],
        )
    assert stale.value.kind == "stale"
    # a later verdict supersedes the earlier one; the history stays
    await backlog.store.review(
        "r1",
        version=version,
        reviewer="bo",
        verdicts=[VerdictInput("hallucination", "unsure", "r1")],
    )
    again = await backlog.store.get("r1")
    assert again is not None and again.answers[0].verdicts[0].verdict == "unsure"
    history = await fetch(pg_dsn, "SELECT count(*) AS n FROM backlog_verdicts")
    assert history[0]["n"] == 3
    _, counts = await backlog.store.calibration_snapshot()
    assert counts == {
        ("hallucination", "confirmed"): 1,
        ("hallucination", "false_alarm"): 1,
        ("hallucination", "unsure"): 1,
    }
    jsonl = [
        json.loads(line) async for line in export_rows(backlog.store.rows("annotated"), "jsonl")
    ]
    assert jsonl[0]["answers"][1]["verdicts"][0]["verdict"] == "false_alarm"
    assert jsonl[0]["answers"][0]["statements"][0]["verdict"] == 0
    assert jsonl[0]["note"] == "checked the policy"


@pytest.mark.parametrize(
    ("verdict", "field"),
    [
        (VerdictInput("hallucination", "confirmed", "elsewhere"), "verdicts[0].interaction_id"),
        (VerdictInput("low_relevancy", "confirmed", "v1"), "verdicts[0].reason"),
        (VerdictInput("hallucination", "maybe", "v1"), "verdicts[0].verdict"),
    ],
)
async def test_review_names_the_bad_field_and_stores_nothing(
    backlog: BacklogSink, pg_dsn: str, verdict: VerdictInput, field: str
) -> None:
    await backlog.write([scored("v1", Q)])
    with pytest.raises(ReviewProblem) as bad:
        await backlog.store.review(
            "v1", version=1, reviewer="ana", reference="ref", verdicts=[verdict]
        )
    assert (bad.value.kind, bad.value.field) == ("invalid", field)
    row = await backlog.store.get("v1")
    assert row is not None and (row.version, row.reference, row.status) == (1, None, "pending")
    assert (await fetch(pg_dsn, "SELECT count(*) AS n FROM backlog_verdicts"))[0]["n"] == 0


async def test_review_respects_the_row_status(backlog: BacklogSink) -> None:
    await backlog.write([scored("s1", "q one"), scored("s2", "q two")])
    with pytest.raises(ReviewProblem) as missing:
        await backlog.store.review("nope", version=1, reviewer="ana")
    assert missing.value.kind == "not_found"
    version = await backlog.store.review("s1", version=1, reviewer="ana", discard=True)
    row = await backlog.store.get("s1")
    assert row is not None and row.status == "discarded" and row.version == version == 2
    with pytest.raises(ReviewProblem) as refused:
        await backlog.store.review("s1", version=2, reviewer="ana", reference="a reference")
    assert refused.value.kind == "conflict"
    await backlog.store.import_references([ImportRow(line=1, id="s2", reference="ref")])
    assert [r.id for r in await backlog.store.claim_annotated(5)] == ["s2"]
    with pytest.raises(ReviewProblem) as busy:
        await backlog.store.review("s2", version=2, reviewer="ana", reference="other")
    assert busy.value.kind == "conflict"


async def test_import_takes_verdicts_and_skips_blank_csv_rows(backlog: BacklogSink) -> None:
    await backlog.write([scored(f"i{i}", f"question {i}") for i in range(3)])
    rows = list(
        parse_jsonl(
            '{"id": "i0", "verdicts": [{"reason": "hallucination", "verdict": "confirmed"}]}\n'
            '{"id": "i1", "reference": "r1", "verdicts": [{"reason": "x", "verdict": "no"}]}\n'
            '{"id": "i1", "verdicts": [{"reason": "low_utility", "verdict": "confirmed"}]}\n'
        )
    )
    assert "verdicts[0]: verdict must be one of" in str(rows[1].error)
    report = await backlog.store.import_references(rows)
    assert report.changed == []  # verdicts alone annotate nothing
    assert report.verdicts == 1
    assert [(line, rid) for line, rid, _ in report.rejected] == [(2, "i1"), (3, "i1")]
    assert "not flagged for 'low_utility'" in report.rejected[1][2]
    row = await backlog.store.get("i0")
    assert row is not None and row.answers[0].verdicts[0].reviewer == "import"

    table = (
        "id,status,reference,verdicts,note\n"
        "i0,pending,,,\n"
        'i1,pending,"the reference",,\n'
        'i2,pending,,"[{""reason"": ""hallucination"", ""verdict"": ""false_alarm""}]",seen\n'
        ",,,,\n"
    )
    report = await backlog.store.import_references(parse_csv(table))
    assert report.changed == [(3, "i1", "pending")]
    assert report.skipped == [(2, "i0")]
    assert report.rejected == []
    assert report.verdicts == 1
    row = await backlog.store.get("i2")
    assert row is not None and row.status == "pending" and row.review_note == "seen"


async def test_migration_keeps_rows_queued_before_it(pg_dsn: str) -> None:
    conn = await asyncpg.connect(pg_dsn, timeout=10)
    try:
        (first, sql), *_ = migration_files()
        await conn.execute(sql)
        await conn.execute(
            "CREATE TABLE schema_migrations (version text PRIMARY KEY, checksum text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        import hashlib

        await conn.execute(
            "INSERT INTO schema_migrations (version, checksum) VALUES ($1, $2)",
            first,
            hashlib.sha256(sql.encode()).hexdigest(),
        )
        await conn.execute(
            "INSERT INTO backlog (id, reasons, question_hash, record, seen_count,"
            " inclusion_probability) VALUES ('old', '{hallucination}', 'h',"
            ' \'{"user_input": "q", "response": "a"}\', 2, 0.5)'
        )
        assert first not in await apply_migrations(conn)
        answers = await conn.fetch("SELECT interaction_id, weight, reasons FROM backlog_answers")
        assert [(a["interaction_id"], a["weight"], a["reasons"]) for a in answers] == [
            ("old", 4.0, ["hallucination"])
        ]
    finally:
        await conn.close()


def test_import_files_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("id,reference\nz,\n")
    assert [r.blank for r in parse_csv(path.read_text())] == [True]


async def test_calibration_from_the_backlog_and_backlog_stats(
    pg_dsn: str,
    make_backlog: BacklogFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    async with make_backlog(control_share=0.5) as sink:
        flagged = [scored(f"f{i}", f"flagged {i}") for i in range(4)]
        # unflagged traffic up to the fourth control answer: the sink sees all of it
        # (the traffic totals), the backlog queues the controls among it
        fine = []
        for i in range(200):
            fine.append(scored(f"c{i}", f"fine {i}", faithfulness=1.0))
            if sum(is_control(r.interaction.id, 0.5) for r in fine) == 4:
                break
        controls = [r for r in fine if is_control(r.interaction.id, 0.5)]
        await sink.write([*flagged, *fine])
        assert (await sink.store.calibration()).calibrated_rate is None
        for i, verdict in enumerate(["confirmed", "confirmed", "confirmed", "false_alarm"]):
            await sink.store.review(
                f"f{i}",
                version=1,
                reviewer="ana",
                verdicts=[VerdictInput("hallucination", verdict)],
            )
        for i, control in enumerate(controls):
            await sink.store.review(
                control.interaction.id,
                version=1,
                reviewer="ana",
                verdicts=[VerdictInput("control", "confirmed" if i == 0 else "false_alarm")],
            )
        result = await sink.store.calibration()
    # weights 1/0.1 each: flagged 40, all the scored traffic 10 * (4 + len(fine))
    everything = 10.0 * (4 + len(fine))
    assert result.traffic is not None and result.traffic.scored == 4 + len(fine)
    assert result.raw_rate == pytest.approx(40 / everything)
    assert result.flag_precision == {"hallucination": 0.75}
    assert result.control_hallucination_share == pytest.approx(0.25)
    expected = (40 * 0.75 + (everything - 40) * 0.25) / everything
    assert result.calibrated_rate == pytest.approx(expected)
    lower, upper, rate = result.lower, result.upper, result.calibrated_rate
    assert lower is not None and upper is not None and rate is not None
    assert lower < rate < upper

    from monitor.cli import main

    monkeypatch.setenv("RAG_MONITOR_PG_DSN", pg_dsn)
    assert await asyncio.to_thread(main, ["backlog", "stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["calibration"]["calibrated_rate"] == pytest.approx(result.calibrated_rate)
    assert stats["calibration"]["flag_precision"] == {"hallucination": 0.75}
    assert stats["hallucination_rule"].endswith("(faithfulness below 1)")
    assert await asyncio.to_thread(main, ["backlog", "stats"]) == 0
    text = capsys.readouterr().out
    assert f"hallucination rate, calibrated:        {100 * expected:.1f}%" in text
    assert f"hallucination rate, raw (judge):       {100 * 40 / everything:.1f}%" in text
    assert text.index("calibrated:") < text.index("raw (judge):")
    assert "flag precision hallucination:" in text and "75.0%  (4 reviewed)" in text
    assert "  counted: an answer counts as a hallucination when any of its claims" in text


async def test_calibration_series_are_refreshed_from_postgres(
    pg_dsn: str, make_settings: SettingsFactory
) -> None:
    exporter = Exporter()
    settings = make_settings(migrate_on_start=True)
    store = BacklogStore(pg_dsn, settings)
    sink = BacklogSink(store, settings, exporter)
    gauges = BacklogGauges(store, exporter, stats_interval=0.05, calibration_interval=0.05)
    await sink.start()
    await gauges.start()

    def sample(name: str, **labels: str) -> float | None:
        value: float | None = exporter.registry.get_sample_value(name, labels)
        return value

    try:
        await sink.write([scored("m1", "q one"), scored("m2", "q two")])
        await wait_until(
            lambda: sample("rag_monitor_backlog_size", status="pending") == 2,
            20,  # a shared, busy machine
            "a stats refresh that saw both rows (the gauges' task is refreshing)",
            interval=0.05,
        )
        # without verdicts the calibration series stay absent, not 0: a negative, so a few
        await asyncio.sleep(0.2)  # refreshes (every 0.05 s) must pass; nothing marks them
        assert sample("rag_monitor_flag_precision", reason="hallucination") is None
        assert sample("rag_monitor_hallucination_rate_calibrated") is None
        await sink.store.review(
            "m1", version=1, reviewer="ana", verdicts=[VerdictInput("hallucination", "confirmed")]
        )
        await sink.store.review(
            "m2", version=1, reviewer="ana", verdicts=[VerdictInput("hallucination", "false_alarm")]
        )
        # a refresh may land between the two reviews: wait for one that saw both
        await wait_until(
            lambda: (
                sample(
                    "rag_monitor_review_verdicts_total",
                    reason="hallucination",
                    verdict="false_alarm",
                )
                is not None
            ),
            20,  # a shared, busy machine
            "a refresh that saw both verdicts",
            interval=0.05,
        )
        assert sample("rag_monitor_flag_precision", reason="hallucination") == 0.5
        assert (
            sample("rag_monitor_review_verdicts_total", reason="hallucination", verdict="confirmed")
            == 1
        )
        assert sample("rag_monitor_hallucination_rate_calibrated") is None  # no controls
    finally:
        await gauges.aclose()
        await sink.aclose()


async def test_a_filled_in_csv_export_with_blank_rows_imports_cleanly(
    backlog: BacklogSink,
    pg_dsn: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from monitor.cli import main

    await backlog.write([scored(f"b{i}", f"question {i}") for i in range(5)])
    monkeypatch.setenv("RAG_MONITOR_PG_DSN", pg_dsn)
    out = tmp_path / "todo.csv"
    assert (
        await asyncio.to_thread(main, ["backlog", "export", "--format", "csv", "--out", str(out)])
        == 0
    )
    lines = out.read_text().splitlines(keepends=True)
    # a reviewer fills in the reference of one row and leaves the others blank
    header = lines[0].strip().split(",")
    import csv as csv_module
    import io

    rows = list(csv_module.reader(io.StringIO("".join(lines))))
    rows[2][header.index("reference")] = "The right answer."
    buffer = io.StringIO()
    csv_module.writer(buffer, lineterminator="\n").writerows(rows)
    out.write_text(buffer.getvalue())
    capsys.readouterr()
    assert await asyncio.to_thread(main, ["backlog", "import", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "1 row(s) annotated, 0 line(s) rejected, 4 blank row(s) skipped" in printed


async def test_saving_the_shown_verdicts_again_records_nothing(
    backlog: BacklogSink, pg_dsn: str
) -> None:
    await backlog.write([scored("s1", Q)])
    same = [VerdictInput("hallucination", "confirmed", "s1")]
    version = await backlog.store.review("s1", version=1, reviewer="ana", verdicts=same)
    # bo opens the row (ana's verdict pre-checked) and saves it unchanged
    assert (
        await backlog.store.review("s1", version=version, reviewer="bo", verdicts=same) == version
    )
    rows = await fetch(pg_dsn, "SELECT reviewer FROM backlog_verdicts")
    assert [r["reviewer"] for r in rows] == ["ana"]


async def test_backlog_stats_before_migration_0002_says_to_migrate(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from monitor.cli import main

    conn = await asyncpg.connect(pg_dsn, timeout=10)
    try:
        await conn.execute(migration_files()[0][1])  # only 0001: an upgrade not migrated yet
    finally:
        await conn.close()
    monkeypatch.setenv("RAG_MONITOR_PG_DSN", pg_dsn)
    # an upgrade not migrated yet is a schema behind, like a database never migrated
    assert await asyncio.to_thread(main, ["backlog", "stats", "--json"]) == 4
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "0002_review" in captured.err and "rag-monitor migrate" in captured.err
