"""The rule-made negatives change the one specific they claim, and nothing else."""

from __future__ import annotations

import random

import pytest

from bench import edits
from monitor.text.numerals import numbers
from monitor.text.sentences import words

CONTEXTS = (
    "Employees may carry over up to 5 unused days into the next year. "
    "Requests go to Priya Shah in Payroll, or to Daniel Ortiz when she is away.",
    "The office closes on 24 December and opens on 2 January.",
)
STATEMENT = "You can carry over 5 days, and Priya Shah handles the requests."


def _differing_words(a: str, b: str) -> tuple[list[str], list[str]]:
    wa, wb = words(a), words(b)
    return [w for w in wa if w not in wb], [w for w in wb if w not in wa]


@pytest.mark.parametrize("seed", range(20))
def test_a_number_edit_changes_one_number_only(seed: int) -> None:
    edit = edits.change_number(STATEMENT, CONTEXTS, random.Random(seed))
    assert edit is not None and edit.kind == "number"
    before = {v for n in numbers(STATEMENT) for v in n.values}
    after = {v for n in numbers(edit.edited) for v in n.values}
    assert before != after
    assert edit.edited.replace(edit.after, edit.before, 1) == STATEMENT
    gone, added = _differing_words(STATEMENT, edit.edited)
    assert gone == [edit.before] and added == [edit.after]


@pytest.mark.parametrize("seed", range(20))
def test_a_name_edit_swaps_in_another_name_of_the_contexts(seed: int) -> None:
    edit = edits.change_name(STATEMENT, CONTEXTS, random.Random(seed))
    assert edit is not None and edit.kind == "name"
    assert edit.before in STATEMENT and edit.before not in edit.edited
    assert edit.after != edit.before and any(edit.after in c for c in CONTEXTS)
    assert edit.edited.replace(edit.after, edit.before, 1) == STATEMENT


def test_a_negation_edit_adds_or_removes_not() -> None:
    rng = random.Random(1)
    added = edits.change_negation("Carried-over days must be taken by 31 March.", rng)
    assert added is not None
    assert added.edited == "Carried-over days must not be taken by 31 March."
    removed = edits.change_negation("Unused budget does not roll over.", rng)
    assert removed is not None
    assert removed.edited == "Unused budget does roll over."


def test_no_edit_where_there_is_nothing_to_change() -> None:
    rng = random.Random(0)
    assert edits.change_number("Requests go to payroll.", CONTEXTS, rng) is None
    assert edits.change_name("requests go to payroll.", CONTEXTS, rng) is None
    assert edits.change_name("Ask Priya Shah.", ("Ask Priya Shah.",), rng) is None
