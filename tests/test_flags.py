"""The flag rules: which reasons a scored record gets, and whether it is a hallucination."""

from __future__ import annotations

import math

from monitor.config import Settings
from monitor.flags import (
    DEFAULT_THRESHOLDS,
    FLAG_REASONS,
    HALLUCINATION,
    LOW_RELEVANCY,
    NO_CONTEXT,
    NONCOMMITTAL,
    flag_reasons,
    hallucination_rule,
    has_context,
    is_hallucination,
    is_no_context,
)
from monitor.records import Interaction, MetricResult, ScoredRecord


def scored(contexts: list[str], **scores: float) -> ScoredRecord:
    interaction = Interaction(
        id="r", user_input="q", retrieved_contexts=contexts, response="An answer."
    )
    results = {name: MetricResult(metric=name, score=value) for name, value in scores.items()}
    return ScoredRecord(interaction=interaction, results=results)


def test_a_low_faithfulness_with_a_context_is_a_hallucination() -> None:
    record = scored(["a chunk"], faithfulness=0.2, response_relevancy=0.9)
    assert has_context(record) and not is_no_context(record)
    assert is_hallucination(record, {}) is True
    assert flag_reasons(record, {}) == [HALLUCINATION]
    assert is_hallucination(scored(["a chunk"], faithfulness=0.8), {"faithfulness": 0.5}) is False


def test_by_default_one_unsupported_claim_makes_a_hallucination() -> None:
    """The worked example's answer B (two supported claims of three) is flagged by default;
    answer A (every claim supported) is not; a threshold set by hand still rules."""
    b, a = scored(["a chunk"], faithfulness=2 / 3), scored(["a chunk"], faithfulness=1.0)
    assert is_hallucination(b, {}) is True and flag_reasons(b, {}) == [HALLUCINATION]
    assert is_hallucination(a, {}) is False and flag_reasons(a, {}) == []
    assert is_hallucination(b, {"faithfulness": 0.5}) is False
    assert Settings().thresholds == DEFAULT_THRESHOLDS
    assert DEFAULT_THRESHOLDS["faithfulness"] == 1.0


def test_the_rule_is_said_in_one_sentence_as_configured() -> None:
    assert hallucination_rule({}) == (
        "an answer counts as a hallucination when any of its claims is not supported by its "
        "retrieved context (faithfulness below 1)"
    )
    assert "less than 50% of its claims" in hallucination_rule({"faithfulness": 0.5})
    assert "(faithfulness below 0.5)" in hallucination_rule({"faithfulness": 0.5})


def test_no_context_is_its_own_reason_and_no_hallucination() -> None:
    for contexts in ([], ["", "  \n"]):  # none, or only blank chunks
        record = scored(contexts, faithfulness=0.0, response_relevancy=0.1)
        assert not has_context(record) and is_no_context(record)
        assert is_hallucination(record, {}) is None  # out of the rate, both terms
        assert flag_reasons(record, {}) == [NO_CONTEXT, LOW_RELEVANCY]
    # whatever faithfulness says against nothing, the flag is the retrieval's
    assert flag_reasons(scored([], faithfulness=1.0), {}) == [NO_CONTEXT]


def test_no_context_needs_a_faithfulness_score() -> None:
    declined = scored([], faithfulness=math.nan)
    declined.results["faithfulness"].details["noncommittal"] = True
    assert not is_no_context(declined)
    assert flag_reasons(declined, {}) == [NONCOMMITTAL]
    assert not is_no_context(scored([], response_relevancy=0.9))


def test_every_reason_is_listed_once() -> None:
    assert NO_CONTEXT in FLAG_REASONS
    assert len(set(FLAG_REASONS)) == len(FLAG_REASONS)
