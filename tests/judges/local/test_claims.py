"""The local judge's statements step: an answer as its atomic claims."""

from __future__ import annotations

import pytest

from monitor.judges.local.claims import claims, phrase, split, statements


def test_the_worked_example_is_three_claims() -> None:
    assert claims(
        "Cancel in Settings, refunds post in 5-7 days, and amounts over $500 need manager sign-off."
    ) == [
        "Cancel in Settings",
        "Refunds post in 5-7 days",
        "Amounts over $500 need manager sign-off.",
    ]


@pytest.mark.parametrize(
    ("sentence", "expected"),
    [
        # a clause that starts with its verb gets the first claim's subject
        (
            "The plan costs $10 a month, and can be cancelled at any time.",
            ["The plan costs $10 a month", "The plan can be cancelled at any time."],
        ),
        # a condition stays with what it conditions
        (
            "If you work full time, you get 25 days, and you can carry over five of them.",
            ["If you work full time, you get 25 days", "You can carry over five of them."],
        ),
        # list items are not claims of their own
        (
            "You can pay by credit card, SEPA direct debit, or bank transfer.",
            ["You can pay by credit card, SEPA direct debit, bank transfer."],
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
    question = "Which magazine was started first, Arthur's Magazine or First for Women?"
    assert claims("Arthur's Magazine.", question) == [f"{question} — Arthur's Magazine."]
    said = "Arthur's Magazine was started in 1844, before First for Women."
    assert claims(said, question) == [said]
    assert claims("Arthur's Magazine.") == ["Arthur's Magazine."]


def test_evasive_sentences_assert_nothing_and_references_back_stay_together() -> None:
    assert statements("I'm not sure about that. You could ask HR.") == []
    assert statements("Passwords expire every 90 days. They must be 12 characters long.") == [
        "Passwords expire every 90 days. They must be 12 characters long."
    ]


def test_a_phrase_is_found_again_whatever_the_question_holds() -> None:
    question = "Which payment methods do you accept? I couldn't find it on the wiki."
    [claim] = claims("Cards and PayPal.", question)
    assert phrase(claim) == ("Cards and PayPal.", True)
    assert phrase("Refunds post in 5-7 days") == ("Refunds post in 5-7 days", False)
