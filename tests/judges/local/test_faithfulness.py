"""The local judge on faithfulness by meaning: its labelled regression file, record by record,
and the checks behind it (swapped names and numbers, reasons, evasive answers, sources)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from monitor.judges import Prompt
from monitor.judges.local.judge import LocalJudge
from monitor.judges.local.lexical.clauses import Claim, Segment, segments
from monitor.judges.local.lexical.thesaurus import synonyms
from monitor.judges.local.lexical.vocabulary import Vocabulary
from monitor.judges.local.lexical.wordforms import stem
from monitor.judges.steps import (
    STATEMENTS,
    VERIFY,
    Statements,
    StatementsInput,
    Verdicts,
    VerifyInput,
)
from monitor.text.numerals import numbers
from tests.support import ROOT

REGRESSION = ROOT / "tests" / "data" / "local_faithfulness_regression.jsonl"


def _records() -> list[Any]:
    rows = [
        json.loads(line)
        for line in REGRESSION.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    return [
        pytest.param(r, id=r["id"], marks=pytest.mark.xfail(strict=True, reason=r["known_miss"]))
        if r.get("known_miss")
        else pytest.param(r, id=r["id"])
        for r in rows
    ]


@pytest.fixture(scope="module")
def judge() -> LocalJudge:
    return LocalJudge()


@pytest.mark.parametrize("record", _records())
def test_regression_record(judge: LocalJudge, record: dict[str, Any]) -> None:
    """Faithful: faithfulness ≥ 0.5; hallucinated: < 0.5 (and the reason names what it
    should); evasive: noncommittal, never a 0."""
    response, label = record["response"], record["label"]
    statements = judge.statements(response)
    if label == "evasive":
        assert judge.noncommittal(response) and statements == []
        return
    assert not judge.noncommittal(response)
    checks = judge.verify("\n".join(record["retrieved_contexts"]), statements)
    faithfulness = sum(c.verdict for c in checks) / len(checks)
    reasons = " ".join(c.reason for c in checks)
    if label == "faithful":
        assert faithfulness >= 0.5, reasons
    else:
        assert faithfulness < 0.5, reasons
        for named in record.get("reason_has", []):
            assert named in reasons


BACKUPS = "Backups. Nightly database backups are written to Amazon S3 and kept for 35 days."
OFFICES = (
    "Offices. Our European headquarters is located in Dublin. "
    "The engineering hub is based in Amsterdam."
)
PROBATION = (
    "Probation. The probation period is three months for managers and one month for all "
    "other staff."
)


def test_invented_name_reason_names_both_sides(judge: LocalJudge) -> None:
    [check] = judge.verify(BACKUPS, ["Nightly backups of the database go to Google Drive."])
    assert check.verdict == 0 and check.rule == "name"
    assert check.reason == "answer says 'Google Drive', the context says 'Amazon S3'"


def test_name_said_of_another_thing_is_a_swap(judge: LocalJudge) -> None:
    [swapped] = judge.verify(OFFICES, ["The European headquarters is in Amsterdam."])
    assert swapped.verdict == 0 and swapped.rule == "swap"
    assert "answer says 'Amsterdam', the context says 'Dublin'" in swapped.reason
    [right] = judge.verify(OFFICES, ["The European headquarters is in Dublin."])
    assert right.verdict == 1, right.reason


def test_number_said_of_another_group_is_a_swap(judge: LocalJudge) -> None:
    [swapped] = judge.verify(PROBATION, ["Managers are on probation for one month."])
    assert swapped.verdict == 0 and swapped.rule == "swap"
    assert "answer says 'one month', the context says 'three months'" in swapped.reason
    [right] = judge.verify(PROBATION, ["Managers are on probation for three months."])
    assert right.verdict == 1, right.reason


def test_swap_needs_a_counterpart_of_the_same_kind(judge: LocalJudge) -> None:
    # the number sits in another part, but the closest part has no number: a join, not a swap
    context = (
        "Learning budget. Every employee has a learning budget of $1,500 per year. "
        "The learning budget expires on December 31."
    )
    [check] = judge.verify(context, ["The learning budget of $1,500 expires on December 31."])
    assert check.rule != "swap", check.reason


def test_one_before_a_unit_is_a_number() -> None:
    assert [n.values for n in numbers("a probation of one month")] == [frozenset({1.0})]
    assert numbers("the one you use") == []
    assert (1.0, "month") in Vocabulary.of("one month for all other staff").quantities


def test_segments_split_lists_of_quantities_not_nouns() -> None:
    assert segments(PROBATION.split(". ")[1]) == [
        "The probation period is three months for managers",
        "one month for all other staff.",
    ]
    assert segments("SAML 2.0 and OIDC are supported on the Enterprise plan.") == [
        "SAML 2.0 and OIDC are supported on the Enterprise plan."
    ]


def test_segment_names_include_names_that_start_a_part() -> None:
    [first, second] = Segment.split("Files go to Amazon S3; Dublin hosts the rest.")
    # names hold letters only; a reason quotes the name with its digits (`_other`)
    assert first.names == ("Amazon S",)
    assert second.names == ("Dublin",)


def test_unsupported_reason_quotes_words_and_closest_passage(judge: LocalJudge) -> None:
    [check] = judge.verify(BACKUPS, ["Backups are encrypted with customer keys."])
    assert check.verdict == 0
    assert "not in context" in check.reason
    assert "closest: “Nightly database backups are written to Amazon S3" in check.reason


@pytest.mark.parametrize(
    ("source", "where"),
    [("reference", "not in the reference"), ("response", "not in the response")],
)
def test_reasons_name_what_statements_are_checked_against(
    judge: LocalJudge, source: str, where: str
) -> None:
    prompt = Prompt(
        step=VERIFY,
        metric="factual_correctness",
        instruction="-",
        inputs=VerifyInput(
            context=BACKUPS,
            statements=["Backups are kept for 90 days.", "Backups are encrypted with keys."],
            source=source,
        ),
        output=Verdicts,
    )
    verdicts = judge.answer(prompt).verdicts
    assert [v.verdict for v in verdicts] == [0, 0]
    for v in verdicts:
        assert where in v.reason and "context" not in v.reason, v.reason
    assert "the reference says '35 days'" in verdicts[0].reason or source == "response"


@pytest.mark.parametrize(
    "response",
    [
        "I'm not sure about that. I'd suggest checking with HR.",
        "I'm sorry, but I cannot share that information. Please contact the Finance department.",
        "The documents I have don't mention that. You may want to ask the Facilities team.",
        "I can't say for certain. It might vary; the People team would know more.",
    ],
)
def test_statements_step_marks_evasive_answers_noncommittal(
    judge: LocalJudge, response: str
) -> None:
    prompt = Prompt(
        step=STATEMENTS,
        metric="faithfulness",
        instruction="-",
        inputs=StatementsInput(text=response),
        output=Statements,
    )
    out = judge.answer(prompt)
    assert out.noncommittal == 1 and out.statements == []


@pytest.mark.parametrize(
    "response",
    [
        "I'm not sure, but I think the fee is waived.",
        "Ask your manager for approval.",
        "Backups go to Amazon S3. For anything else, check with IT.",
    ],
)
def test_answers_that_assert_something_are_not_noncommittal(
    judge: LocalJudge, response: str
) -> None:
    assert not judge.noncommittal(response)
    assert judge.statements(response)


REFUNDS = (
    "Refunds. Annual plans can be refunded in full within 30 days of purchase. "
    "Monthly plans are not refundable."
)


def test_word_said_of_another_thing_is_a_role_swap(judge: LocalJudge) -> None:
    [swapped] = judge.verify(REFUNDS, ["Monthly plans can be refunded within 30 days."])
    assert swapped.verdict == 0 and swapped.rule == "swap"
    assert "answer says 'monthly', the context says 'annual'" in swapped.reason
    [right] = judge.verify(REFUNDS, ["Annual plans can be refunded within 30 days."])
    assert right.verdict == 1, right.reason


@pytest.mark.parametrize(
    ("context", "statement", "said", "other"),
    [
        (
            "Free shipping applies to orders within the EU. Orders outside the EU pay a flat fee "
            "of EUR 15.",
            "Orders outside the EU get free shipping.",
            "outside",
            "within",
        ),
        (
            "Contracts under $50,000 are approved by the department head. Contracts of $50,000 or "
            "more must be approved by the CFO.",
            "Contracts under $50,000 must be approved by the CFO.",
            "under",
            "more",
        ),
    ],
)
def test_opposite_words_are_swaps(
    judge: LocalJudge, context: str, statement: str, said: str, other: str
) -> None:
    [check] = judge.verify(context, [statement])
    assert check.verdict == 0 and check.rule == "swap"
    assert f"answer says '{said}', the context says '{other}'" in check.reason


def test_a_list_of_quantities_shares_its_subject(judge: LocalJudge) -> None:
    # "EUR 80 for trips outside the EU" is the daily meal allowance too
    context = (
        "The daily meal allowance is EUR 60 for trips within the EU and EUR 80 for trips "
        "outside the EU."
    )
    [swapped] = judge.verify(context, ["Outside the EU the daily meal allowance is EUR 60."])
    assert "answer says 'EUR 60', the context says 'EUR 80'" in swapped.reason


def test_opposite_word_said_where_the_context_says_it_passes(judge: LocalJudge) -> None:
    context = (
        "The daily meal allowance is EUR 60 for trips within the EU and EUR 80 for trips "
        "outside the EU."
    )
    [check] = judge.verify(context, ["Outside the EU the daily meal allowance is EUR 80."])
    assert check.verdict == 1, check.reason


def test_the_issue_paraphrase_passes(judge: LocalJudge) -> None:
    context = (
        "Employees may transfer up to five unused annual leave days to the following "
        "calendar year. Days beyond that limit expire on 31 December."
    )
    answer = (
        "You can move a maximum of five leftover holiday days into the next year; anything "
        "above that is lost at the end of December."
    )
    checks = judge.verify(context, judge.statements(answer))
    assert [c.verdict for c in checks] == [1], [c.reason for c in checks]


def test_synonyms_count_as_reworded_words() -> None:
    assert stem("expire") in synonyms("lost")
    assert synonyms("deleted").isdisjoint({stem("moved")})
    claim = Claim.of("Leftover days are lost.")
    vocabulary = Vocabulary.of("Unused days expire.")
    assert claim.missing(vocabulary) == []
    assert claim.synonymous(vocabulary) == ["leftover", "lost"]


def test_lexical_screen_checks_swaps_without_a_model_call(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    judge = LocalJudge()

    def no_model(texts: object) -> None:
        raise AssertionError("the lexical screen called MiniLM")

    monkeypatch.setattr(judge.embedder, "embed", no_model)
    swapped = judge.screen([PROBATION], "Managers are on probation for one month.", semantic=False)
    assert swapped.risk == 1.0 and "'three months'" in swapped.reason
    role = judge.screen([REFUNDS], "Monthly plans can be refunded within 30 days.", semantic=False)
    assert role.faithfulness == 1.0  # no parallel words without MiniLM


def test_an_invented_acronym_is_compared_with_acronyms_only(judge: LocalJudge) -> None:
    context = "Hardware. Each designer gets a MacBook Pro with 18 GB of memory, bought from Apple."
    [check] = judge.verify(context, ["Designers get a MacBook Pro with 18 GB of RAM."])
    assert check.verdict == 0 and check.reason == "name 'RAM' not in context"


@pytest.mark.parametrize(
    ("statement", "said", "other"),
    [("Sick leave is unpaid.", "unpaid", "paid")],
)
def test_a_word_flipped_by_its_prefix_is_a_negation(
    judge: LocalJudge, statement: str, said: str, other: str
) -> None:
    context = "Employees receive 10 days of paid sick leave per year."
    [check] = judge.verify(context, [statement])
    assert check.verdict == 0 and check.rule == "negation"
    assert f"answer says '{said}', the context says '{other}'" in check.reason
    [right] = judge.verify(context, ["Sick leave is paid."])
    assert right.verdict == 1, right.reason
    [back] = judge.verify(
        "Unpaid invoices are suspended after 30 days.",
        ["Paid invoices are suspended after 30 days."],
    )
    assert back.verdict == 0 and "the context says 'unpaid'" in back.reason


def test_an_assertion_about_what_something_depends_on_is_a_statement(judge: LocalJudge) -> None:
    response = "Whether you can carry days over depends on your manager's approval."
    assert not judge.noncommittal(response)
    assert judge.statements(response) == [response]


def test_not_certain_declines(judge: LocalJudge) -> None:
    response = (
        "I'm not certain how resets work without a registered number. It's probably "
        "best to ask the service desk directly."
    )
    assert judge.noncommittal(response) and judge.statements(response) == []
