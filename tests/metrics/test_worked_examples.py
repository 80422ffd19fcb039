"""The worked examples of docs/design.md, end to end: prompt → HTTP → judge server → score.

One question, two retrieved chunks — an irrelevant one first, then the relevant
one — and responses/references written so the deterministic judge's verdicts
are obvious (see `tests.support.answers`).
"""

from __future__ import annotations

import pytest

from monitor.judges.llm import OpenAIJudge
from monitor.judges.steps import GROUNDING, QUESTIONS, STATEMENTS, USEFULNESS, VERIFY
from monitor.metrics.noise_sensitivity import NoiseSensitivity
from monitor.records import Interaction
from monitor.scoring import Scorer
from tests.support.judge_server import JudgeServer

QUESTION = "When do I need to attach a receipt for travel expenses?"
IRRELEVANT = (
    "Employees accrue 25 days of paid vacation per year. "
    "Unused vacation days expire on 31 March of the following year."
)
RELEVANT = (
    "Travel expenses over $100 must be submitted with a receipt. "
    "Claims are reimbursed with the next monthly payroll."
)
#: two claims; the chunks support only the first
REFERENCE = (
    "Travel expenses over $100 must be submitted with a receipt. "
    "Lodging receipts are always required."
)

AP_HALF = 0.5 / (1 + 1e-10)


def interaction(response: str, reference: str | None = REFERENCE, **extra: str) -> Interaction:
    return Interaction.model_validate(
        {
            "id": extra.get("id", "receipt"),
            "user_input": QUESTION,
            "retrieved_contexts": [IRRELEVANT, RELEVANT],
            "response": response,
            "reference": reference,
        }
    )


@pytest.fixture(params=["frugal", "per_call"])
def pattern(request: pytest.FixtureRequest) -> str:
    return str(request.param)


async def test_context_precision_and_precision_at_k(http_judge: OpenAIJudge, pattern: str) -> None:
    scorer = Scorer(
        http_judge,
        ["context_precision", "precision_at_k"],
        call_pattern=pattern,  # type: ignore[arg-type]
    )
    record = await scorer.score(interaction("Attach a receipt for travel expenses over $100."))
    precision = record.results["context_precision"]
    assert precision.score == pytest.approx(0.5, abs=1e-9)
    assert precision.score == AP_HALF
    assert [c["verdict"] for c in precision.details["contexts"]] == [0, 1]
    assert record.results["precision_at_k"].score == 0.5
    assert record.error is None


async def test_context_recall(http_judge: OpenAIJudge, pattern: str) -> None:
    scorer = Scorer(http_judge, ["context_recall"], call_pattern=pattern)  # type: ignore[arg-type]
    record = await scorer.score(interaction("Attach a receipt for travel expenses over $100."))
    recall = record.results["context_recall"]
    assert recall.score == 0.5
    assert [s["verdict"] for s in recall.details["statements"]] == [1, 0]
    assert recall.details["statements"][1]["statement"] == "Lodging receipts are always required"


async def test_faithfulness(http_judge: OpenAIJudge, pattern: str) -> None:
    scorer = Scorer(http_judge, ["faithfulness"], call_pattern=pattern)  # type: ignore[arg-type]
    response = (
        "Travel expenses over $100 must be submitted with a receipt. "
        "Receipts must be uploaded within 10 days."
    )
    record = await scorer.score(interaction(response))
    faithfulness = record.results["faithfulness"]
    assert faithfulness.score == 0.5
    statements = faithfulness.details["statements"]
    assert [s["verdict"] for s in statements] == [1, 0]
    assert "uploaded" in statements[1]["reason"]
    assert record.usage.calls == 2
    assert record.usage.prompt_tokens > 0 and record.usage.completion_tokens > 0


async def test_factual_correctness_f1(http_judge: OpenAIJudge, pattern: str) -> None:
    scorer = Scorer(http_judge, ["factual_correctness"], call_pattern=pattern)  # type: ignore[arg-type]
    record = await scorer.score(
        interaction(
            "Attach a receipt for travel expenses over $100; "
            "lodging receipts are needed only for stays of 3+ nights.",
            reference="Attach a receipt for travel expenses over $100; "
            "lodging receipts are always needed.",
        )
    )
    result = record.results["factual_correctness"]
    assert result.score == 0.5
    assert (result.details["tp"], result.details["fp"], result.details["fn"]) == (1, 1, 1)


async def test_noise_sensitivity(http_judge: OpenAIJudge, pattern: str) -> None:
    response = (
        "Travel expenses over $100 must be submitted with a receipt. "
        "Unused vacation days expire on 31 March of the following year."
    )
    modes = {}
    for mode in ("relevant", "irrelevant"):
        scorer = Scorer(
            http_judge,
            ["noise_sensitivity"],
            call_pattern=pattern,  # type: ignore[arg-type]
            noise_sensitivity=NoiseSensitivity(mode=mode),
        )
        result = (await scorer.score(interaction(response))).results["noise_sensitivity"]
        modes[mode] = result.score
        assert result.details["relevant_contexts"] == [False, True]
        assert [s["wrong"] for s in result.details["response_statements"]] == [False, True]
    assert modes == {"relevant": 0.0, "irrelevant": 0.5}


async def test_all_worked_examples_in_one_scorer(
    judge_server: JudgeServer, http_judge: OpenAIJudge, pattern: str
) -> None:
    """The worked examples' record scored with every metric at once, one HTTP judge
    (frugal: faithfulness and context_utility through the fused ``grounding`` step)."""
    scorer = Scorer(
        http_judge,
        [
            "faithfulness",
            "context_utility",
            "context_precision",
            "precision_at_k",
            "context_recall",
            "response_relevancy",
            "semantic_similarity",
        ],
        call_pattern=pattern,  # type: ignore[arg-type]
    )
    response = (
        "Travel expenses over $100 must be submitted with a receipt. "
        "Receipts must be uploaded within 10 days."
    )
    record = await scorer.score(interaction(response))
    scores = {name: r.score for name, r in record.results.items()}
    assert scores["faithfulness"] == 0.5
    assert scores["context_precision"] == AP_HALF
    assert scores["precision_at_k"] == 0.5
    assert scores["context_recall"] == 0.5
    # the response's first sentence is copied from the relevant chunk: useful; the other is not
    assert scores["context_utility"] == AP_HALF
    assert 0.0 < scores["response_relevancy"] < 1.0
    assert 0.0 < scores["semantic_similarity"] < 1.0
    assert [s["verdict"] for s in record.results["faithfulness"].details["statements"]] == [1, 0]
    assert [c["verdict"] for c in record.results["context_utility"].details["contexts"]] == [0, 1]
    stats = judge_server.stats.snapshot()
    if pattern == "frugal":
        assert set(stats.steps) == {GROUNDING, STATEMENTS, VERIFY, USEFULNESS, QUESTIONS}
        assert stats.steps[GROUNDING].requests == 1
        assert stats.steps[STATEMENTS].requests == 1  # the reference, for context_recall
    else:
        assert GROUNDING not in stats.steps
    assert stats.calls == record.usage.calls - stats.embedding_requests
    assert stats.prompt_tokens + stats.embedding_tokens == record.usage.prompt_tokens
    assert stats.completion_tokens == record.usage.completion_tokens
