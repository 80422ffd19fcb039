"""Quantities (a number with its unit: "3 days" is not "3 times") and ranges of whole numbers.

The numbers come from `monitor.text.numerals`; see docs/model.md.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import chain, takewhile

from monitor.judges.local.lexical.wordforms import fold, is_content, stem
from monitor.text.numerals import CARDINAL_WORDS, Number, located_numbers
from monitor.text.sentences import words

#: A range of whole numbers ("6 to 11 years", "weeks 3–5", "between 2 and 4"): every value
#: in it is in the text
_RANGE = re.compile(r"(?<![\d.,])(\d{1,3})\s?(?:–|-|to|and)\s?(\d{1,3})(?![\d.,:])")
#: The spelled whole numbers from two to thirty, as a regex alternation (ranges, lists)
SPELLED_SMALL = "|".join(w for w, value in CARDINAL_WORDS.items() if 2 <= value <= 30)
_RANGE_WORDS = re.compile(
    rf"\b({SPELLED_SMALL})\s?(?:–|-|to|and)\s?({SPELLED_SMALL})\b", re.IGNORECASE
)


@dataclass(frozen=True)
class Quantity:
    """A number with the stems of the content words right after it (its unit)."""

    number: Number
    units: tuple[str, ...]
    #: the number and its first unit word as written ("3 days")
    surface: str


def quantities(text: str, reach: int = 2, *, spelled: bool = True) -> list[Quantity]:
    """Numbers with the stems of the (up to ``reach``) content words right after them.

    Only words that follow the number directly count (``5 business days``; not
    ``10% for each``).

    ``retried 3 times over 7 days`` → 3 (``time``), 7 (``day``). The verify step
    uses them to tell ``3 days`` from ``14 days`` in a context that also says
    ``3 times``. ``spelled=False`` skips number words: for a text known to have none.
    """
    out: list[Quantity] = []
    for number, end in located_numbers(text, spelled=spelled):
        after = list(takewhile(lambda w: is_content(fold(w)), words(text[end : end + 40])[:reach]))
        units = tuple(stem(fold(w)) for w in after)
        surface = f"{number.surface} {after[0]}" if after else number.surface
        out.append(Quantity(number, units, surface))
    return out


def ranges(text: str, *, spelled: bool = True) -> tuple[set[float], set[tuple[float, str]]]:
    """The values of the ranges of whole numbers in ``text`` (`_RANGE`; spelled ones too
    unless ``spelled`` is false), and (value, stem of the word after the range) of each:
    "6 to 11 years" gives 6.0 … 11.0, and (6.0, "year") … (11.0, "year")."""
    spanned: set[float] = set()
    spanned_units: set[tuple[float, str]] = set()
    ranged = "-" in text or "–" in text or " to " in text or " and " in text
    for m in chain(
        _RANGE.finditer(text) if ranged else (),
        _RANGE_WORDS.finditer(text) if ranged and spelled else (),
    ):
        low, high = (
            int(m.group(k)) if m.group(k).isdigit() else int(CARDINAL_WORDS[m.group(k).lower()])
            for k in (1, 2)
        )
        if low < high <= low + 50:
            values = [float(v) for v in range(low, high + 1)]
            spanned.update(values)
            # the unit after the range's end counts each value ("6 to 11 years")
            after = [
                stem(fold(w))
                for w in words(text[m.end() : m.end() + 20])[:1]
                if is_content(fold(w))
            ]
            spanned_units.update((v, u) for v in values for u in after)
    return spanned, spanned_units
