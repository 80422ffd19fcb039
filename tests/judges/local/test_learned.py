"""The learned local judge: every support decision is the support model's, through every metric."""

from __future__ import annotations

import math
import shutil
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from monitor.judges.local import entailment
from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.entailment import ModelFileError, SupportModel
from monitor.judges.local.learned import LearnedJudge
from monitor.judges.local.windows import TOP, windows_of
from monitor.judges.steps import (
    VERIFY,
    Verdicts,
    VerifyInput,
)
from monitor.scoring import Scorer
from tests.support.local_judge import (
    BYRON,
    RECEIPTS,
    answers_every_step_at_zero_tokens,
    prompt,
    receipt_interaction,
)


@pytest.fixture(scope="module")
def judge() -> LearnedJudge:
    return LearnedJudge()


class _Verdict(SupportModel):
    """The shipped model's interface with one fixed logit for every pair.

    A stand-in for the model's *output* only (windows, batching and the judge are the
    real code): if any support decision were made anywhere but through the model,
    flipping this logit would leave it unchanged.
    """

    def __init__(self, embedder: MiniLMEmbedder, logit: float) -> None:
        super().__init__(embedder)
        self.logit = logit
        self.seen: list[tuple[str, str]] = []

    def logits(self, pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float32]:
        self.seen.extend(pairs)
        return np.full(len(pairs), self.logit, dtype=np.float32)


# --- every support decision is the model's


SUPPORT_METRICS = ["faithfulness", "context_utility", "context_recall", "factual_correctness"]


@pytest.mark.parametrize(("logit", "expected"), [(6.0, 1.0), (-6.0, 0.0)])
async def test_every_support_decision_is_the_models(logit: float, expected: float) -> None:
    embedder = MiniLMEmbedder()
    model = _Verdict(embedder, logit)
    judge = LearnedJudge(embedder=embedder, model=model)
    # a swapped number and an invented fact: rules would fail them; only the model decides
    record = await Scorer(judge, [*SUPPORT_METRICS, "noise_sensitivity"]).score(
        receipt_interaction(
            "Attach a receipt for travel expenses over $500. Receipts are kept for 7 years.",
            ["The cafeteria opens at 8 am.", RECEIPTS],
            reference="Attach a receipt for every travel expense over $100.",
        )
    )
    for name in SUPPORT_METRICS:
        result = record.results[name]
        assert result.error is None, name
        assert result.score == pytest.approx(expected), name
    assert record.results["noise_sensitivity"].error is None
    assert model.seen, "the model was never asked"
    screen = judge.screen([BYRON], "Helen Byron lent the organization $500,000.")
    assert screen.risk == pytest.approx(1.0 - expected, abs=0.01)
    await judge.aclose()


def test_each_statement_is_read_against_its_few_nearest_windows() -> None:
    embedder = MiniLMEmbedder()
    model = _Verdict(embedder, 2.0)
    contexts = [" ".join(f"Fact number {k} is about topic {k}." for k in range(12))]
    found = model.support(["Topic 3 has a fact.", "Topic 9 has a fact."], contexts)
    assert len(model.seen) == 2 * TOP
    windows = windows_of(contexts)
    assert all(f.window in windows for f in found)
    assert all(f.probability == pytest.approx(1 / (1 + math.exp(-2.0)), abs=1e-5) for f in found)
    # no evidence: nothing supports the statement, and the model is not asked
    assert model.support(["Anything."], []) == [entailment.Support(0.0, "")]
    assert model.support([], contexts) == []


def test_each_context_on_its_own_in_one_model_pass(judge: LearnedJudge) -> None:
    """`support_each` gives what `support` gives context by context, with one `logits`
    call (the model's batches span the contexts); context utility reads it so."""
    model = judge.support_model
    said = ["Receipts are needed for expenses over $100.", "Byron was born in 1942."]
    contexts = [RECEIPTS, BYRON, "", "The canteen opens at 8."]
    one_by_one = [model.support(said, [context]) for context in contexts]
    calls: list[int] = []
    logits = model.logits

    def counted(pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float32]:
        calls.append(len(pairs))
        return logits(pairs)

    model.logits = counted  # type: ignore[method-assign]
    try:
        together = model.support_each(said, contexts)
        verdicts = judge.usefulness(" ".join(said), contexts)
    finally:
        del model.logits
    assert together == one_by_one
    assert len(calls) == 2  # one pass each
    assert [v.verdict for v in verdicts] == [
        int(any(f.supported for f in found)) for found in together
    ]
    assert model.support_each([], contexts) == [[], [], [], []]


def test_windows_are_sentence_pairs_and_short_contexts_whole() -> None:
    assert windows_of(["One. Two. Three."]) == ["One. Two. Three.", "One. Two.", "Two. Three."]
    assert windows_of(["Only one sentence.", "", "Only one sentence."]) == ["Only one sentence."]
    long = " ".join(f"S{k} is here." for k in range(6))
    assert long not in windows_of([long]) and len(windows_of([long])) == 5


def test_the_model_files_are_the_pinned_ones(tmp_path: Path) -> None:
    shutil.copytree(entailment.MODEL_DIR, tmp_path / "model")
    SupportModel(MiniLMEmbedder(), model_dir=tmp_path / "model").warm_up()
    with (tmp_path / "model" / "tokenizer.json").open("a") as f:
        f.write(" ")
    with pytest.raises(ModelFileError, match="not the pinned file"):
        SupportModel(MiniLMEmbedder(), model_dir=tmp_path / "model").warm_up()
    (tmp_path / "model" / "support.onnx").unlink()
    with pytest.raises(ModelFileError, match="missing"):
        SupportModel(MiniLMEmbedder(), model_dir=tmp_path / "model").warm_up()


def test_reasons_carry_the_probability_and_the_window(judge: LearnedJudge) -> None:
    verdicts = judge.answer(
        prompt(
            VERIFY,
            VerifyInput(context=RECEIPTS, statements=["Receipts are kept for 7 years."]),
            Verdicts,
        )
    )
    assert isinstance(verdicts, Verdicts)
    [v] = verdicts.verdicts
    assert "(p=0." in v.reason or "(p=1." in v.reason
    assert "closest in the context: “" in v.reason
    empty = judge.answer(
        prompt(VERIFY, VerifyInput(context="", statements=["Anything."]), Verdicts)
    )
    assert isinstance(empty, Verdicts) and empty.verdicts[0].verdict == 0


def test_a_phrase_answer_is_read_with_its_question(judge: LearnedJudge) -> None:
    question = "Which magazine was started first, Arthur's Magazine or First for Women?"
    assert judge.statements("Arthur's Magazine.", question) == [f"{question} Arthur's Magazine."]
    said = "Arthur's Magazine was started in 1844, before First for Women."
    assert judge.statements(said, question) == [said]
    assert judge.statements("Arthur's Magazine.") == ["Arthur's Magazine."]


# --- through the Judge protocol and the Scorer


async def test_generate_answers_every_step_at_zero_tokens(judge: LearnedJudge) -> None:
    await answers_every_step_at_zero_tokens(judge)


async def test_scorer_runs_all_metrics_at_zero_tokens() -> None:
    metrics = [
        "faithfulness",
        "response_relevancy",
        "context_utility",
        "context_precision",
        "precision_at_k",
        "context_recall",
        "factual_correctness",
        "noise_sensitivity",
        "semantic_similarity",
    ]
    scorer = Scorer(LearnedJudge(), metrics)
    record = await scorer.score(
        receipt_interaction(
            "Attach a receipt for travel expenses over $100. Receipts are kept for 7 years.",
            ["The cafeteria opens at 8 am.", RECEIPTS],
            reference="Attach a receipt for every travel expense over $100.",
        )
    )
    assert record.usage.total_tokens == 0
    assert set(record.results) == set(metrics)
    for result in record.results.values():
        assert result.judge == "local"
        assert result.error is None
    # one supported statement, one invented (7 years): the design's worked example (docs/design.md)
    assert record.results["faithfulness"].score == 0.5
    assert record.results["context_utility"].score == pytest.approx(0.5)
    relevancy = record.results["response_relevancy"].score
    assert 0.3 < relevancy <= 1.0
    assert not math.isnan(record.results["semantic_similarity"].score)
