"""The local judge: claims, one support decision per claim, through every metric."""

from __future__ import annotations

import asyncio
import dataclasses
import math
import shutil
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from monitor.flags import DEFAULT_THRESHOLDS, HALLUCINATION, flag_reasons
from monitor.judges import steps
from monitor.judges.local import entailment
from monitor.judges.local.answer import AnswerModel
from monitor.judges.local.claims import Claims, claims_or_text
from monitor.judges.local.combiner import COMBINER_PATH, FEATURES, Combiner
from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.entailment import ModelFileError, SupportModel
from monitor.judges.local.evidence import Gaps
from monitor.judges.local.judge import Decision, LocalJudge
from monitor.judges.local.readings import Reader, lexical_risk
from monitor.judges.local.windows import TOP, windows_of
from monitor.metrics.faithfulness import HALLUCINATION_PROBABILITY
from monitor.records import ALL_METRICS, Interaction, ScoredRecord
from monitor.scoring import Scorer
from tests.support.local_judge import (
    BYRON,
    RECEIPTS,
    TOPIC_CLAIMS,
    TOPIC_FACTS,
    FixedLogit,
    answers_every_step_at_zero_tokens,
    receipt_interaction,
)
from tests.support.prompts import step_prompt
from tests.support.records import validate_record

#: The lesson's worked example: one context, a faithful answer and one with an invented clause.
REFUNDS = (
    "Cancel your subscription in Settings. Refunds are issued to the original card within "
    "5-7 business days."
)
ANSWER_A = "Cancel in Settings, then your refund posts to your original card in about a week."
ANSWER_B = (
    "Cancel in Settings, refunds post in 5-7 days, and amounts over $500 need manager sign-off."
)


@pytest.fixture(scope="module")
def judge() -> LocalJudge:
    """The judge deciding claim by claim: these tests read how single claims are supported
    (the shipped default reads the answer as a whole, `test_the_worked_example_read_as_a_whole`)."""
    return LocalJudge(decision="claim")


def useful(judge: LocalJudge, answer: str, contexts: list[str]) -> list[steps.ContextVerdict]:
    """The ``usefulness`` step's verdicts, asked through the Judge protocol."""
    inputs = steps.UsefulnessInput(question="", answer=answer, contexts=contexts)
    judged = asyncio.run(judge.generate(step_prompt(inputs, steps.ContextVerdicts)))
    return judged.values[0].verdicts


def verified(judge: LocalJudge, inputs: steps.VerifyInput) -> steps.Verdicts:
    """The ``verify`` step's verdicts, asked through the Judge protocol."""
    return asyncio.run(judge.generate(step_prompt(inputs, steps.Verdicts))).values[0]


def _refund_record(response: str) -> Interaction:
    return validate_record(
        {
            "id": "refund",
            "user_input": "How do I cancel and get my money back?",
            "retrieved_contexts": [REFUNDS],
            "response": response,
        }
    )


async def worked_example(judge: LocalJudge) -> tuple[ScoredRecord, ScoredRecord]:
    """Answers A and B of the worked example, scored for faithfulness by ``judge``."""
    scorer = Scorer(judge, ["faithfulness"])
    return (
        await scorer.score(_refund_record(ANSWER_A)),
        await scorer.score(_refund_record(ANSWER_B)),
    )


def only_b_is_flagged(a: ScoredRecord, b: ScoredRecord) -> str:
    """A is supported throughout; B has one unsupported claim of three, its invented $500
    one, and B alone is flagged as a hallucination. The claim's reason, for more checks."""
    assert a.results["faithfulness"].score == pytest.approx(1.0)
    assert b.results["faithfulness"].score == pytest.approx(2 / 3)
    [unsupported] = [v for v in b.results["faithfulness"].details["statements"] if not v["verdict"]]
    assert unsupported["statement"].startswith("Amounts over $500")
    assert "'$500'" in unsupported["reason"]
    assert flag_reasons(b, DEFAULT_THRESHOLDS) == [HALLUCINATION]
    assert flag_reasons(a, DEFAULT_THRESHOLDS) == []
    return str(unsupported["reason"])


@pytest.mark.xfail(
    strict=True,
    reason="A's 'in about a week' is read as written since issue 41 (the duration rewrite hid "
    "hallucinations on the realistic tune split); the support model gives it 0.02 against "
    "'within 5-7 business days', which the lexical evidence matches; a combiner refitted on "
    "the claims as written does not lift it (docs/benchmarks.md, 'Local judge')",
)
async def test_the_worked_example_is_decided_claim_by_claim() -> None:
    # claim by claim, B is a hallucination (one invented claim) and A is not
    only_b_is_flagged(*await worked_example(LocalJudge(decision="claim")))


async def test_the_worked_example_read_as_a_whole() -> None:
    """B's invented claim makes B likelier than A to hold an unsupported claim. By default
    the shipped cut (fitted so that at most 5 % of the faithful answers of each dev set are
    flagged) reaches neither (docs/model.md says why A is close); a cut between them flags
    B's invented claim, and only it."""
    shipped = LocalJudge()
    assert shipped.decision == "answer"
    a, b = await worked_example(shipped)
    p_a = a.results["faithfulness"].details[HALLUCINATION_PROBABILITY]
    p_b = b.results["faithfulness"].details[HALLUCINATION_PROBABILITY]
    assert p_a < p_b < shipped.cut
    assert a.results["faithfulness"].score == b.results["faithfulness"].score == 1.0

    cut = (p_a + p_b) / 2
    strict = LocalJudge(answer_model=replace(AnswerModel.load(), cut=cut))
    assert "answer p=" in only_b_is_flagged(*await worked_example(strict))


# --- every support decision goes through `Reader.decide`


class _Fixed(Reader):
    """The real judge's reader with `decide` answering one fixed probability for every claim.

    If any support decision were made anywhere but in `decide` (the model, the gaps or
    the combiner called directly), flipping this probability would leave it unchanged.
    """

    probability: float = 0.5

    def decide(
        self, claims: Claims, contexts: Sequence[str], *, per_context: bool = False
    ) -> list[list[Decision]]:
        gaps = Gaps((), (), (), ())
        rows = len(contexts) if per_context else 1
        return [[Decision(self.probability, 0.5, "window", gaps) for _ in claims.said]] * rows


SUPPORT_METRICS = ["faithfulness", "context_utility", "context_recall", "factual_correctness"]


@pytest.mark.parametrize(("probability", "expected"), [(0.99, 1.0), (0.01, 0.0)])
async def test_every_support_decision_is_the_one_interfaces(
    probability: float, expected: float
) -> None:
    judge = LocalJudge()
    fixed = _Fixed(judge.support_model)
    fixed.probability = probability
    judge.reader = fixed
    # a swapped number and an invented fact: only `decide` may say whether they hold
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
    said = "Helen Byron lent the organization $500,000."
    screen = judge.screen([BYRON], said)
    # the screen's risk is the answer's probability of an unsupported claim, from `decide`'s
    claims = [probability] * len(claims_or_text(said).said)
    assert screen.risk == pytest.approx(AnswerModel.load().probability(claims), abs=1e-6)
    assert screen.faithfulness == expected
    await judge.aclose()


def test_the_decision_joins_the_model_and_the_gaps(judge: LocalJudge) -> None:
    said = ["Refunds are issued to the original card.", "Amounts over $500 need sign-off."]
    [[copied, invented]] = judge.reader.decide(Claims.of(said), [REFUNDS])
    assert copied.supported and not invented.supported
    assert invented.gaps.missing_numbers == ("$500",)
    weights = judge.reader.weights
    assert copied.probability == pytest.approx(
        weights.probability(
            math.log(copied.model_probability / (1 - copied.model_probability)), copied.gaps
        ),
        abs=1e-3,
    )


def test_no_context_supports_nothing(judge: LocalJudge) -> None:
    [[found]] = judge.reader.decide(Claims.of(["Anything at all."]), [])
    assert found.probability == 0.0 and not found.supported
    assert judge.screen([], "Paris is in France.").faithfulness == 0.0


def test_each_claim_is_read_against_its_nearest_windows_then_the_two_joined() -> None:
    contexts, said = TOPIC_FACTS, TOPIC_CLAIMS
    windows = windows_of(contexts)
    supported = FixedLogit(2.0)
    found = supported.support(said, contexts)
    # a window alone supports each claim: no joined window is read
    assert len(supported.seen) == 2 * TOP and all(w in windows for _, w in supported.seen)
    assert all(f.window in windows and f.logit == pytest.approx(2.0) for f in found)
    unsupported = FixedLogit(-2.0)
    unsupported.support(said, contexts)
    joined = [w for _, w in unsupported.seen if w not in windows]
    assert len(unsupported.seen) == 2 * (TOP + 1) and len(joined) == 2
    assert all(w.count("Fact number") >= 3 for w in joined)
    # no evidence: nothing supports the claim, and the model is not asked
    assert supported.support(["Anything."], []) == [entailment.Support(0.0, "")]
    assert supported.support([], contexts) == []


def test_each_context_gets_the_windows_it_gave_in_one_model_pass(judge: LocalJudge) -> None:
    """Context utility splits what faithfulness reads by the context each window came
    from: one `logits` call, and no pair the faithfulness reading did not have."""
    model = judge.support_model
    said = ["Receipts are needed for expenses over $100.", "Byron was born in 1942."]
    contexts = [RECEIPTS, BYRON, "", "The canteen opens at 8."]
    together = model.support(said, contexts)
    calls: list[list[tuple[str, str]]] = []
    logits = model.logits

    def counted(pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float32]:
        calls.append(list(pairs))
        return logits(pairs)

    model.logits = counted  # type: ignore[method-assign]
    try:
        split = model.support_by_context(said, contexts)
        verdicts = useful(judge, " ".join(said), contexts)
    finally:
        del model.logits
    assert len(calls) == 2  # one pass each
    assert {w for _, w in calls[0]} >= {s.window for s in together}
    # each claim's best window overall is its best in the context it came from
    assert split[0][0] == together[0] and split[1][1] == together[1]
    assert split[2] == [entailment.Support(0.0, ""), entailment.Support(0.0, "")]
    decided = judge.reader.decide(Claims.of(said), contexts, per_context=True)
    assert [v.verdict for v in verdicts] == [int(any(d.supported for d in row)) for row in decided]
    assert [v.verdict for v in verdicts] == [1, 1, 0, 0]
    assert model.support_by_context([], contexts) == [[], [], [], []]


def test_a_context_is_useful_when_it_supports_any_claim_even_beside_an_invented_one(
    judge: LocalJudge,
) -> None:
    verdicts = useful(judge, ANSWER_B, [REFUNDS, "The canteen opens at 8."])
    assert [v.verdict for v in verdicts] == [1, 0]


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


def test_the_combiner_weights_are_the_pinned_ones(tmp_path: Path) -> None:
    shipped = Combiner.load()
    assert len(shipped.weights) == len(FEATURES)
    changed = tmp_path / "combiner.json"
    changed.write_bytes(COMBINER_PATH.read_bytes() + b" ")
    with pytest.raises(ModelFileError, match="not the pinned file"):
        Combiner.load(changed)
    with pytest.raises(ModelFileError, match="missing"):
        Combiner.load(tmp_path / "absent.json")


def test_reasons_name_the_probability_the_words_and_the_window(judge: LocalJudge) -> None:
    verdicts = verified(
        judge, steps.VerifyInput(context=RECEIPTS, statements=["Receipts are kept for 7 years."])
    )
    assert isinstance(verdicts, steps.Verdicts)
    [v] = verdicts.verdicts
    assert v.verdict == 0
    assert "(p=0." in v.reason and "'7'" in v.reason
    assert "closest in the context: “" in v.reason
    empty = verified(judge, steps.VerifyInput(context="", statements=["Anything."]))
    assert isinstance(empty, steps.Verdicts) and empty.verdicts[0].verdict == 0
    assert "is empty" in empty.verdicts[0].reason


@pytest.mark.parametrize(
    ("context", "answer", "supported"),
    [
        (
            "We accept credit cards and SEPA direct debit. Orders ship within two days. "
            "PayPal is not accepted.",
            "Sorry, we don't take PayPal. You can pay by credit card or by SEPA direct debit.",
            True,
        ),
        (
            "Local admin rights are not granted to employees. Software is installed by IT.",
            "You can ask for local admin rights.",
            False,
        ),
        (
            "Full-time employees are entitled to 25 days of paid annual leave.",
            "If you work full time you get twenty-five paid days off each year.",
            True,
        ),
        (
            "Full-time employees are entitled to 25 days of paid annual leave.",
            "If you work full time you get thirty paid days off each year.",
            False,
        ),
    ],
)
def test_the_last_rounds_four_examples(
    judge: LocalJudge, context: str, answer: str, supported: bool
) -> None:
    screen = judge.screen([context], answer)
    assert (screen.faithfulness == 1.0) is supported, screen.reason


def test_the_cheap_screen_reads_only_the_gaps(judge: LocalJudge) -> None:
    model = judge.support_model
    before = model.pairs
    risky = lexical_risk(judge.reader, [REFUNDS], "Amounts over $500 need manager sign-off.")
    safe = lexical_risk(judge.reader, [REFUNDS], "Refunds are issued to the original card.")
    assert model.pairs == before  # no model call
    assert risky > 0.5 > safe


# --- through the Judge protocol and the Scorer


async def test_generate_answers_every_step_at_zero_tokens(judge: LocalJudge) -> None:
    await answers_every_step_at_zero_tokens(judge)


async def test_scorer_runs_all_metrics_at_zero_tokens() -> None:
    metrics = list(ALL_METRICS)
    scorer = Scorer(LocalJudge(decision="claim"), metrics)
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
    # one supported claim, one invented (7 years)
    assert record.results["faithfulness"].score == 0.5
    assert record.results["context_utility"].score == pytest.approx(0.5)
    relevancy = record.results["response_relevancy"].score
    assert 0.3 < relevancy <= 1.0
    # no question generated: the response itself is compared with the user input
    asked = record.results["response_relevancy"].details
    assert asked["response_as_question"] is True
    assert asked["distinct_questions"] == [record.interaction.response]
    assert not math.isnan(record.results["semantic_similarity"].score)


@pytest.mark.parametrize("metric", ["faithfulness", "context_recall", "noise_sensitivity"])
async def test_a_phrase_answer_is_read_after_its_question_through_every_metric(
    metric: str,
) -> None:
    """The statements step says which claim is a phrase answer and what it answers; each
    metric hands that on to ``verify``, so the model reads the phrase after the question
    while the claim shown stays the answer's own words."""
    model = FixedLogit(5.0)
    judge = LocalJudge(model=model)
    question = "Which plan includes single sign-on?"
    record = validate_record(
        {
            "id": "phrase",
            "user_input": f"[conversation so far]\nuser: Hello\n{question}",
            "retrieved_contexts": ["Single sign-on is included in the Enterprise plan only."],
            "response": "Enterprise.",
            "reference": "Enterprise.",
        }
    )
    scored = await Scorer(judge, [metric]).score(record)
    assert scored.results[metric].error is None
    assert "Enterprise." in str(scored.results[metric].details)
    assert f"{question}\n" not in str(scored.results[metric].details)
    read = {claim for claim, _ in model.seen}
    assert read == {f"{question}\nEnterprise."}


async def test_a_metric_gets_its_own_answer_from_a_shared_cache() -> None:
    """faithfulness reads the claims as one answer, noise_sensitivity claim by claim: with
    one context both ask the same ``verify`` prompt, and each keeps its own answer, also
    when the second record is served from the scorer's cache."""
    judge = LocalJudge()
    record = validate_record(
        {
            "id": "refund",
            "user_input": "How do I cancel and get my money back?",
            "retrieved_contexts": [REFUNDS],
            "response": ANSWER_B,
            "reference": ANSWER_A,
        }
    )
    alone = {
        m: await Scorer(judge, [m]).score(record) for m in ("faithfulness", "noise_sensitivity")
    }
    both = Scorer(judge, ["noise_sensitivity", "faithfulness"])
    for _ in range(2):
        scored = await both.score(record)
        for metric, by_itself in alone.items():
            assert scored.results[metric].details == by_itself.results[metric].details
    assert both.cache_hits > 0


async def test_an_evasive_answer_is_unscoreable_never_zero() -> None:
    record = await Scorer(LocalJudge(), ["faithfulness"]).score(
        receipt_interaction("I'm not sure, sorry. You could ask the travel team.", [RECEIPTS])
    )
    assert math.isnan(record.results["faithfulness"].score)


@pytest.mark.parametrize("response", ["ok", "Paris is the capital of France."])
async def test_an_answer_with_no_context_has_faithfulness_zero(response: str) -> None:
    """As docs/metrics.md says: nothing supports a claim when nothing was retrieved."""
    record = await Scorer(LocalJudge(), ["faithfulness"]).score(
        validate_record(
            {"id": "n", "user_input": "What is it?", "retrieved_contexts": [], "response": response}
        )
    )
    assert record.results["faithfulness"].score == 0.0


def test_the_model_reads_pairs_of_up_to_max_tokens_word_pieces() -> None:
    """The shipped tokenizer.json says 128 (and pads to 128); the model reads 160, unpadded:
    `entailment.MAX_TOKENS` is the one length, set over the file's."""
    model = SupportModel(MiniLMEmbedder())
    model.warm_up()
    tokenizer = model._tokenizer
    long = " ".join(["word"] * 400)
    assert len(tokenizer.encode(long, long).ids) == entailment.MAX_TOKENS == 160
    assert len(tokenizer.encode("short", "pair").ids) < 128


def test_the_judge_answers_one_question_beside_the_judge_protocol() -> None:
    """Beside the Judge protocol the judge has six public methods, one of them the seam
    (`LocalJudge.support`); what is not a decision is read through ``judge.reader``."""
    fields = {f.name for f in dataclasses.fields(LocalJudge)}
    public = {
        name
        for name, member in vars(LocalJudge).items()
        if not name.startswith("_")
        and name not in fields
        and (callable(member) or isinstance(member, property))
    }
    protocol = {"generate", "embed", "aclose"}
    assert public - protocol == {"warm_up", "cut", "claims", "support", "assess", "screen"}
