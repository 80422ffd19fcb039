"""The zero-token local judge: each step, the risk screen, and scoring through the Scorer."""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Sequence
from typing import Any

import pytest

from monitor.judges import JudgeError
from monitor.judges.local import support
from monitor.judges.local.base import RESPONSE_AS_QUESTION
from monitor.judges.local.embedder import MiniLMEmbedder, Vectors
from monitor.judges.local.judge import LocalJudge
from monitor.judges.local.lexical.names import acronyms
from monitor.judges.local.lexical.negation import denials
from monitor.judges.local.lexical.vocabulary import Vocabulary
from monitor.judges.local.thresholds import LocalThresholds
from monitor.judges.steps import (
    QUESTIONS,
    GeneratedQuestion,
    QuestionsInput,
    Statements,
)
from monitor.scoring import Scorer
from monitor.text.numerals import numbers
from tests.support.local_judge import (
    BYRON,
    RECEIPTS,
    answers_every_step_at_zero_tokens,
    prompt,
    receipt_interaction,
)


@pytest.fixture(scope="module")
def judge() -> LocalJudge:
    return LocalJudge()


# --- verify: invented amounts, dates, names are caught, with a reason naming them


def test_invented_amount_fails_and_reason_names_it(judge: LocalJudge) -> None:
    [check] = judge.verify(BYRON, ["Helen Byron provided the organization $500,000."])
    assert check.verdict == 0
    assert "$500,000" in check.reason and "amount" in check.reason
    [same] = judge.verify(BYRON, ["Helen Byron provided the organization $300,000."])
    assert same.verdict == 1, same.reason


@pytest.mark.parametrize(
    ("statement", "named"),
    [
        ("Byron was born on March 2, 1950.", "1950"),
        ("The lawsuit was filed in 1990.", "1990"),
        ("Byron provided 45% of the money.", "45%"),
        ("Byron provided over $0.5 million to the organization.", "$0.5 million"),
        ("The lawsuit was filed by John Smith in Portland.", "John Smith"),
        ("The money was used to buy a Ferrari.", "Ferrari"),
        ("The lawsuit was filed in Seattle, Oregon.", "Seattle"),
    ],
)
def test_invented_facts_fail(judge: LocalJudge, statement: str, named: str) -> None:
    [check] = judge.verify(BYRON, [statement])
    assert check.verdict == 0
    assert named in check.reason


@pytest.mark.parametrize(
    "statement",
    [
        "Helen Byron filed a lawsuit in 1985.",
        "Byron provided over US$300,000 to the organization.",
        "Some of the money was used to buy an armored Rolls Royce.",
        "Byron was born on March 2, 1942.",
        "The lawsuit was filed in Portland, Oregon.",
        "Byron provided more than $300000.",  # the same amount written differently
        "Some of the money was used to purchase an armored Rolls Royce.",  # a synonym
    ],
)
def test_supported_statements_pass(judge: LocalJudge, statement: str) -> None:
    [check] = judge.verify(BYRON, [statement])
    assert check.verdict == 1, check.reason
    assert check.support > 0.8


def test_words_gathered_from_different_passages_fail(judge: LocalJudge) -> None:
    context = (
        "Beowulf is a 2007 film directed by Robert Zemeckis.\n"
        "Neil Gaiman is an English author of novels and comic books."
    )
    [check] = judge.verify(context, ["Neil Gaiman directed the film Beowulf."])
    assert check.verdict == 0
    assert "not said together" in check.reason


def test_negation_absent_from_context_fails(judge: LocalJudge) -> None:
    [check] = judge.verify(RECEIPTS, ["Employees do not attach a receipt for travel expenses."])
    assert check.verdict == 0
    assert "negation" in check.reason


SMS_POLICY = "SMS codes are not allowed as a second factor."


@pytest.mark.parametrize(
    ("context", "statement", "named"),
    [
        (SMS_POLICY, "SMS codes are allowed as a second factor.", "allowed"),
        # the particle is set aside: "No, ..." does not negate the claim
        (SMS_POLICY, "No, SMS codes are allowed as a second factor.", "allowed"),
        (
            "Contractors aren't eligible for the annual bonus.",
            "Contractors are eligible for the annual bonus.",
            "eligible",
        ),
        (
            "Meals under $50 are reimbursed without a receipt.",
            "Meals under $50 are reimbursed with a receipt.",
            "receipt",
        ),
        (
            "Customer data is never shared with advertising partners.",
            "Customer data is shared with advertising partners.",
            "shared",
        ),
    ],
)
def test_dropped_negation_fails(
    judge: LocalJudge, context: str, statement: str, named: str
) -> None:
    [check] = judge.verify(context, [statement])
    assert check.verdict == 0 and check.rule == "negation"
    assert check.reason == f"context negates '{named}'"


def test_kept_negation_passes(judge: LocalJudge) -> None:
    for statement in (
        "SMS codes are not allowed as a second factor.",
        "No, SMS codes are not allowed as a second factor.",
    ):
        [check] = judge.verify(SMS_POLICY, [statement])
        assert check.verdict == 1, check.reason


@pytest.mark.parametrize(
    ("context", "statement"),
    [
        # the negated word is also asserted in the passage
        (
            "SMS codes are not allowed; authenticator apps are allowed as a second factor.",
            "Authenticator apps are allowed as a second factor.",
        ),
        # the denying half of a long sentence holds little of the statement
        (
            "Annual plans are fully refundable within 14 days of purchase; monthly plans are not "
            "refunded but can be cancelled any time, effective at the end of the period.",
            "Annual plans can be fully refunded within 14 days of purchase.",
        ),
        # "or not" and a bound ("no later than") deny nothing
        (
            "Whether or not you travel abroad, receipts are required for every expense.",
            "Receipts are required when you travel abroad.",
        ),
        (
            "Refunds are paid no later than 30 days after cancellation.",
            "Refunds are paid within 30 days after cancellation.",
        ),
    ],
)
def test_paraphrase_near_unrelated_negation_passes(
    judge: LocalJudge, context: str, statement: str
) -> None:
    [check] = judge.verify(context, [statement])
    assert check.verdict == 1, check.reason


def test_lexical_denials() -> None:
    assert denials(SMS_POLICY)[0] == {"allow"}
    assert denials("After 14 days without payment the account becomes read-only.")[0] == {"payment"}
    assert denials("None of the contractors are eligible.")[0] == {"contractor"}
    assert denials("Refunds are paid no later than 30 days.")[0] == frozenset()
    assert denials("You are not only billed monthly.")[0] == frozenset()
    assert denials("Whether or not the user is an admin, MFA is required.")[0] == frozenset()


def test_comparisons_need_the_same_word(judge: LocalJudge) -> None:
    context = "Jon Amiel (born 20 May 1948) is an English film director since the early 1980s."
    [check] = judge.verify(context, ["Jon Amiel was born earlier."])
    assert check.verdict == 0
    assert "earlier" in check.reason


def test_words_absent_everywhere_fail_fast(judge: LocalJudge) -> None:
    [check] = judge.verify(RECEIPTS, ["Songs sung after wars."])
    assert check.verdict == 0 and "not in context" in check.reason


VPN = (
    "VPN. Use the GlobalGate client to connect from outside the office. "
    "Multi-factor authentication is required on every connection.\n"
    "VPN sessions last 12 hours, after which you have to sign in again.\n"
    "Single sign-on. SAML 2.0 and OIDC are supported on the Enterprise plan.\n"
    "Service desk hours. The IT service desk is open 07:00 to 19:00 CET, Monday to Friday.\n"
    "Seats. Removed seats take effect at the next renewal. SMS codes are not allowed.\n"
    "Mailbox. Email older than 2 years is moved to the online archive automatically.\n"
    "Failed payments are retried 3 times over 7 days. After 14 days without payment the "
    "account becomes read-only.\n"
    "Guest Wi-Fi. Visitors use the Kestrel-Guest network."
)


@pytest.mark.parametrize(
    "statement",
    [
        # acronyms spell out a phrase of the context, both ways
        "You connect through the GlobalGate client with MFA.",
        "SSO is part of the Enterprise plan.",
        "The IT desk is open from 07:00 to 19:00 CET.",
        # an answer particle frames the claim; a leading "No," is not a negation
        "No, removed seats only take effect at the next renewal.",
        "Yes: SMS codes are not allowed.",
        # generic verbs and other forms of the context's words
        "Email older than 2 years goes to the online archive.",
        "VPN sessions last 12 hours; you use the GlobalGate client.",
        # a compound statement: each clause is said in its own passage
        "VPN sessions last 12 hours, and multi-factor authentication is required.",
    ],
)
def test_paraphrases_pass(judge: LocalJudge, statement: str) -> None:
    [check] = judge.verify(VPN, [statement])
    assert check.verdict == 1, check.reason


@pytest.mark.parametrize(
    ("statement", "named"),
    [
        ("VPN sessions last 24 hours with MFA.", "24"),
        ("After 3 days without payment the account becomes read-only.", "3 days"),
        ("Visitors use the Kestrel-Visitors network.", "Kestrel-Visitors"),
        ("You connect through the GlobalGate client with SAML.", "not"),
        ("Yes, email older than 2 years is deleted from the online archive.", "deleted"),
        ("Yes, SMS codes are not accepted at the next renewal.", "accepted"),
        ("You connect through the AnyConnect client with MFA.", "AnyConnect"),
    ],
)
def test_tolerance_keeps_hard_failures(judge: LocalJudge, statement: str, named: str) -> None:
    [check] = judge.verify(VPN, [statement])
    assert check.verdict == 0
    assert named in check.reason


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


def test_near_miss_restating_its_passage_passes_on_minilm() -> None:
    context = (
        "Service desk hours. The IT service desk is open 07:00 to 19:00 CET, Monday to Friday."
    )
    statement = "The service desk is open 07:00 to 19:00 CET on weekdays."
    lexical = LocalJudge().check(statement, context, semantic=False)
    assert lexical.verdict == 0 and lexical.window_coverage >= 0.7
    [check] = LocalJudge().verify(context, [statement])
    assert check.verdict == 1 and check.rule == "restated", check.reason


def test_verify_is_deterministic(judge: LocalJudge) -> None:
    statements = ["Helen Byron gave $500,000.", "Byron was born on March 2, 1942.", "Cats fly."]
    first = judge.verify(BYRON, statements)
    assert LocalJudge().verify(BYRON, statements) == first
    assert judge.verify(BYRON, statements) == first


STUDIO = (
    "In 1990 the company purchased a small film studio in Burbank. "
    "The studio had made horror movies since the seventies; its founder retired that year. "
    "Ten employees stayed after the sale."
)
#: statements whose verdict needs MiniLM word synonyms (bought/purchased, movie/film, ...)
SYNONYM_STATEMENTS = [
    "In 1990 the firm bought a small movie studio in Burbank.",
    "The studio had produced horror films since the seventies.",
    "Its founder quit that year.",
    "Ten workers remained after the sale.",
    "The studio made comedies.",
]


class _CountingEmbedder(MiniLMEmbedder):
    """Records the number of texts of every `embed` call."""

    def __init__(self, *, cache_size: int) -> None:
        super().__init__(cache_size=cache_size)
        self.calls: list[int] = []

    def embed(self, texts: Sequence[str]) -> Vectors:
        self.calls.append(len(texts))
        return super().embed(texts)


def test_verify_asks_minilm_once_and_equals_one_statement_at_a_time() -> None:
    batched = _CountingEmbedder(cache_size=0)
    checks = LocalJudge(embedder=batched).verify(STUDIO, SYNONYM_STATEMENTS)
    # all statements' words together, then (rule 6) the near-miss clauses with their windows
    assert 1 <= len(batched.calls) <= 2 and batched.calls[0] > 0
    one_by_one = [
        LocalJudge(embedder=MiniLMEmbedder(cache_size=0)).verify(STUDIO, [s])[0]
        for s in SYNONYM_STATEMENTS
    ]
    assert checks == one_by_one
    lexical = [LocalJudge().check(s, STUDIO, semantic=False) for s in SYNONYM_STATEMENTS]
    # synonyms matched words for some statements (bought/purchased, movie/film)
    assert any(c.window_coverage > x.window_coverage for c, x in zip(checks, lexical, strict=True))


def test_usefulness_asks_minilm_once_and_equals_one_context_at_a_time() -> None:
    contexts = [STUDIO, "The firm bought a movie company.", RECEIPTS, "Horror films sold well."]
    answer = "The firm bought a horror movie studio in Burbank with ten workers."
    batched = _CountingEmbedder(cache_size=0)
    verdicts = LocalJudge(embedder=batched).usefulness(answer, contexts)
    assert len(batched.calls) == 1
    one_by_one = [
        LocalJudge(embedder=MiniLMEmbedder(cache_size=0)).usefulness(answer, [c])[0]
        for c in contexts
    ]
    assert verdicts == one_by_one


def test_windows_that_cannot_win_are_not_embedded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Skipping the windows that could not beat the best one changes no check, asks fewer words."""
    pruned = _CountingEmbedder(cache_size=0)
    checks = LocalJudge(embedder=pruned).verify(STUDIO, SYNONYM_STATEMENTS)

    def every_top_window(windows: Any, t: LocalThresholds) -> list[int]:
        return list(windows.order[: t.semantic_windows])

    monkeypatch.setattr(support, "contenders", every_top_window)
    full = _CountingEmbedder(cache_size=0)
    assert LocalJudge(embedder=full).verify(STUDIO, SYNONYM_STATEMENTS) == checks
    assert sum(pruned.calls) <= sum(full.calls)


# --- the other steps


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


def test_usefulness_per_context(judge: LocalJudge) -> None:
    verdicts = judge.usefulness(
        "Attach a receipt for travel expenses over $100.",
        ["The cafeteria opens at 8 am and serves breakfast.", RECEIPTS],
    )
    assert [v.verdict for v in verdicts] == [0, 1]
    assert judge.usefulness("anything", []) == []


# --- the Judge protocol


async def test_generate_answers_every_step_at_zero_tokens(judge: LocalJudge) -> None:
    await answers_every_step_at_zero_tokens(judge)


async def test_questions_are_answered_without_a_worker_thread(
    judge: LocalJudge, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def no_thread(*_: object) -> None:
        raise AssertionError("questions went to a worker thread")

    monkeypatch.setattr(judge, "_in_thread", no_thread)
    questions = await judge.generate(
        prompt(QUESTIONS, QuestionsInput(response="It is 3 days."), GeneratedQuestion), n=2
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
        await judge.generate(prompt("translate", QuestionsInput(response="x"), Statements))
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


def test_lexical_numbers_by_value() -> None:
    text = "US$300,000, 0.3 million dollars, 12% and four"
    values = {v for n in numbers(text) for v in n.values}
    assert {300000.0, 12.0, 4.0} <= values
    assert Vocabulary.of("Rodríguez's cities").has_word("rodriguez")
    assert Vocabulary.of("Rodríguez's cities").has_word("city")
    assert [n.values for n in numbers("Twenty-Two and SIX, not often")] == [{20.0}, {2.0}, {6.0}]
    assert [(n.surface, n.kind) for n in numbers("costs €5, US$ 7 or 3%")] == [
        ("€5", "amount"),
        ("US$ 7", "amount"),
        ("3%", "percentage"),
    ]
    # case-insensitive matching also finds Unicode case variants: not number words, no error
    assert [n.values for n in numbers("ſix and ſeven, then six")] == [{6.0}]


def test_lexical_sentence_features_without_negators_or_hyphens() -> None:
    assert denials("SMS codes are allowed as a second factor.") == (
        frozenset(),
        frozenset({"sms", "code", "allow", "second", "factor"}),
    )
    assert Vocabulary.of("Single sign-on, SSO").compounds == {"sign-on"}
    assert Vocabulary.of("Single sign on").compounds == frozenset()
    assert acronyms("Single sign on. MFA") == {"ss", "so", "sso"}


def test_screen_ranks_invented_facts_as_risky(judge: LocalJudge) -> None:
    bad = judge.screen([BYRON], "Helen Byron lent the organization $500,000.")
    good = judge.screen([BYRON], "Byron provided over US$300,000 to the organization.")
    assert bad.risk == 1.0 and bad.faithfulness == 0.0 and "$500,000" in bad.reason
    assert good.risk < 0.2 and good.faithfulness == 1.0
    lexical = judge.screen([BYRON], "Helen Byron lent the organization $500,000.", semantic=False)
    assert lexical.risk == 1.0


async def test_relevancy_asks_the_local_judge_once_and_shows_its_placeholder_once() -> None:
    """Its choices would all be the same placeholder, so one is asked for (not three)."""
    judge = LocalJudge()
    answer = "Attach a receipt for travel expenses over $100."
    record = await Scorer(judge, ["response_relevancy"], relevancy_questions=3).score(
        receipt_interaction(answer, [RECEIPTS])
    )
    details = record.results["response_relevancy"].details
    assert [q["question"] for q in details["questions"]] == [RESPONSE_AS_QUESTION + answer]
    assert details["distinct_questions"] == [RESPONSE_AS_QUESTION + answer]
