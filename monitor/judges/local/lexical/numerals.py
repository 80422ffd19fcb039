"""Numbers as written: amounts, percentages, years, dates and counts, compared by value.

``$300,000`` = ``300000`` = ``0.3 million``; "2 p.m." is also 14; a range
("6 to 11 years") holds every value in it. A `Quantity` is a number with the
words right after it, its unit ("3 days" is not "3 times").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from itertools import chain, takewhile

from monitor.judges.local.lexical.wordforms import fold, is_content, stem, words

#: Spelled numbers taken as values ("one" is left out: it is mostly a pronoun).
NUMBER_WORDS = {
    w: float(i)
    for i, w in enumerate(
        "zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
    if w != "_"
} | {
    "thirty": 30.0,
    "forty": 40.0,
    "fifty": 50.0,
    "sixty": 60.0,
    "seventy": 70.0,
    "eighty": 80.0,
    "ninety": 90.0,
    "hundred": 100.0,
    "dozen": 12.0,
    "twice": 2.0,
    "double": 2.0,
    "triple": 3.0,
}

#: (the lookahead on the first letters only lets the scan skip quickly: same matches)
_NUMBER_WORDS_RE = re.compile(
    r"\b(?=["
    + "".join(sorted({w[0] for w in NUMBER_WORDS}))
    + r"])(?:"
    + "|".join(NUMBER_WORDS)
    + r")\b",
    re.IGNORECASE,
)
#: "one" as a number: only before a unit of time or count ("one month", "one-year"); elsewhere
#: it is mostly a pronoun ("the one you use")
_ONE_UNIT = re.compile(
    r"\bone(?=[\s-]+(?:business\s+|working\s+|calendar\s+|full\s+)?(?:second|minute|hour|day|"
    r"night|week|month|quarter|year|time|user|seat|device|licen[cs]e|account)s?\b)",
    re.IGNORECASE,
)
DIGIT = re.compile(r"\d")
_PM = re.compile(r"\s?p\.?\s?m\b\.?", re.IGNORECASE)
#: A range of whole numbers ("6 to 11 years", "weeks 3–5", "between 2 and 4"): every value
#: in it is in the text
_RANGE = re.compile(r"(?<![\d.,])(\d{1,3})\s?(?:–|-|to|and)\s?(\d{1,3})(?![\d.,:])")
_SPELLED = "two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty"
_RANGE_WORDS = re.compile(rf"\b({_SPELLED})\s?(?:–|-|to|and)\s?({_SPELLED})\b", re.IGNORECASE)


MONTHS = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)

_SCALES = {
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "m": 1e6,
    "mn": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "trillion": 1e12,
}

_CURRENCY = r"(?:US\$|USD|EUR|GBP|[$€£¥₹])"
#: (the lookahead holds every first character of a match: it only makes the scan faster)
NUMBER_RE = re.compile(
    r"(?=[\sUEG$€£¥₹\d])"
    rf"(?P<cur>{_CURRENCY})?\s?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<suffix>st|nd|rd|th|s)?"
    r"(?:\s?(?P<pct>%|percent\b|per cent\b))?"
    r"(?:\s?(?P<scale>thousand|million|billion|trillion|mn|bn|[kKmMbB])\b)?"
)


@dataclass(frozen=True)
class Number:
    """A number as written, its kind for reasons, and the values it may stand for."""

    surface: str
    kind: str  # amount | percentage | year | date | number
    values: frozenset[float]


def numbers(text: str) -> list[Number]:
    """Numbers in ``text``: amounts, percentages, years, other figures (ordinals as numbers)."""
    return [number for number, _ in located_numbers(text)]


def located_numbers(text: str, *, spelled: bool = True) -> list[tuple[Number, int]]:
    """`numbers` with the end offset of each in ``text`` (numerals only unless ``spelled``)."""
    return list(_scan_numbers(text, spelled))


@lru_cache(maxsize=8192)
def _scan_numbers(text: str, spelled: bool) -> tuple[tuple[Number, int], ...]:
    """`located_numbers`, once per text (the verify step reads a clause's numbers several times)."""
    return tuple(_find_numbers(text, spelled=spelled))


def _find_numbers(text: str, *, spelled: bool = True) -> list[tuple[Number, int]]:
    found: list[tuple[Number, int]] = []
    for m in _NUMBER_WORDS_RE.finditer(text) if spelled else ():
        # IGNORECASE also matches Unicode case variants ("ſix"): not number words
        value = NUMBER_WORDS.get(m.group(0).lower())
        if value is not None:
            found.append((Number(m.group(0), "number", frozenset({value})), m.end()))
    for m in _ONE_UNIT.finditer(text) if spelled else ():
        found.append((Number(m.group(0), "number", frozenset({1.0})), m.end()))
    if not DIGIT.search(text):
        return found
    for m in NUMBER_RE.finditer(text):
        start = m.start("num")
        if start > 0 and (text[start - 1].isalpha() or text[start - 1] in "_"):
            continue  # part of an identifier like "A4", "B52"
        raw = m.group("num").replace(",", "")
        try:
            value = float(raw)
        except ValueError:  # pragma: no cover - the regex only matches numerals
            continue
        values = {value}
        if 1 <= value <= 11 and _PM.match(text, m.end()):
            values.add(value + 12)  # "2 p.m." is 14:00
        scale_word = (m.group("scale") or "").lower()
        if scale_word and (
            scale_word in {"thousand", "million", "billion", "trillion"} or m.group("cur")
        ):
            values = {value * _SCALES[scale_word]}
        if m.group("cur"):
            kind = "amount"
        elif m.group("pct"):
            kind = "percentage"
        elif 1000 <= value <= 2100 and raw.isdigit() and len(raw) == 4:
            kind = "year"
        elif _near_month(text, m.start(), m.end()):
            kind = "date"
        else:
            kind = "number"
        found.append((Number(m.group(0).strip(), kind, frozenset(values)), m.end()))
    return found


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


def _near_month(text: str, start: int, end: int) -> bool:
    before = text[max(0, start - 12) : start].lower().split()
    after = text[end : end + 12].lower().split()
    near = (before[-1:] if before else []) + (after[:1] if after else [])
    return any(w.strip(".,") in MONTHS for w in near)


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
            int(m.group(k)) if m.group(k).isdigit() else int(NUMBER_WORDS[m.group(k).lower()])
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
