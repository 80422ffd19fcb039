"""JSON log lines: one shape for structlog and stdlib loggers, fields kept, text and secrets not.

The judge test drives the real `OpenAIJudge` against the real judge server on
127.0.0.1 and reads the lines `configure_logging` wrote, as an operator would.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import structlog
from pydantic import SecretStr

import monitor.logging as monitor_logging
from monitor.judges import JudgeError
from monitor.judges.llm import OpenAIJudge
from monitor.logging import NOISY_LOGGERS, configure_logging
from tests.support.judge_server import Fault, JudgeServer
from tests.support.prompts import statements_prompt

HEAD = ["timestamp", "level", "logger", "event"]
MODEL = "gpt-4o-mini"
SECRET = "sk-live-NEVER-LOG-93be71"
#: interaction text no log line may carry (nor any one of its words)
TEXT = "Quokkas reimburse moonlit lodging receipts."

Lines = Callable[[], list[dict[str, Any]]]
Configure = Callable[[str], Lines]


@pytest.fixture
def configure() -> Iterator[Configure]:
    """``configure(level)``: logging to a fresh buffer; returns the lines written so far.

    The process's logging (root handlers and levels, structlog's configuration,
    the once-only flag) is put back afterwards.
    """
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    noisy = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    was_configured, config = structlog.is_configured(), structlog.get_config()
    once = monitor_logging._configured

    def configure(level: str) -> Lines:
        buffer = io.StringIO()
        configure_logging(level, stream=buffer, force=True)

        def lines() -> list[dict[str, Any]]:
            return [json.loads(line) for line in buffer.getvalue().splitlines()]

        return lines

    yield configure
    root.handlers[:] = handlers
    root.setLevel(level)
    for name, old in noisy.items():
        logging.getLogger(name).setLevel(old)
    if was_configured:
        structlog.configure(**config)
    else:
        structlog.reset_defaults()
    monitor_logging._configured = once


def by_event(lines: list[dict[str, Any]], event: str) -> dict[str, Any]:
    found = [line for line in lines if line["event"].startswith(event)]
    assert len(found) == 1, (event, lines)
    return found[0]


def make_judge(server: JudgeServer) -> OpenAIJudge:
    return OpenAIJudge(
        base_url=server.base_url,
        model=MODEL,
        api_key=SecretStr(SECRET),
        embedding_model="test-embedding",
        timeout_seconds=5.0,
        max_retries=0,
    )


async def test_a_judge_failure_is_logged_with_its_fields_and_no_text_or_secret(
    configure: Configure, judge_server: JudgeServer
) -> None:
    lines = configure("debug")
    judge_server.inject(Fault.REJECT_JSON_SCHEMA)
    judge_server.inject(Fault.INVALID_JSON, times=2)
    async with make_judge(judge_server) as judge:
        with pytest.raises(JudgeError) as caught:
            await judge.generate(statements_prompt(TEXT))
    assert caught.value.reason == "invalid_output"
    assert judge_server.stats.snapshot().chat_requests == 3  # rejected, invalid, re-asked invalid

    logged = lines()
    fallback = by_event(logged, "judge endpoint rejected response_format json_schema")
    judge_logger = OpenAIJudge.__module__  # the logger is named after the module
    assert (fallback["level"], fallback["logger"], fallback["model"]) == (
        "warning",
        judge_logger,
        MODEL,
    )
    reask = by_event(logged, "judge answer invalid")
    assert reask["level"] == "info" and reask["logger"] == judge_logger
    assert (reask["step"], reask["metric"], reask["error"]) == (
        "statements",
        "faithfulness",
        "not a JSON object",
    )
    for line in logged:
        assert list(line)[:4] == HEAD, line
    written = json.dumps(logged)
    assert SECRET not in written
    for word in TEXT.rstrip(".").split():
        assert word not in written


async def test_the_re_ask_line_names_the_model(
    configure: Configure, judge_server: JudgeServer
) -> None:
    lines = configure("info")
    judge_server.inject(Fault.INVALID_JSON)
    async with make_judge(judge_server) as judge:
        await judge.generate(statements_prompt(TEXT))
    assert by_event(lines(), "judge answer invalid")["model"] == MODEL


def test_stdlib_extra_fields_reach_the_line(configure: Configure) -> None:
    lines = configure("info")
    logging.getLogger("tests.logging.stdlib").warning(
        "partition %d paused", 3, extra={"partition": 3, "reason": "rebalance", "lag": 17}
    )
    (line,) = lines()
    assert line == {
        "timestamp": line["timestamp"],
        "level": "warning",
        "logger": "tests.logging.stdlib",
        "event": "partition 3 paused",
        "partition": 3,
        "reason": "rebalance",
        "lag": 17,
    }
    assert line["timestamp"].endswith("Z")


def test_both_paths_give_the_same_shape(configure: Configure) -> None:
    lines = configure("info")
    structlog.get_logger("tests.logging.native").info("flushed", records=4)
    logging.getLogger("tests.logging.stdlib").info("flushed", extra={"records": 4})
    native, stdlib = lines()
    for line, name in ((native, "tests.logging.native"), (stdlib, "tests.logging.stdlib")):
        assert list(line) == [*HEAD, "records"]
        assert (line["level"], line["logger"], line["event"], line["records"]) == (
            "info",
            name,
            "flushed",
            4,
        )


@pytest.mark.parametrize("path", ["structlog", "stdlib"])
def test_text_and_secret_fields_are_redacted(configure: Configure, path: str) -> None:
    lines = configure("info")
    fields = {"question": TEXT, "api_key": SECRET, "pg_dsn": f"postgresql://u:{SECRET}@h/db"}
    if path == "structlog":
        structlog.get_logger("tests.logging").warning("leak attempt", offset=9, **fields)
    else:
        logging.getLogger("tests.logging").warning("leak attempt", extra={"offset": 9, **fields})
    (line,) = lines()
    assert line["offset"] == 9
    assert {key: line[key] for key in fields} == dict.fromkeys(fields, "[redacted]")
    assert SECRET not in json.dumps(line) and TEXT not in json.dumps(line)


def test_exceptions_are_one_field_on_both_paths(configure: Configure) -> None:
    lines = configure("info")
    try:
        raise ZeroDivisionError("offset arithmetic")
    except ZeroDivisionError:
        structlog.get_logger("tests.logging.native").exception("record failed", offset=5)
        logging.getLogger("tests.logging.stdlib").exception("stats refresh failed")
    native, stdlib = lines()
    for line in (native, stdlib):
        assert line["level"] == "error"
        assert "ZeroDivisionError: offset arithmetic" in line["exception"]
    assert native["offset"] == 5


def test_levels_and_library_loggers(configure: Configure) -> None:
    lines = configure("warning")
    structlog.get_logger("tests.logging").info("dropped")
    logging.getLogger("tests.logging").info("dropped")
    logging.getLogger("aiokafka.consumer").warning("heartbeat failed", extra={"group": "g"})
    assert lines() == [
        {
            "timestamp": lines()[0]["timestamp"],
            "level": "warning",
            "logger": "aiokafka.consumer",
            "event": "heartbeat failed",
            "group": "g",
        }
    ]
    # at debug the SDKs would log request bodies: they stay at warning
    lines = configure("debug")
    logging.getLogger("openai._base_client").debug("Request options: %s", {"messages": TEXT})
    structlog.get_logger("tests.logging").debug("kept")
    assert [line["event"] for line in lines()] == ["kept"]


def test_configured_once_unless_forced(configure: Configure) -> None:
    lines = configure("info")
    other = io.StringIO()
    configure_logging("debug", stream=other)  # a second call: no effect
    logging.getLogger("tests.logging").debug("still filtered")
    logging.getLogger("tests.logging").info("to the first stream")
    assert [line["event"] for line in lines()] == ["to the first stream"]
    assert other.getvalue() == ""
    configure_logging("info", stream=other, force=True)
    logging.getLogger("tests.logging").info("to the second stream")
    assert json.loads(other.getvalue())["event"] == "to the second stream"
