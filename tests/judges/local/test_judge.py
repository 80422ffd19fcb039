"""The zero-token local judge: each step, the risk screen, and scoring through the Scorer."""

from __future__ import annotations

import asyncio
import math
import shutil
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest
from pydantic import BaseModel

from monitor.judges import JudgeError, OutT, Prompt
from monitor.judges.local import support
from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.judge import RESPONSE_AS_QUESTION, LocalJudge
from monitor.judges.local.support import ModelFileError, SupportModel
from monitor.judges.local.windows import TOP, windows_of
from monitor.judges.steps import (
    QUESTIONS,
    STATEMENTS,
    USEFULNESS,
    VERIFY,
    ContextVerdicts,
    GeneratedQuestion,
    QuestionsInput,
    Statements,
    StatementsInput,
    UsefulnessInput,
    Verdicts,
    VerifyInput,
)
from monitor.records import Interaction, validate_record
from monitor.scoring import Scorer

BYRON = (
    "Byron v. Rajneesh Foundation International was a 1985 lawsuit filed by Helen Byron in "
    "Portland, Oregon. Byron provided over US$300,000 to the organization, and some of the "
    "money was used to buy an armored Rolls Royce. She was born on March 2, 1942."
)
RECEIPTS = (
    "Employees must attach a receipt for every travel expense over $100. "
    "Lodging receipts are required for stays of three or more nights."
)


@pytest.fixture(scope="module")
def judge() -> LocalJudge:
    return LocalJudge()


def _prompt(step: str, inputs: BaseModel, output: type[OutT]) -> Prompt[OutT]:
    return Prompt(step=step, metric="test", instruction="-", inputs=inputs, output=output)


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


def _interaction(response: str, contexts: list[str], reference: str | None = None) -> Interaction:
    return validate_record(
        {
            "id": "r1",
            "user_input": "When do I need to attach a receipt for travel expenses?",
            "retrieved_contexts": contexts,
            "response": response,
            "reference": reference,
        }
    )


# --- every support decision is the model's


SUPPORT_METRICS = ["faithfulness", "context_utility", "context_recall", "factual_correctness"]


@pytest.mark.parametrize(("logit", "expected"), [(6.0, 1.0), (-6.0, 0.0)])
async def test_every_support_decision_is_the_models(logit: float, expected: float) -> None:
    embedder = MiniLMEmbedder()
    model = _Verdict(embedder, logit)
    judge = LocalJudge(embedder=embedder, model=model)
    # a swapped number and an invented fact: rules would fail them; only the model decides
    record = await Scorer(judge, [*SUPPORT_METRICS, "noise_sensitivity"]).score(
        _interaction(
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
    assert model.support(["Anything."], []) == [support.Support(0.0, "")]
    assert model.support([], contexts) == []


def test_windows_are_sentence_pairs_and_short_contexts_whole() -> None:
    assert windows_of(["One. Two. Three."]) == ["One. Two. Three.", "One. Two.", "Two. Three."]
    assert windows_of(["Only one sentence.", "", "Only one sentence."]) == ["Only one sentence."]
    long = " ".join(f"S{k} is here." for k in range(6))
    assert long not in windows_of([long]) and len(windows_of([long])) == 5


def test_the_model_files_are_the_pinned_ones(tmp_path: Path) -> None:
    shutil.copytree(support.MODEL_DIR, tmp_path / "model")
    SupportModel(MiniLMEmbedder(), model_dir=tmp_path / "model").warm_up()
    with (tmp_path / "model" / "tokenizer.json").open("a") as f:
        f.write(" ")
    with pytest.raises(ModelFileError, match="not the pinned file"):
        SupportModel(MiniLMEmbedder(), model_dir=tmp_path / "model").warm_up()
    (tmp_path / "model" / "support.onnx").unlink()
    with pytest.raises(ModelFileError, match="missing"):
        SupportModel(MiniLMEmbedder(), model_dir=tmp_path / "model").warm_up()


def test_reasons_carry_the_probability_and_the_window(judge: LocalJudge) -> None:
    verdicts = judge.answer(
        _prompt(
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
        _prompt(VERIFY, VerifyInput(context="", statements=["Anything."]), Verdicts)
    )
    assert isinstance(empty, Verdicts) and empty.verdicts[0].verdict == 0


def test_a_phrase_answer_is_read_with_its_question(judge: LocalJudge) -> None:
    question = "Which magazine was started first, Arthur's Magazine or First for Women?"
    assert judge.statements("Arthur's Magazine.", question) == [f"{question} Arthur's Magazine."]
    said = "Arthur's Magazine was started in 1844, before First for Women."
    assert judge.statements(said, question) == [said]
    assert judge.statements("Arthur's Magazine.") == ["Arthur's Magazine."]


# --- statements, questions, usefulness


def test_statements_that_assert_nothing_are_dropped(judge: LocalJudge) -> None:
    assert judge.statements("I don't know.") == []
    assert (
        judge.statements(
            "That depends on several factors, so I can't give a definitive answer. "
            "Please contact the billing team."
        )
        == []
    )
    assert judge.statements("Yes. SSO is on the Enterprise plan.") == [
        "SSO is on the Enterprise plan."
    ]
    # a hedged claim is still a claim, and a referral alone is advice to check
    assert len(judge.statements("I'm not sure, but I think the fee is waived.")) == 1
    assert judge.statements("Ask your manager for approval.") == ["Ask your manager for approval."]
    assert judge.statements("I'm not sure, the fee is $50.") == ["I'm not sure, the fee is $50."]


def test_statements_split_sentences_and_long_compounds(judge: LocalJudge) -> None:
    text = (
        "Dr. Smith paid $3.5 million in Jan. 2020 to the U.S. Army. "
        "Receipts are needed for every expense over one hundred dollars in all countries; "
        "lodging receipts are needed only for stays of three or more nights in a hotel."
    )
    statements = judge.statements(text)
    assert statements[0] == "Dr. Smith paid $3.5 million in Jan. 2020 to the U.S. Army."
    assert len(statements) == 3
    assert judge.statements("") == []


@pytest.mark.parametrize(
    ("response", "noncommittal"),
    [
        ("I don't know.", 1),
        ("There is no information about that in the documents.", 1),
        ("I cannot answer that question.", 1),
        ("The context does not mention the deadline.", 1),
        ("Attach a receipt for expenses over $100.", 0),
        ("Nobility", 0),
    ],
)
def test_questions_is_the_response_with_noncommittal_phrases(
    judge: LocalJudge, response: str, noncommittal: int
) -> None:
    generated = judge.question(response)
    # no question is generated: the response stands in, and says so
    assert generated.question == RESPONSE_AS_QUESTION + response
    assert generated.noncommittal == noncommittal


async def test_the_marked_response_is_embedded_as_the_response(judge: LocalJudge) -> None:
    response = "Attach a receipt for expenses over $100."
    marked, plain = (await judge.embed([judge.question(response).question, response])).vectors
    assert marked == plain


# --- the Judge protocol


async def test_generate_answers_every_step_at_zero_tokens(judge: LocalJudge) -> None:
    assert judge.kind == "local"
    out = await judge.generate(
        _prompt(STATEMENTS, StatementsInput(text="One fact. Another fact."), Statements)
    )
    assert isinstance(out.value, Statements) and len(out.value.statements) == 2
    verdicts = await judge.generate(
        _prompt(VERIFY, VerifyInput(context=BYRON, statements=["Byron gave $500,000."]), Verdicts)
    )
    assert isinstance(verdicts.value, Verdicts)
    assert verdicts.value.verdicts[0].verdict == 0
    assert verdicts.value.verdicts[0].statement == "Byron gave $500,000."
    questions = await judge.generate(
        _prompt(QUESTIONS, QuestionsInput(response="I don't know."), GeneratedQuestion), n=3
    )
    assert len(questions.values) == 3
    assert all(isinstance(q, GeneratedQuestion) and q.noncommittal for q in questions.values)
    useful = await judge.generate(
        _prompt(
            USEFULNESS,
            UsefulnessInput(question="q", answer="Byron gave $300,000.", contexts=[BYRON]),
            ContextVerdicts,
        )
    )
    assert isinstance(useful.value, ContextVerdicts)
    for judged in (out, verdicts, questions, useful):
        assert judged.usage.calls == 0 and judged.usage.total_tokens == 0
    embedded = await judge.embed(["a", "b"])
    assert len(embedded.vectors) == 2 and len(embedded.vectors[0]) == 384
    assert embedded.usage.total_tokens == 0


async def test_questions_are_answered_without_a_worker_thread(
    judge: LocalJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_thread(*_: object) -> None:
        raise AssertionError("questions went to a worker thread")

    monkeypatch.setattr(judge, "_in_thread", no_thread)
    questions = await judge.generate(
        _prompt(QUESTIONS, QuestionsInput(response="It is 3 days."), GeneratedQuestion), n=2
    )
    assert [q.question for q in questions.values] == [RESPONSE_AS_QUESTION + "It is 3 days."] * 2


async def test_steps_run_in_the_judges_own_threads() -> None:
    judge = LocalJudge(threads=3)
    names: list[str] = []

    def record(value: int) -> int:
        names.append(threading.current_thread().name)
        return value

    assert await asyncio.gather(*(judge._in_thread(record, k) for k in range(6))) == list(range(6))
    assert all(name.startswith("local-judge") for name in names)
    await judge.aclose()
    with pytest.raises(RuntimeError):
        await judge._in_thread(record, 0)
    with pytest.raises(ValueError):
        LocalJudge(threads=0)


async def test_embed_repeated_texts_get_the_same_floats(judge: LocalJudge) -> None:
    embedded = await judge.embed(["a question", "an answer", "an answer"])
    vectors = judge.embedder.embed(["a question", "an answer"]).tolist()
    assert embedded.vectors == [vectors[0], vectors[1], vectors[1]]


async def test_unknown_step_is_a_permanent_judge_error(judge: LocalJudge) -> None:
    with pytest.raises(JudgeError) as info:
        await judge.generate(_prompt("translate", QuestionsInput(response="x"), Statements))
    assert info.value.reason == "bad_request" and not info.value.retryable


# --- through the Scorer: every metric runs, stamped judge="local", zero usage


async def test_scorer_with_local_judge_runs_all_metrics_at_zero_tokens() -> None:
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
    scorer = Scorer(LocalJudge(), metrics)
    record = await scorer.score(
        _interaction(
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


async def test_relevancy_asks_the_local_judge_once_and_shows_its_placeholder_once() -> None:
    """Its choices would all be the same placeholder, so one is asked for (not three)."""
    judge = LocalJudge()
    answer = "Attach a receipt for travel expenses over $100."
    record = await Scorer(judge, ["response_relevancy"], relevancy_questions=3).score(
        _interaction(answer, [RECEIPTS])
    )
    details = record.results["response_relevancy"].details
    assert [q["question"] for q in details["questions"]] == [RESPONSE_AS_QUESTION + answer]
    assert details["distinct_questions"] == [RESPONSE_AS_QUESTION + answer]
