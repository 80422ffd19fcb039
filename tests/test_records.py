"""The record schema of DESIGN §2: aliases, context shapes, and clear errors."""

from __future__ import annotations

import json
import math

import pytest

from monitor.records import (
    Interaction,
    InvalidRecord,
    MetricResult,
    ScoredRecord,
    parse_record,
)


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
        (b"{not json", "not_json", "line 1"),
        (b"[1, 2]", "not_object", "list"),
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


def test_errors_never_quote_the_record_text() -> None:
    secret = "my card is 4111 1111 1111 1111"
    with pytest.raises(InvalidRecord) as info:
        parse_record(_bytes({"id": "x", "user_input": [secret], "contexts": [], "response": "r"}))
    assert "4111" not in str(info.value)


def test_size_limit() -> None:
    big = _bytes({"id": "x", "user_input": "q" * 2000, "contexts": [], "response": "r"})
    with pytest.raises(InvalidRecord) as info:
        parse_record(big, max_bytes=1000)
    assert info.value.reason == "too_large"


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
