"""The record schema (docs/design.md, "The record"): aliases, context shapes, and clear errors."""

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


@pytest.mark.parametrize("response", ["", "   ", "\n\t"])
@pytest.mark.parametrize("alias", ["response", "answer"])
def test_an_empty_or_blank_response_is_invalid(response: str, alias: str) -> None:
    from monitor.records import check_record

    value = _bytes({"id": "x", "user_input": "q", "retrieved_contexts": ["c"], alias: response})
    for check in (parse_record, check_record):
        with pytest.raises(InvalidRecord) as info:
            check(value)
        assert (info.value.reason, info.value.detail) == (
            "empty_response",
            "response: empty or blank",
        )


def test_a_json_error_reads_once_at_its_position() -> None:
    with pytest.raises(InvalidRecord) as info:
        parse_record(b'{"id": "x", "user_input": "unterminated')
    # json's message ends in "starting at": the position follows a colon, not another "at"
    assert info.value.detail == "Unterminated string starting at: line 1 column 27"


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


def test_check_record_accepts_exactly_what_parse_record_accepts() -> None:
    """The cheap check never lets through what the full validation refuses (nor the reverse)."""
    import random

    from monitor.records import CheckedRecord, check_record

    rng = random.Random(7)
    pool: list[object] = [
        "text", "", None, 0, 1.5, True, 2**60, [], ["a", "b"], [{"text": "x"}],
        [{"text": 1}], [{"text": "x", "score": True}], [{"text": "x", "score": 0.5, "id": "c"}],
        [{"text": "x", "id": 3}], [{"score": 1}], {"route": "search"}, {}, "2026-01-01T00:00:00Z",
        [{"text": "x", "score": 2**60}], ["a", None], "caf\u00e9", " \n ",
    ]  # fmt: skip
    keys = ["id", "user_input", "question", "query", "retrieved_contexts", "contexts",
            "documents", "response", "answer", "reference", "ground_truth", "metadata",
            "timestamp"]  # fmt: skip
    base = {"id": "r1", "user_input": "q", "retrieved_contexts": ["c"], "response": "a"}
    accepted = checked_fast = 0
    for trial in range(3000):
        data: dict[str, object] = dict(base)
        for _ in range(rng.randint(0, 3)):
            name = rng.choice(keys)
            if rng.random() < 0.2:
                data.pop(name, None)
            else:
                data[name] = rng.choice(pool)
        raw = json.dumps(data).encode()
        if trial % 50 == 0:
            raw = raw.replace(b'"q"', b'"\\ud800"')  # a lone surrogate escape
        key = rng.choice([None, b"k1", b"\xff"])
        try:
            expected = parse_record(raw, key)
        except InvalidRecord as invalid:
            with pytest.raises(InvalidRecord) as caught:
                check_record(raw, key)
            assert caught.value.reason == invalid.reason, data
            continue
        accepted += 1
        got = check_record(raw, key)
        if isinstance(got, CheckedRecord):
            checked_fast += 1
            assert got.id == expected.id and got.metadata == expected.metadata
            got = got.interaction()
        assert got == expected, data
    assert accepted > 300 and checked_fast > 100  # both paths were exercised
