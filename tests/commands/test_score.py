"""`rag-monitor score` as a user runs it: a subprocess against the real judge server over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from monitor.config import UNUSED_API_KEY, Settings
from monitor.judges import model_name
from monitor.judges.factory import build_judge
from tests.support import ROOT
from tests.support.judge_server import Fault, JudgeServer

GOOD = {
    "id": "vacation",
    "user_input": "How many vacation days do employees get?",
    "retrieved_contexts": [
        "Employees accrue 25 days of paid vacation per year.",
        "Parking permits are issued by the facilities team.",
    ],
    "response": "Employees accrue 25 days of paid vacation per year. "
    "Unused days can be sold back to the company.",
    "reference": "Employees accrue 25 days of paid vacation per year.",
}


def run_score(
    server: JudgeServer, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    environment = {
        **os.environ,
        "RAG_MONITOR_JUDGE_BASE_URL": server.base_url,
        "RAG_MONITOR_JUDGE_MAX_RETRIES": "0",
        **(env or {}),
    }
    return subprocess.run(
        [sys.executable, "-m", "monitor", "score", *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def write_lines(path: Path, lines: list[Any]) -> Path:
    path.write_text(
        "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
        encoding="utf-8",
    )
    return path


def read_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def test_scores_a_file_in_input_order(judge_server: JudgeServer, tmp_path: Path) -> None:
    lines: list[Any] = [
        GOOD,
        "{not json",
        {"id": "no-response", "user_input": "q", "retrieved_contexts": []},
        "",
        {**GOOD, "id": "second", "response": "I don't know."},
    ]
    result = run_score(judge_server, str(write_lines(tmp_path / "in.jsonl", lines)))
    assert result.returncode == 0, result.stderr
    out = read_lines(result.stdout)
    assert [line["id"] for line in out] == ["vacation", None, "no-response", "second"]
    first = out[0]
    assert list(first) == ["id", "scores", "flags", "details", "usage"]
    assert first["scores"] == {
        "faithfulness": 0.5,
        "response_relevancy": pytest.approx(first["scores"]["response_relevancy"]),
        "context_utility": 1.0,  # Ragas's 1 / (1 + 1e-10), rounded as every score is
    }
    assert all(round(v, 6) == v for v in first["scores"].values())
    # one claim of two unsupported: a hallucination by default (faithfulness below 1)
    low_relevancy = first["scores"]["response_relevancy"] < 0.5
    assert first["flags"] == ["hallucination"] + (["low_relevancy"] if low_relevancy else [])
    assert first["details"]["faithfulness"]["statements"][1]["verdict"] == 0
    assert first["usage"]["calls"] == 3  # grounding (fused), questions (n=3), embed
    assert first["usage"]["prompt_tokens"] > 0
    assert out[1]["error"].startswith("invalid record on line 2: not_json")
    assert out[1]["flags"] == [] and out[2]["flags"] == []
    assert "response: Field required" in out[2]["error"]
    assert out[3]["scores"]["response_relevancy"] == 0.0
    assert out[3]["details"]["response_relevancy"]["all_noncommittal"] is True
    assert "low_relevancy" in out[3]["flags"]  # what the backlog sink would queue it for
    # the summary table on stderr
    assert "faithfulness" in result.stderr and "unscoreable" in result.stderr
    assert "4 read, 2 scored, 2 invalid" in result.stderr
    # how many were flagged and for what, as the output lines say
    flagged = [line for line in out if line["flags"]]
    per_reason = sorted({r for line in flagged for r in line["flags"]})
    summary = result.stderr.splitlines()
    (flag_line,) = [line for line in summary if line.startswith("flagged: ")]
    assert flag_line.startswith(f"flagged: {len(flagged)} of 2 records (")
    for reason in per_reason:
        assert f"{reason} {sum(reason in line['flags'] for line in out)}" in flag_line
    # every invalid line's error, as its output line has it
    assert [line for line in summary if line.startswith("invalid: ")] == [
        "invalid: " + out[i]["error"].removeprefix("invalid record ") for i in (1, 2)
    ]
    assert "calls" in result.stderr and "tokens" in result.stderr
    assert "judge: the LLM judge (gpt-4o-mini) per valid record: " in result.stderr


def test_metrics_and_out_file(judge_server: JudgeServer, tmp_path: Path) -> None:
    records = [
        {**GOOD, "id": f"r{i}", "retrieved_contexts": GOOD["retrieved_contexts"][: 1 + i % 2]}
        for i in range(12)
    ]
    records[5] = {k: v for k, v in records[5].items() if k != "reference"}
    source = write_lines(tmp_path / "in.jsonl", records)
    target = tmp_path / "out.jsonl"
    result = run_score(
        judge_server,
        str(source),
        "--metrics",
        "context_recall,factual_correctness",
        "--out",
        str(target),
        "--concurrency",
        "4",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    out = read_lines(target.read_text(encoding="utf-8"))
    assert [line["id"] for line in out] == [f"r{i}" for i in range(12)]
    assert all(set(line["scores"]) == {"context_recall", "factual_correctness"} for line in out)
    assert out[0]["scores"] == {"context_recall": 1.0, "factual_correctness": 0.67}
    assert out[5]["scores"] == {"context_recall": None, "factual_correctness": None}
    assert out[5]["details"]["context_recall"] == {"reason": "no reference"}
    assert "error" not in out[5]


def test_judge_failure_is_an_error_line_not_a_zero(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    judge_server.down("503")
    result = run_score(judge_server, str(write_lines(tmp_path / "in.jsonl", [GOOD])))
    [line] = read_lines(result.stdout)
    assert line["error"] == "server_error"
    assert line["flags"] == []  # skipped, as the sidecar skips it: never queued
    online = ("faithfulness", "response_relevancy", "context_utility")
    assert line["scores"] == {m: None for m in online}
    # nothing got a value: not a success
    assert result.returncode == 1, result.stderr
    assert "1 read, 0 scored, 0 invalid, 1 with judge errors" in result.stderr
    assert result.stderr.splitlines()[-1] == (
        "rag-monitor score: no record scored: the judge failed on 1 of 1 record "
        "(server_error: InternalServerError (HTTP 503))"
    )


def test_a_refused_key_exits_1_naming_the_setting_and_keeping_the_servers_words(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    from tests.support.judge_server import Fault

    judge_server.inject(Fault.UNAUTHORIZED, times=50)
    result = run_score(judge_server, str(write_lines(tmp_path / "in.jsonl", [GOOD])),
                       env={"RAG_MONITOR_JUDGE_API_KEY": "sk-real-secret"})  # fmt: skip
    assert result.returncode == 1, result.stderr
    [line] = read_lines(result.stdout)
    assert line["error"] == "auth"
    assert result.stderr.splitlines()[-1] == (
        "rag-monitor score: no record scored: the judge failed on 1 of 1 record (auth: HTTP "
        "401: Incorrect API key provided: ***.; check RAG_MONITOR_JUDGE_API_KEY)"
    )
    assert "sk-real-secret" not in result.stderr + result.stdout


def test_an_unreachable_judge_exits_1_naming_the_cause(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD, {**GOOD, "id": "second"}])
    # port 1 on loopback: nothing listens, the OS refuses the connection
    unreachable = {"RAG_MONITOR_JUDGE_BASE_URL": "http://127.0.0.1:1/v1"}
    result = run_score(judge_server, str(source), env=unreachable)
    assert result.returncode == 1, result.stderr
    out = read_lines(result.stdout)
    assert [line["error"] for line in out] == ["connection", "connection"]
    assert all(value is None for line in out for value in line["scores"].values())
    assert out[0]["details"]["faithfulness"]["detail"] == "connection refused"
    assert "2 read, 0 scored, 0 invalid, 2 with judge errors" in result.stderr
    last = result.stderr.splitlines()[-1]
    assert last == (
        "rag-monitor score: no record scored: the judge failed on 2 of 2 records "
        "(connection: connection refused)"
    )
    assert judge_server.stats.snapshot().chat_requests == 0  # the test server was not asked


def test_scored_means_at_least_one_value(judge_server: JudgeServer, tmp_path: Path) -> None:
    """A record counts as scored when one metric got a value; none at all exits 1."""
    evasive = {k: v for k, v in GOOD.items() if k != "reference"}
    evasive = {**evasive, "id": "evasive", "response": "I don't know."}
    no_reference = {k: v for k, v in GOOD.items() if k != "reference"}
    metrics = ("--metrics", "faithfulness,context_recall")
    # faithfulness scores the first; the second declines (unscoreable) and has no reference
    both = write_lines(tmp_path / "both.jsonl", [no_reference, evasive])
    result = run_score(judge_server, str(both), *metrics)
    assert result.returncode == 0, result.stderr
    first, second = read_lines(result.stdout)
    assert first["scores"]["faithfulness"] == 0.5 and first["scores"]["context_recall"] is None
    assert second["scores"] == {"faithfulness": None, "context_recall": None}
    assert "2 read, 1 scored, 0 invalid, 0 with judge errors" in result.stderr
    # only the unscoreable one: no record got a value
    alone = write_lines(tmp_path / "alone.jsonl", [evasive])
    result = run_score(judge_server, str(alone), *metrics)
    assert result.returncode == 1, result.stderr
    assert "1 read, 0 scored" in result.stderr
    assert result.stderr.splitlines()[-1].startswith(
        "rag-monitor score: no record scored: every metric was unscoreable (most often: "
    )
    # only invalid lines
    broken = write_lines(tmp_path / "broken.jsonl", ['{"id": "x", "user_input": "unterminated'])
    result = run_score(judge_server, str(broken))
    assert result.returncode == 1, result.stderr
    assert result.stderr.splitlines()[-1] == (
        "rag-monitor score: no record scored: every line is invalid (invalid record on line 1: "
        "not_json: EOF while parsing a string at column 39)"
    )


def test_unreadable_input_exits_2(judge_server: JudgeServer, tmp_path: Path) -> None:
    result = run_score(judge_server, str(tmp_path / "missing.jsonl"))
    assert result.returncode == 2
    assert "cannot read" in result.stderr and "missing.jsonl" in result.stderr
    assert result.stdout == ""


def test_an_input_with_no_record_exits_2_in_one_line(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    """Nothing to score is unusable input: said in one line, no empty summary table first."""
    empty = write_lines(tmp_path / "empty.jsonl", ["", "   "])
    result = run_score(judge_server, str(empty))
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        f"rag-monitor score: no record to score: {empty} has no non-empty line"
    ]
    assert result.stdout == ""
    assert judge_server.stats.snapshot().chat_requests == 0


def test_unknown_metric_exits_2(judge_server: JudgeServer, tmp_path: Path) -> None:
    source = write_lines(tmp_path / "in.jsonl", [GOOD])
    result = run_score(judge_server, str(source), "--metrics", "faithfulness,answer_relevancy")
    assert result.returncode == 2
    assert "answer_relevancy" in result.stderr and "known:" in result.stderr
    assert judge_server.stats.snapshot().chat_requests == 0


def test_the_local_judge_makes_no_calls_and_is_named(tmp_path: Path) -> None:
    """The in-process judge sends no request: the summary counts none, not one per step, and
    names the local judge as the judge reports itself; an OPENAI_API_KEY in the environment
    is left unused with the warning `rag-monitor run` logs too."""
    records = tmp_path / "in.jsonl"
    traffic = (ROOT / "monitor" / "demo" / "traffic.jsonl").read_text(encoding="utf-8")
    records.write_text("".join(traffic.splitlines(keepends=True)[:3]), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
    env["OPENAI_API_KEY"] = "sk-not-for-this"
    result = subprocess.run(
        [sys.executable, "-m", "monitor", "score", str(records)],
        capture_output=True, text=True, env=env, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line["usage"]["calls"] for line in lines] == [0, 0, 0]
    model = model_name(build_judge(Settings(), kind="local"))
    assert f"judge: the local judge ({model}), in process: 0 calls, 0 tokens" in result.stderr
    logged = [json.loads(line) for line in result.stderr.splitlines() if line.startswith("{")]
    assert [(e["level"], e["event"]) for e in logged] == [("warning", UNUSED_API_KEY)]
    assert "sk-not-for-this" not in result.stderr


def test_logs_go_to_stderr_and_stdout_holds_only_score_lines(
    judge_server: JudgeServer, tmp_path: Path
) -> None:
    """The judge logs a refused json_schema (a warning) and its requests (debug): in a
    fresh process, at debug, those lines are on stderr and every stdout line is a result.
    (Which step a second injected fault would hit depends on the order of concurrent
    steps, so only the first request's fault is injected.)"""
    judge_server.inject(Fault.REJECT_JSON_SCHEMA)
    path = write_lines(tmp_path / "in.jsonl", [GOOD])
    result = run_score(judge_server, str(path), env={"RAG_MONITOR_LOG_LEVEL": "debug"})
    assert result.returncode == 0, result.stderr
    assert [line["id"] for line in read_lines(result.stdout)] == ["vacation"]
    logged = [line for line in result.stderr.splitlines() if line.startswith("{")]  # + a summary
    events = [json.loads(line)["event"] for line in logged]
    assert any(e.startswith("judge endpoint rejected") for e in events), events
    assert any(json.loads(line)["level"] == "debug" for line in logged), events


def test_a_changed_model_file_is_one_line_naming_it_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A shipped model file that is not the pinned one: one line naming the file, exit 2,
    rather than the traceback of the worker thread that loaded it."""
    import monitor.judges.local.embedder as embedder_module
    from monitor.cli import main

    changed = tmp_path / "embedder-int8.onnx"
    changed.write_bytes(embedder_module.GRAPH_PATH.read_bytes()[:-1] + b"\0")
    monkeypatch.setattr(embedder_module, "GRAPH_PATH", changed)
    monkeypatch.setattr(embedder_module, "vnni", lambda: True)  # the pinned graph, on any CPU
    for key in [k for k in os.environ if k.startswith("RAG_MONITOR_") or k == "OPENAI_API_KEY"]:
        monkeypatch.delenv(key)
    path = write_lines(tmp_path / "in.jsonl", [GOOD])
    assert main(["score", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    (line,) = [line for line in err.splitlines() if line.strip()]
    assert line.startswith(f"rag-monitor: {changed} is not the pinned file")
    assert embedder_module.GRAPH_SHA256 in line  # the pinned digest, to compare with
    assert line.endswith("; reinstall rag-monitor to restore it")


def test_help_describes_the_output_lines_and_the_summary() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "monitor", "score", "--help"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    for key in ('"id"', '"scores"', '"flags"', '"details"', '"usage"', '"error"'):
        assert key in text, key
    assert "null where it could not be scored" in text
    assert "flagged (per reason), each invalid line's error" in text


def test_many_invalid_lines_are_listed_up_to_a_limit(tmp_path: Path) -> None:
    from monitor.score_file import SHOWN_INVALID

    records = write_lines(tmp_path / "in.jsonl", ["[1]"] * (SHOWN_INVALID + 3))
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
    result = subprocess.run(
        [sys.executable, "-m", "monitor", "score", str(records)],
        capture_output=True, text=True, env=env, timeout=120, cwd=ROOT, check=False,
    )  # fmt: skip
    assert result.returncode == 1, result.stderr
    shown = [line for line in result.stderr.splitlines() if line.startswith("invalid: ")]
    assert shown[0] == "invalid: on line 1: not_object: top level is an array, not an object"
    assert len(shown) == SHOWN_INVALID + 1
    assert shown[-1].startswith("invalid: 3 more lines")
    assert "flagged: 0 of 0 records" in result.stderr
