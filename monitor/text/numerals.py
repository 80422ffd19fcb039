"""Numbers as written: amounts, percentages, years, dates and counts, compared by value.

``$300,000`` = ``300000`` = ``0.3 million``; "2 p.m." is also 14; a spelled
number counts ("twelve", "twenty-five", "three hundred dollars" = ``$300``: a run of number
words is read by text2num), and "one" only before a unit ("one month"). Each `Number` has
its kind (amount, percentage, year, date, number) for reasons.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from text_to_num import text2num

#: Spelled cardinals taken as values ("one" is left out: it is mostly a pronoun).
CARDINAL_WORDS = {
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
}
#: Every word taken as a number: the cardinals and a few multiples ("a dozen", "twice").
NUMBER_WORDS = CARDINAL_WORDS | {"dozen": 12.0, "twice": 2.0, "double": 2.0, "triple": 3.0}

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
#: The words of a spelled number that are not numbers alone: "three hundred", "two thousand".
SCALE_WORDS = ("hundred", "thousand", "million", "billion", "trillion")
_CARDINAL = "|".join(
    sorted({*CARDINAL_WORDS, *SCALE_WORDS, "one"} - {"zero"}, key=len, reverse=True)
)
#: A run of spelled number words ("twenty-five", "three hundred and five"): text2num reads it
#: as one number when it is one.
_SPELLED_RUN = re.compile(
    rf"\b(?:{_CARDINAL})(?:(?:\s+and)?[\s-]+(?:{_CARDINAL}))*\b", re.IGNORECASE
)
_AND_PARTS = re.compile(r"\S.*?(?=\s+and\s+|$)")
DIGIT = re.compile(r"\d")
_PM = re.compile(r"\s?p\.?\s?m\b\.?", re.IGNORECASE)


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


#: texts whose numbers are remembered: the rereads happen within one record's steps, so a
#: few records' worth is enough; full, 8,192 short texts held 5.6 MB, which a soak saw as
#: 20 minutes of RSS growth before the cache stopped growing
SCAN_CACHE = 2048


@lru_cache(maxsize=SCAN_CACHE)
def _scan_numbers(text: str, spelled: bool) -> tuple[tuple[Number, int], ...]:
    """`located_numbers`, once per text (the verify step reads a clause's numbers several times)."""
    return tuple(_find_numbers(text, spelled=spelled))


def _find_numbers(text: str, *, spelled: bool = True) -> list[tuple[Number, int]]:
    found: list[tuple[Number, int]] = []
    inside: set[int] = set()
    for m in _SPELLED_RUN.finditer(text) if spelled else ():
        # the run as one number, else each of its parts between "and"s ("between twenty-five
        # and thirty"); what is left is read word by word below
        parts = [(m.start(), m.group(0))]
        if _spelled(m.group(0)) is None:
            parts = [(m.start() + p.start(), p.group(0)) for p in _AND_PARTS.finditer(m.group(0))]
        for start, part in parts:
            value = _spelled(part)
            if value is not None:
                found.append((Number(part, "number", frozenset({value})), start + len(part)))
                inside.update(range(start, start + len(part)))
    for m in _NUMBER_WORDS_RE.finditer(text) if spelled else ():
        if m.start() in inside:
            continue
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


def _spelled(run: str) -> float | None:
    """The value of a run of number words when it is one number ("three hundred and five"),
    None when it is several ("two three") or one word (read by `NUMBER_WORDS`)."""
    if not any(c in run for c in " -"):
        return None
    try:
        return float(text2num(run.lower(), "en"))
    except ValueError:
        return None


def _near_month(text: str, start: int, end: int) -> bool:
    before = text[max(0, start - 12) : start].lower().split()
    after = text[end : end + 12].lower().split()
    near = (before[-1:] if before else []) + (after[:1] if after else [])
    return any(w.strip(".,") in MONTHS for w in near)
