"""The rule both judges share for answers that only decline (`monitor.text.evasive`)."""

import pytest

from monitor.text.evasive import noncommittal


@pytest.mark.parametrize(
    "answer",
    [
        "I don't know.",
        "I'm not sure about that. I'd suggest checking with HR.",
        "Sorry, it depends on your contract, so please ask your account manager.",
        "I'd really recommend checking with a pharmacist.",
        "I'm not able to give medical advice here. Please contact your doctor.",
    ],
)
def test_answers_that_only_decline_or_defer_are_noncommittal(answer: str) -> None:
    assert noncommittal(answer)


@pytest.mark.parametrize(
    "answer",
    [
        "Ask your manager for approval.",  # an instruction, not a deferral
        "I'm not sure, but the limit is 5 days.",  # a number always asserts
        "It depends on the plan: annual plans are refunded in full within 30 days.",
        "Receipts are needed for expenses over $100. Please contact finance with questions.",
        "",
    ],
)
def test_answers_that_assert_something_are_not(answer: str) -> None:
    assert not noncommittal(answer)
