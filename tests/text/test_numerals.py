"""Numbers as written, compared by value (`monitor.text.numerals`)."""

import pytest

from monitor.text.numerals import located_numbers, numbers


@pytest.mark.parametrize("written", ["$300,000", "300000", "0.3 million dollars"])
def test_one_amount_written_three_ways_has_one_value(written: str) -> None:
    [number] = numbers(written)
    assert number.values == {300000.0}


@pytest.mark.parametrize(
    ("text", "surface", "kind"),
    [("costs $5", "$5", "amount"), ("up 3%", "3%", "percentage"), ("in 2024", "2024", "year"),
     ("on March 3", "3", "date"), ("3 days", "3", "number")],
)  # fmt: skip
def test_each_number_has_its_kind(text: str, surface: str, kind: str) -> None:
    assert [(n.surface, n.kind) for n in numbers(text)] == [(surface, kind)]


def test_afternoon_hours_and_spelled_numbers() -> None:
    assert [n.values for n in numbers("at 2 p.m.")] == [{2.0, 14.0}]
    assert [n.values for n in numbers("twelve days")] == [{12.0}]
    # "one" is a number only before a unit; a numeral inside an identifier is none
    assert [n.values for n in numbers("a probation of one month")] == [{1.0}]
    assert numbers("the one you use") == [] and numbers("an A4 sheet") == []


def test_located_numbers_end_where_the_number_ends() -> None:
    text = "It costs $5 and takes twelve days"
    located = located_numbers(text)
    assert sorted((n.surface, text[:end]) for n, end in located) == [
        ("$5", "It costs $5"),
        ("twelve", "It costs $5 and takes twelve"),
    ]
    assert [n.surface for n, _ in located_numbers(text, spelled=False)] == ["$5"]


def test_a_run_of_spelled_number_words_is_one_number() -> None:
    [amount] = numbers("three hundred dollars")
    assert amount.surface == "three hundred" and amount.values == {300.0}
    assert [n.values for n in numbers("one hundred and five people")] == [{105.0}]
    # two numbers joined by "and" stay two; words that are no one number stay words
    assert [n.values for n in numbers("between twenty-five and thirty days")] == [{25.0}, {30.0}]
    assert [n.values for n in numbers("two three")] == [{2.0}, {3.0}]
