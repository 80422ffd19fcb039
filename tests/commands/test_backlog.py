"""``rag-monitor migrate`` and ``backlog stats|export|import|discard`` against a real Postgres."""

from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import asyncpg
import pytest

from monitor.backlog.annotations import parse_csv, parse_jsonl
from monitor.backlog.migrations import migration_files
from monitor.backlog.store import BacklogStore
from monitor.cli import main
from monitor.config import Settings
from monitor.records import Context, Interaction, MetricResult, ScoredRecord
from monitor.sinks.backlog import BacklogSink
from tests.support import ROOT
from tests.support.judge_server import JudgeServer
from tests.support.tools import in_ci

SettingsFactory = Callable[..., Settings]


#: a Python with Ragas installed (`.ci/run` makes a separate venv: Ragas pulls LangChain)
RAGAS_PYTHON = os.environ.get("RAGMON_TEST_RAGAS_PYTHON")

_LOAD_WITH_RAGAS = """
import json, sys
from ragas import EvaluationDataset
dataset = EvaluationDataset.from_jsonl(sys.argv[1])
print(json.dumps({"rows": len(dataset), "features": dataset.features(),
                  "first": dataset[0].model_dump(exclude_none=True)}))
"""


def assert_ragas_loads(path: Path, expected_rows: int) -> None:
    """The golden-set export loads as a Ragas EvaluationDataset, with Ragas itself."""
    if RAGAS_PYTHON is None:
        if in_ci():
            pytest.fail("RAGMON_TEST_RAGAS_PYTHON is not set (.ci/run sets it)")
        return  # a developer machine without the Ragas venv: the key checks above still ran
    done = subprocess.run(
        [RAGAS_PYTHON, "-c", _LOAD_WITH_RAGAS, str(path)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert loaded["rows"] == expected_rows
    assert set(loaded["features"]) == {"user_input", "retrieved_contexts", "response", "reference"}
    first = json.loads(path.read_text(encoding="utf-8").splitlines()[0])
    first.pop("id")  # the row id: Ragas ignores it
    assert {k: loaded["first"][k] for k in first} == first


def run_cli(argv: list[str]) -> int:
    return main(argv)


def seed(dsn: str, settings: Settings, n: int) -> None:
    async def go() -> None:
        sink = BacklogSink(BacklogStore(dsn, settings), settings)
        await sink.start()
        try:
            await sink.write(
                [
                    ScoredRecord(
                        interaction=Interaction(
                            id=f"id-{i}",
                            user_input=f"question {i}, mail me: q{i}@example.com",
                            retrieved_contexts=(Context(text=f"context {i}"),),
                            response=f"answer {i}",
                        ),
                        results={"faithfulness": MetricResult(metric="faithfulness", score=0.1)},
                    )
                    for i in range(n)
                ]
            )
        finally:
            await sink.aclose()

    asyncio.run(go())


@pytest.fixture
def cli_dsn(pg_dsn: str, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.setenv("RAG_MONITOR_PG_DSN", pg_dsn)
    monkeypatch.setenv("RAG_MONITOR_CONTROL_SHARE", "0")
    return pg_dsn


@pytest.fixture
def seeded(cli_dsn: str, make_settings: SettingsFactory) -> Callable[[int], None]:
    """The backlog's database migrated by the CLI; the result queues that many rows (`seed`)."""
    assert run_cli(["migrate"]) == 0
    return lambda n: seed(cli_dsn, make_settings(), n)


# --- file parsing (pure)


def test_parse_jsonl_reports_broken_lines_with_numbers() -> None:
    rows = list(
        parse_jsonl(
            '{"id": "a", "reference": "r"}\n'
            "\n"
            '{"id": "b", "reference": \n'
            "[1, 2]\n"
            '{"reference": "no id"}\n'
            '{"id": "c", "reference": 5}\n'
            '{"id": "d", "reference": "ok", "user_input": "extra fields are fine"}\n'
        )
    )
    assert [(r.line, r.id, r.error is None) for r in rows] == [
        (1, "a", True),
        (3, None, False),
        (4, None, False),
        (5, None, False),
        (6, "c", False),
        (7, "d", True),
    ]
    assert rows[1].error is not None and "broken JSON" in rows[1].error


def test_parse_csv_handles_quotes_newlines_and_broken_rows() -> None:
    text = (
        'id,reference\na,"multi\nline, with comma"\nb,plain\nc,too,many\n"d,"broken quote\ne,last\n'
    )
    rows = list(parse_csv(text))
    assert [(r.line, r.id) for r in rows if r.error is None] == [
        (2, "a"),
        (4, "b"),
        (7, "e"),
    ]
    assert rows[0].reference == "multi\nline, with comma"
    assert [r.line for r in rows if r.error is not None] == [5, 6]
    assert list(parse_csv("name,text\nx,y\n"))[0].error == (
        "CSV header must name the columns id and reference"
    )


# --- commands


@pytest.mark.postgres
def test_migrate_stats_export_import_round_trip(
    cli_dsn: str,
    make_settings: SettingsFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert run_cli(["migrate"]) == 0
    assert "applied 0001_backlog" in capsys.readouterr().out
    assert run_cli(["migrate"]) == 0
    assert "up to date" in capsys.readouterr().out
    seed(cli_dsn, make_settings(), 3)

    assert run_cli(["backlog", "stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["counts"]["pending"] == 3 and stats["rows"] == 3

    out = tmp_path / "todo.jsonl"
    assert run_cli(["backlog", "export", "--status", "pending", "--out", str(out)]) == 0
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert [line["id"] for line in lines] == ["id-0", "id-1", "id-2"]
    assert lines[0]["user_input"] == "question 0, mail me: [EMAIL]"
    assert lines[0]["retrieved_contexts"] == ["context 0"]
    assert lines[0]["reasons"] == ["hallucination"]
    assert lines[0]["scores"] == {"faithfulness": 0.1}

    # people fill in references on the exported lines themselves
    lines[0]["reference"] = "reference 0"
    lines[1]["reference"] = "reference 1"
    out.write_text("\n".join(json.dumps(line) for line in lines[:2]) + "\n")
    assert run_cli(["backlog", "import", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "line 1: id-0: pending -> annotated" in printed
    assert "2 row(s) annotated, 0 line(s) rejected" in printed

    assert run_cli(["backlog", "export", "--status", "annotated", "--format", "ragas"]) == 0
    ragas = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert ragas[0] == {
        "id": "id-0",
        "user_input": "question 0, mail me: [EMAIL]",
        "retrieved_contexts": ["context 0"],
        "response": "answer 0",
        "reference": "reference 0",
    }

    golden = tmp_path / "golden.jsonl"
    assert (
        run_cli(
            [
                "backlog",
                "export",
                "--status",
                "annotated",
                "--format",
                "ragas",
                "--out",
                str(golden),
            ]
        )
        == 0
    )
    assert_ragas_loads(golden, expected_rows=2)

    assert run_cli(["backlog", "export", "--status", "pending", "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [r["id"] for r in table] == ["id-2"]
    assert {"id", "user_input", "retrieved_contexts", "response", "reasons", "scores"} <= set(
        table[0]
    )

    assert run_cli(["backlog", "discard", "id-2"]) == 0
    assert run_cli(["backlog", "stats"]) == 0
    table_out = capsys.readouterr().out
    assert "discarded" in table_out and "annotated" in table_out


@pytest.mark.postgres
def test_discard_names_the_ids_it_does_not_know(
    seeded: Callable[[int], None], capsys: pytest.CaptureFixture[str]
) -> None:
    seeded(2)
    capsys.readouterr()
    assert run_cli(["backlog", "discard", "id-0", "nope-1", "id-1", "nope-2", "id-0"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "2 row(s) discarded\n"
    assert captured.err == "rag-monitor: no backlog row with id nope-1, nope-2\n"
    assert run_cli(["backlog", "discard", "id-1"]) == 0  # already discarded: known, fine


def imports(
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    code: int,
    *,
    out: Sequence[str] = (),
    err: Sequence[str] = (),
) -> None:
    """``rag-monitor backlog import ARGS`` exits ``code`` and prints every line of ``out`` on
    stdout and every line of ``err`` on stderr."""
    assert run_cli(["backlog", "import", *args]) == code
    captured = capsys.readouterr()
    for line in out:
        assert line in captured.out
    for line in err:
        assert line in captured.err


@pytest.mark.postgres
def test_import_rejects_bad_lines_one_by_one(
    seeded: Callable[[int], None],
    cli_dsn: str,
    make_settings: SettingsFactory,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    seeded(4)
    assert run_cli(["backlog", "discard", "id-3"]) == 0
    capsys.readouterr()

    jsonl = tmp_path / "refs.jsonl"
    jsonl.write_text(
        '{"id": "id-0", "reference": "good"}\n'
        '{"id": "nope", "reference": "unknown id"}\n'
        '{"id": "id-1", "reference": \n'
        '{"id": "id-3", "reference": "discarded row"}\n'
        '{"id": "id-1", "reference": "good too"}\n'
    )
    imports(
        capsys,
        [str(jsonl)],
        1,
        out=[
            "line 1: id-0: pending -> annotated",
            "line 5: id-1: pending -> annotated",
            "2 row(s) annotated, 3 line(s) rejected",
        ],
        err=[
            "line 2: rejected: nope: unknown id",
            "line 3: rejected: broken JSON",
            "line 4: rejected: id-3: status is discarded",
        ],
    )

    # evaluated rows need --force
    async def evaluate(row_id: str) -> None:
        store = BacklogStore(cli_dsn, make_settings())
        await store.start()
        try:
            claimed = await store.claim_annotated(10)
            for row in claimed:
                if row.id == row_id:
                    assert await store.store_offline(row.id, {"context_recall": 1.0}, {})
                else:
                    assert await store.release(row.id)
        finally:
            await store.close()

    asyncio.run(evaluate("id-0"))
    table = tmp_path / "refs.csv"
    table.write_text(
        'id,reference\nid-0,replacement\nid-2,"a, quoted\nreference"\nid-1,broken,row\n'
    )
    imports(
        capsys,
        [str(table)],
        1,
        out=["line 3: id-2: pending -> annotated"],
        err=[
            "line 2: rejected: id-0: already evaluated (use --force",
            "line 5: rejected: broken CSV row",
        ],
    )
    imports(
        capsys,
        ["--force", str(table)],
        1,
        out=["line 2: id-0: evaluated -> annotated", "line 3: id-2: annotated -> annotated"],
    )

    assert run_cli(["backlog", "import", str(tmp_path / "missing.jsonl")]) == 2


@pytest.mark.postgres
def test_commands_report_an_unreachable_database(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.support.embedded import free_port

    port = free_port()  # nothing listens there
    monkeypatch.setenv("RAG_MONITOR_PG_DSN", f"postgresql://x:hunter2@127.0.0.1:{port}/x")
    assert run_cli(["backlog", "stats"]) == 3
    assert capsys.readouterr().err.splitlines() == [
        f"rag-monitor: backlog: cannot reach Postgres at 127.0.0.1:{port}: connection refused"
    ]
    monkeypatch.setenv("RAG_MONITOR_PG_DSN", "postgresql://x:hunter2@rag-monitor.invalid/x")
    assert run_cli(["backlog", "stats"]) == 3
    err = capsys.readouterr().err
    assert err.startswith(  # the reason is the resolver's, in its words
        "rag-monitor: backlog: cannot reach Postgres at rag-monitor.invalid:5432: "
        "cannot resolve the host ("
    ), err
    monkeypatch.setenv(
        "RAG_MONITOR_PG_DSN", f"postgresql://x:hunter2@127.0.0.1:{port}/x?sslmode=on"
    )
    assert run_cli(["backlog", "stats"]) == 3
    err = capsys.readouterr().err
    assert err.startswith("rag-monitor: backlog: RAG_MONITOR_PG_DSN cannot be used: ")
    assert "sslmode" in err and "hunter2" not in err and "Error" not in err
    monkeypatch.delenv("RAG_MONITOR_PG_DSN")
    assert run_cli(["migrate"]) == 2


@pytest.mark.postgres
def test_commands_on_an_unmigrated_database_name_migrate_and_exit_4(
    cli_dsn: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    refs = tmp_path / "refs.jsonl"
    refs.write_text(json.dumps({"id": "id-0", "reference": "r"}) + "\n")
    commands = [["backlog", "stats"], ["backlog", "export"], ["backlog", "import", str(refs)],
                ["backlog", "discard", "id-0"], ["offline", "--no-progress"]]  # fmt: skip
    bundled = [version for version, _ in migration_files()]
    for argv in commands:
        assert run_cli(argv) == 4, argv
        err = capsys.readouterr().err
        assert err.splitlines() == [
            f"rag-monitor: the backlog schema is missing migration(s) {', '.join(bundled)}: "
            "run `rag-monitor migrate`"
        ], argv
    assert run_cli(["migrate"]) == 0
    assert run_cli(["backlog", "stats"]) == 0
    capsys.readouterr()

    async def forget_last() -> str:  # a database one migration behind the bundled files
        conn = await asyncpg.connect(cli_dsn)
        try:
            version: str = await conn.fetchval(
                "DELETE FROM schema_migrations WHERE version = "
                "(SELECT max(version) FROM schema_migrations) RETURNING version"
            )
            return version
        finally:
            await conn.close()

    behind = asyncio.run(forget_last())
    assert run_cli(["backlog", "stats"]) == 4
    assert f"missing migration(s) {behind}: run `rag-monitor migrate`" in capsys.readouterr().err


@pytest.mark.postgres
def test_export_into_a_reader_that_leaves_ends_quietly(seeded: Callable[[int], None]) -> None:
    seeded(600)  # far more than a pipe buffer holds
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "monitor", "backlog", "export"], env=env,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert process.stdout is not None and process.stderr is not None
    assert json.loads(process.stdout.readline())["id"].startswith("id-")  # `| head -1`
    process.stdout.close()
    err = process.stderr.read().decode()
    process.stderr.close()
    assert process.wait(60) == 141
    assert "BrokenPipeError" not in err and "Traceback" not in err, err
    assert err == ""


@pytest.mark.postgres
def test_offline_command_reports_the_run(
    seeded: Callable[[int], None],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    judge_server: JudgeServer,
) -> None:
    seeded(3)
    monkeypatch.setenv("RAG_MONITOR_JUDGE_BASE_URL", judge_server.base_url)
    monkeypatch.setenv("RAG_MONITOR_JUDGE_API_KEY", "test-key")
    refs = tmp_path / "refs.jsonl"
    refs.write_text(
        "".join(json.dumps({"id": f"id-{i}", "reference": f"answer {i}"}) + "\n" for i in range(2))
    )
    assert run_cli(["backlog", "import", str(refs)]) == 0
    capsys.readouterr()
    assert run_cli(["offline", "--metrics", "context_recall,bogus"]) == 2
    assert "bogus" in capsys.readouterr().err
    assert (
        run_cli(
            [
                "offline",
                "--judge",
                "llm",
                "--batch",
                "1",
                "--metrics",
                "context_recall,noise_sensitivity",
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert "offline run: 2 row(s) evaluated" in captured.out
    assert "noise_sensitivity_irrelevant" in captured.out
    assert "reading the run" in captured.out
    assert "2/2" in captured.err  # the progress bar
    assert run_cli(["backlog", "stats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["counts"]["evaluated"] == 2


@pytest.mark.postgres
def test_logs_never_reach_stdout_in_a_fresh_process(cli_dsn: str) -> None:
    """``migrate`` logs each migration it applies; at debug, in a process that configured
    nothing before the command (as a user runs it), the lines go to stderr and stdout
    holds only the output: `backlog stats --json` parses as one JSON document."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RAG_MONITOR_LOG_LEVEL": "debug"}

    def cli(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "monitor", *argv], env=env,
                              capture_output=True, text=True, timeout=60, check=False)  # fmt: skip

    migrated = cli("migrate")
    assert migrated.returncode == 0, migrated.stderr
    assert migrated.stdout.startswith("applied ") and len(migrated.stdout.splitlines()) == 1
    logged = [json.loads(line) for line in migrated.stderr.splitlines()]
    assert {line["event"] for line in logged} >= {"applied migration"}
    stats = cli("backlog", "stats", "--json")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout)["counts"] is not None
