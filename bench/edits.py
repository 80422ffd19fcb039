"""Minimal edits that turn a supported statement into an unsupported one.

Each edit changes exactly one specific and says which (`Edit.kind`): the
statement keeps its style, its length within a word or two, and everything
else it says, so the only difference between the pair is the fact. That is
what a support model must learn; a mix whose two sides differ in style or
length teaches the shortcut instead.

- ``number``: one number replaced by another number of the same contexts
  (or, when they have no other, by a near value: 5 → 7, 30 → 45);
- ``name``: one capitalised name replaced by another name of the contexts;
- ``negation``: "is"/"are"/"can"/"will"/"must"/... followed by "not", or a
  "not" removed;
- ``graft``: the statement set against another group's contexts.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?![\w])")
_NAME = re.compile(r"(?<=\s)[A-Z][a-z]{2,}(?:\s[A-Z][a-z]{2,})*")
_AUXILIARY = re.compile(
    r"\b(is|are|was|were|can|will|must|should|does|do|did|has|have|may)\b(?!\s+not\b)"
)
_NEGATED = re.compile(r"\b(is|are|was|were|can|will|must|should|does|do|did|has|have) not\b")


def _fold(text: str) -> str:
    return text.casefold()


@dataclass(frozen=True)
class Edit:
    kind: str
    original: str
    edited: str
    #: what was replaced, and by what
    before: str
    after: str


def _near(value: str, rng: random.Random) -> str:
    plain = value.replace(",", "")
    if "." in plain:
        return f"{float(plain) * rng.choice((1.5, 2.0, 0.5)):g}"
    n = int(plain)
    if 1900 <= n <= 2100:
        return str(n + rng.choice((-2, -1, 1, 2)))
    bumped = max(n + 1, round(n * rng.choice((1.5, 2, 3)))) if n < 10 else round(n * 1.5)
    return f"{bumped:,}" if "," in value else str(bumped)


def change_number(statement: str, contexts: Sequence[str], rng: random.Random) -> Edit | None:
    found = list(_NUMBER.finditer(statement))
    if not found:
        return None
    target = rng.choice(found)
    others = sorted(
        {m.group() for c in contexts for m in _NUMBER.finditer(c)} - {m.group() for m in found}
    )
    after = rng.choice(others) if others and rng.random() < 0.6 else _near(target.group(), rng)
    if after.replace(",", "") == target.group().replace(",", ""):
        return None
    edited = statement[: target.start()] + after + statement[target.end() :]
    return Edit("number", statement, edited, target.group(), after)


def change_name(statement: str, contexts: Sequence[str], rng: random.Random) -> Edit | None:
    found = list(_NAME.finditer(statement))
    if not found:
        return None
    target = rng.choice(found)
    said = {_fold(m.group()) for m in found}
    others = sorted(
        {m.group() for c in contexts for m in _NAME.finditer(" " + c)} - {m.group() for m in found}
    )
    # another name, not one that holds this one or is part of it ("Ask Priya Shah")
    others = [
        o
        for o in others
        if _fold(o) not in said
        and _fold(target.group()) not in _fold(o)
        and _fold(o) not in _fold(target.group())
    ]
    if not others:
        return None
    after = rng.choice(others)
    edited = statement[: target.start()] + after + statement[target.end() :]
    return Edit("name", statement, edited, target.group(), after)


def change_negation(statement: str, rng: random.Random) -> Edit | None:
    negated = _NEGATED.search(statement)
    if negated:
        edited = statement[: negated.start()] + negated.group(1) + statement[negated.end() :]
        return Edit("negation", statement, edited, negated.group(), negated.group(1))
    found = list(_AUXILIARY.finditer(statement))
    if not found:
        return None
    target = rng.choice(found)
    after = f"{target.group(1)} not"
    edited = statement[: target.start()] + after + statement[target.end() :]
    return Edit("negation", statement, edited, target.group(), after)
