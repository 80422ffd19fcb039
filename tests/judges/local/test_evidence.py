"""Lexical evidence: the words, numbers and names of a claim that no context states."""

from __future__ import annotations

from monitor.judges.local.evidence import Evidence, content, durations, names, stem

REFUNDS = (
    "Cancel your subscription in Settings. Refunds are issued to the original card within "
    "5-7 business days."
)


def test_forms_of_one_word_meet() -> None:
    assert stem("refunds") == stem("refunded") == stem("refunding") == stem("refund")
    assert content("The refund is on your card.") == ["refund", "card"]


def test_an_invented_amount_and_words_are_gaps() -> None:
    gaps = Evidence.of([REFUNDS]).gaps("Amounts over $500 need manager sign-off.")
    assert gaps.missing_numbers == ("$500",)
    assert {"manager", "sign", "amounts"} <= set(gaps.missing_words)
    assert gaps.decisive()[0] == "$500"
    assert Evidence.of([REFUNDS]).gaps("Refunds go to the original card.").missing_share == 0.25


def test_numbers_compare_by_value_spelled_or_not() -> None:
    leave = Evidence.of(["Full-time employees are entitled to 25 days of paid annual leave."])
    assert leave.gaps("You get twenty-five paid days off.").missing_numbers == ()
    assert leave.gaps("You get thirty paid days off.").missing_numbers == ("thirty",)


def test_a_rough_duration_inside_a_stated_range_is_said() -> None:
    [week] = durations("in about a week")
    assert week.rough and week.low == week.high == 7.0
    [stated] = durations("within 5-7 business days")
    assert (stated.low, stated.high) == (5.0, 7.0)
    assert week.matches(stated)
    [month] = durations("about a month")
    assert not month.matches(stated)
    gaps = Evidence.of([REFUNDS]).gaps("Your refund posts to your original card in about a week.")
    assert gaps.missing_numbers == () and "week" not in gaps.missing_words


def test_names_are_capitalised_words_inside_a_sentence() -> None:
    assert names("Payments go through PayPal and Stripe. Cards work too.") == ["paypal", "stripe"]
    gaps = Evidence.of(["We accept credit cards. PayPal is not accepted."]).gaps(
        "You can also pay with Klarna."
    )
    assert gaps.missing_names == ("klarna",)


# --- the probes of issue 41


def test_a_spelled_amount_is_the_amount_in_figures() -> None:
    fee = Evidence.of(["The filing fee is $300, paid when you file."])
    gaps = fee.gaps("The filing fee is three hundred dollars.")
    assert gaps.missing_numbers == () and gaps.missing_words == ()
    assert fee.gaps("The filing fee is four hundred dollars.").missing_numbers == ("four hundred",)


def test_the_stemmer_keeps_apart_words_that_only_look_alike() -> None:
    assert stem("news") != stem("new")
    assert stem("cancel") == stem("cancelled") == stem("cancels") == stem("cancelling")
    said = Evidence.of(["The order was cancelled on Monday."])
    assert said.gaps("You can cancel the order.").missing_words == ()
    assert (
        "news"
        in Evidence.of(["A new plan starts in May."]).gaps("The news came in May.").missing_words
    )


def test_a_number_stated_for_another_subject_is_a_gap() -> None:
    plans = Evidence.of(["The Basic plan costs $10 a month. The Pro plan costs $20 a month."])
    assert plans.gaps("The Basic plan costs $20 a month.").missing_numbers == ("$20",)
    assert plans.gaps("The Pro plan costs $20 a month.").missing_numbers == ()
    # a claim that names nothing, and a sentence that points back to the one naming it
    assert plans.gaps("It costs $20 a month.").missing_numbers == ()
    later = Evidence.of(["Pro is our largest plan. It costs $20 a month."])
    assert later.gaps("The Pro plan costs $20 a month.").missing_numbers == ()
