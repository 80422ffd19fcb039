"""The local judge's statements step: an answer as its atomic claims."""

from __future__ import annotations

import pytest

from monitor.judges.local.claims import (
    PHRASE_JOIN,
    Claims,
    as_read,
    claims,
    claims_or_text,
    sentences,
    split,
)


def test_the_worked_example_is_three_claims() -> None:
    found = claims(
        "Cancel in Settings, refunds post in 5-7 days, and amounts over $500 need manager sign-off."
    )
    assert found.said == [
        "Cancel in Settings",
        "Refunds post in 5-7 days",
        "Amounts over $500 need manager sign-off.",
    ]
    assert found.asked == [None, None, None]


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        # a clause that starts with its verb stays with its subject's claim, as written
        (
            "The plan costs $10 a month, and can be cancelled at any time.",
            ["The plan costs $10 a month, and can be cancelled at any time."],
        ),
        # a condition stays with what it conditions
        (
            "If you work full time, you get 25 days, and you can carry over five of them.",
            ["If you work full time, you get 25 days", "You can carry over five of them."],
        ),
        # list items are not claims of their own
        (
            "You can pay by credit card, SEPA direct debit, or bank transfer.",
            ["You can pay by credit card, SEPA direct debit, or bank transfer."],
        ),
        # a trailing reason stays with its claim; an opening particle and "but" go
        (
            "Yes, but you must take them by March, because after that they are gone.",
            ["You must take them by March, because after that they are gone."],
        ),
        ("Sorry, we don't take PayPal.", ["Sorry, we don't take PayPal."]),
        (
            "Backups run nightly; restores take about an hour.",
            ["Backups run nightly", "Restores take about an hour."],
        ),
    ],
)
def test_sentences_split_into_claims(sentence: str, expected: list[str]) -> None:
    assert split(sentence) == expected


def test_a_phrase_answer_is_read_after_its_question() -> None:
    """The claim stays as the answer wrote it; the question it is read after travels beside
    it, and only the model's input joins the two."""
    question = "Which magazine was started first, Arthur's Magazine or First for Women?"
    assert claims("Arthur's Magazine.", question) == Claims(["Arthur's Magazine."], [question])
    assert as_read("Arthur's Magazine.", question) == f"{question}\nArthur's Magazine."
    said = "Arthur's Magazine was started in 1844, before First for Women."
    assert claims(said, question) == Claims([said], [None])
    assert claims("Arthur's Magazine.") == Claims(["Arthur's Magazine."], [None])
    with pytest.raises(ValueError, match="per claim"):
        Claims(["One claim."], [])


def test_evasive_sentences_assert_nothing_and_references_back_stay_together() -> None:
    assert sentences("I'm not sure about that. You could ask HR.") == []
    assert sentences("Passwords expire every 90 days. They must be 12 characters long.") == [
        "Passwords expire every 90 days. They must be 12 characters long."
    ]


def test_a_phrase_is_read_after_the_turn_asked_whatever_the_question_holds() -> None:
    question = "[conversation so far]\nuser: Hi\nuser: Which payment methods do you accept?"
    found = claims("Cards and PayPal.", question)
    assert found == Claims(["Cards and PayPal."], ["user: Which payment methods do you accept?"])
    # a short part cut from a longer sentence is a claim of its own, not a phrase answer
    assert claims("Cancel in Settings, and refunds post in 5-7 days.", question).asked == [
        None,
        None,
    ]


# --- the probes of issue 41: what a reviewer reading the claims would object to


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        # a noun the verb list also holds ("returns") is a subject, not a verb: no invented
        # "The plan returns are free."
        (
            "The plan costs $20 per month, shipping takes 5 days, and returns are free.",
            ["The plan costs $20 per month", "Shipping takes 5 days", "Returns are free."],
        ),
        # the second clause keeps its own subject ("glucagon"), not the first one's
        (
            "Insulin, made by beta cells, brings blood sugar down, and glucagon, from alpha "
            "cells, raises it again via the liver.",
            [
                "Insulin, made by beta cells, brings blood sugar down",
                "Glucagon, from alpha cells, raises it again via the liver.",
            ],
        ),
        # fragments are not claims: a relative "whichever ...", a list after a colon
        (
            "Coverage lasts 12 months or 12,000 miles, whichever comes sooner.",
            ["Coverage lasts 12 months or 12,000 miles, whichever comes sooner."],
        ),
        (
            "You need two things: a visa and two photos.",
            ["You need two things: a visa and two photos."],
        ),
    ],
)
def test_claims_are_spans_of_the_answer_never_invented(sentence: str, expected: list[str]) -> None:
    found = split(sentence)
    assert found == expected
    for claim in found:  # each claim is the answer's own words, in its order
        assert claim[1:].rstrip(".") in sentence


def test_a_dash_in_the_answer_is_not_the_phrase_marker() -> None:
    question = "How much is the Pro plan?"
    said = "The Pro plan — our most popular — costs $20 a month."
    assert claims(said, question) == Claims([said], [None])
    # nor is a line break an answer writes: sentences are cut there, and no claim holds one
    assert all(PHRASE_JOIN not in c for c in claims("Cards.\nPayPal too.", question).said)


def test_a_text_without_claims_is_read_whole_and_a_blank_one_not_at_all() -> None:
    passwords = "Passwords expire every 90 days."
    assert claims_or_text(passwords) == Claims([passwords], [None])
    assert claims_or_text("I'm not sure.") == Claims(["I'm not sure."], [None])
    assert claims_or_text("  ") == Claims([], [])
