"""The record schema (docs/design.md, "The record"): aliases, context shapes, and clear errors."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime

import pytest

from monitor.records import (
    Interaction,
    InvalidRecord,
    MetricResult,
    ScoredRecord,
    parse_record,
    too_large,
)
from tests.support.records import validate_record


def _bytes(obj: object) -> bytes:
    return json.dumps(obj).encode()


def test_aliases_and_context_shapes() -> None:
    record = parse_record(
        _bytes(
            {
                "id": "a1",
                "question": "q?",
                "documents": ["plain chunk", {"text": "object chunk", "id": "d2", "score": 0.7}],
                "answer": "an answer",
                "ground_truth": "the reference",
                "metadata": {"route": "hr"},
            }
        )
    )
    assert record.user_input == "q?"
    assert record.context_texts == ["plain chunk", "object chunk"]
    assert record.retrieved_contexts[1].id == "d2"
    assert record.retrieved_contexts[1].score == 0.7
    assert record.response == "an answer"
    assert record.reference == "the reference"
    assert record.route == "hr"


def test_kafka_key_is_the_id_fallback() -> None:
    record = parse_record(_bytes({"query": "q", "contexts": [], "response": "r"}), key=b"from-key")
    assert record.id == "from-key"
    assert record.retrieved_contexts == ()


@pytest.mark.parametrize(
    ("value", "reason", "names"),
    [
        (b"\xff\xfe not utf8", "not_utf8", "UTF-8"),
        (b"{not json", "not_json", "at column 2"),
        (b"[1, 2]", "not_object", "an array"),
        (_bytes({"id": "x", "contexts": [], "response": "r"}), "schema", "user_input"),
        (
            _bytes({"id": "x", "user_input": "q", "contexts": "one", "response": "r"}),
            "schema",
            "contexts",
        ),
        (
            _bytes({"id": "x", "user_input": 3, "contexts": [], "response": "r"}),
            "schema",
            "user_input",
        ),
    ],
)
def test_invalid_records_name_the_problem(value: bytes, reason: str, names: str) -> None:
    with pytest.raises(InvalidRecord) as info:
        parse_record(value)
    assert info.value.reason == reason
    assert names in info.value.detail


@pytest.mark.parametrize("response", ["", "   ", "\n\t"])
@pytest.mark.parametrize("alias", ["response", "answer"])
def test_an_empty_or_blank_response_is_invalid(response: str, alias: str) -> None:
    value = _bytes({"id": "x", "user_input": "q", "retrieved_contexts": ["c"], alias: response})
    with pytest.raises(InvalidRecord) as info:
        parse_record(value)
    assert (info.value.reason, info.value.detail) == ("empty_response", "response: empty or blank")


def test_a_json_error_reads_once_at_its_position() -> None:
    with pytest.raises(InvalidRecord) as info:
        parse_record(b'{"id": "x", "user_input": "unterminated')
    assert info.value.detail == "EOF while parsing a string at column 39"


def test_a_json_error_in_a_record_of_several_lines_names_the_records_line() -> None:
    """A file's line number is the reader's: the parser's "line 1" is said only of a record
    that itself spans lines, and then as the record's."""
    with pytest.raises(InvalidRecord) as info:
        parse_record(b'{"id": "x",\n "user_input": oops}')
    assert info.value.detail == "expected value at line 2, column 16 of the record"


@pytest.mark.parametrize(
    ("value", "key", "reason"),
    [
        (None, None, "not_json"),  # a tombstone
        (b'{"id": "x", "user_input": "\\ud800"}', None, "not_json"),  # a lone surrogate
        (b"[" * 5000 + b"]" * 5000, None, "not_json"),  # nested too deeply
        (b'"text"', None, "not_object"),
        (_bytes({"user_input": "q", "contexts": [], "response": "r"}), b"\xff", "not_utf8"),
        (_bytes({"id": None, "user_input": "q", "contexts": [], "response": "r"}), b"k", "schema"),
    ],
)
def test_what_the_transport_brings_is_checked_too(
    value: bytes | None, key: bytes | None, reason: str
) -> None:
    with pytest.raises(InvalidRecord) as info:
        parse_record(value, key)
    assert info.value.reason == reason


def test_errors_never_quote_the_record_text() -> None:
    secret = "my card is 4111 1111 1111 1111"
    with pytest.raises(InvalidRecord) as info:
        parse_record(_bytes({"id": "x", "user_input": [secret], "contexts": [], "response": "r"}))
    assert "4111" not in str(info.value)


def test_size_limit() -> None:
    oversized = too_large(1001, 1000)
    assert oversized is not None and oversized.reason == "too_large"
    assert oversized.detail == "1001 bytes > limit 1000"
    assert too_large(1000, 1000) is None


def test_the_arrival_time_stands_in_for_a_missing_timestamp_only() -> None:
    arrived = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
    base = {"id": "x", "user_input": "q", "contexts": [], "response": "r"}
    assert parse_record(_bytes(base), default_timestamp=arrived).timestamp == arrived
    own = parse_record(
        _bytes({**base, "timestamp": "2026-01-01T00:00:00Z"}), default_timestamp=arrived
    )
    assert own.timestamp == datetime(2026, 1, 1, tzinfo=UTC)


def test_unscoreable_is_null_in_output_never_zero() -> None:
    interaction = Interaction(id="i", user_input="q", retrieved_contexts=(), response="r")
    scored = ScoredRecord(
        interaction=interaction,
        results={
            "faithfulness": MetricResult(metric="faithfulness", score=math.nan),
            "context_utility": MetricResult(metric="context_utility", score=0.0),
        },
    )
    line = scored.output_line()
    assert line["scores"] == {"faithfulness": None, "context_utility": 0.0}
    assert json.loads(json.dumps(line))["scores"]["faithfulness"] is None


def test_the_json_path_accepts_exactly_what_the_dict_path_accepts() -> None:
    """`parse_record` (pydantic's JSON validation, the pipeline's one path) and
    `validate_record` over ``json.loads`` (the path of rows already decoded) agree on every
    shape: the same Interaction, or an InvalidRecord with the same reason."""
    import random

    rng = random.Random(7)
    pool: list[object] = [
        "text", "", None, 0, 1.5, True, 2**60, [], ["a", "b"], [{"text": "x"}],
        [{"text": 1}], [{"text": "x", "score": True}], [{"text": "x", "score": 0.5, "id": "c"}],
        [{"text": "x", "id": 3}], [{"score": 1}], {"route": "search"}, {}, "2026-01-01T00:00:00Z",
        [{"text": "x", "score": 2**60}], ["a", None], "caf\u00e9", " \n ",
        {"trace_id": "abc123", "span_id": "s1"}, {"trace_id": "not a trace id!"},
    ]  # fmt: skip
    keys = ["id", "user_input", "question", "query", "retrieved_contexts", "contexts",
            "documents", "response", "answer", "reference", "ground_truth", "metadata",
            "timestamp", "trace_id"]  # fmt: skip
    base = {"id": "r1", "user_input": "q", "retrieved_contexts": ["c"], "response": "a"}
    accepted = refused = 0
    for _ in range(3000):
        data: dict[str, object] = dict(base)
        for _ in range(rng.randint(0, 3)):
            name = rng.choice(keys)
            if rng.random() < 0.2:
                data.pop(name, None)
            else:
                data[name] = rng.choice(pool)
        key = rng.choice([None, b"k1"])
        decoded = dict(data)
        if "id" not in decoded and key:
            decoded["id"] = key.decode()
        try:
            expected = validate_record(decoded)
        except InvalidRecord as invalid:
            refused += 1
            with pytest.raises(InvalidRecord) as caught:
                parse_record(_bytes(data), key)
            assert caught.value.reason == invalid.reason, data
            continue
        accepted += 1
        assert parse_record(_bytes(data), key) == expected, data
    assert accepted > 300 and refused > 300  # both outcomes were exercised
