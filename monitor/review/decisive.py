"""Which words of a judge's reason decided a verdict, and where they stand in the claim. Pure.

A reason is plain text from the judge. The local judge names the words that decided in
single quotes (``'manager', 'sign-off' are in no context``) and quotes context excerpts
in curly double quotes (``closest: “Refunds are issued…”``); an LLM judge writes free
text. The decisive terms are the single-quoted spans, and the numbers of the reason that
the claim also states (outside excerpts and quotes: a number the context holds is
evidence, not what was decided). `mark` escapes every character and wraps the places of the terms in
``<mark>``: a term is found in the raw text, never in its escaped HTML.

See docs/review.md, "The review page".
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Sequence

#: a span in single quotes (straight or curly), not an apostrophe inside a word
_QUOTED = re.compile(r"(?<!\w)'([^'\n]{1,80}?)'(?!\w)|‘([^’\n]{1,80}?)’")
#: a context excerpt the reason quotes
_EXCERPT = re.compile(r"“[^”]*”?")
#: a number as written in text: 25, 1,500, 0.12, 14
_NUMBER = re.compile(r"(?<![\w.,])\d+(?:[.,]\d+)*(?![\w]|[.,]\d)")


def terms(reason: str, claim: str) -> list[str]:
    """The reason's decisive terms: its quoted spans, then its numbers the claim states."""
    found: list[str] = []
    for match in _QUOTED.finditer(reason):
        term = (match.group(1) or match.group(2) or "").strip()
        if term and term not in found:
            found.append(term)
    outside = _QUOTED.sub(" ", _EXCERPT.sub(" ", reason))
    stated = {m.group(0) for m in _NUMBER.finditer(claim)}
    for match in _NUMBER.finditer(outside):
        number = match.group(0)
        if number in stated and number not in found:
            found.append(number)
    return found


def places(text: str, wanted: Iterable[str]) -> list[tuple[int, int]]:
    """Where each term occurs in ``text`` as a whole word or phrase, case-insensitively;
    sorted, overlaps merged."""
    spans: list[tuple[int, int]] = []
    for term in wanted:
        left = r"(?<!\w)" if term[:1].isalnum() else ""
        right = r"(?!\w)" if term[-1:].isalnum() else ""
        pattern = re.compile(left + re.escape(term) + right, re.IGNORECASE)
        spans.extend((m.start(), m.end()) for m in pattern.finditer(text))
    merged: list[tuple[int, int]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def mark(text: str, spans: Sequence[tuple[int, int]], css: str = "decisive") -> str:
    """``text`` HTML-escaped, each span wrapped in ``<mark class="{css}">``."""
    out: list[str] = []
    cursor = 0
    for start, end in spans:
        out.append(html.escape(text[cursor:start]))
        out.append(f'<mark class="{css}">{html.escape(text[start:end])}</mark>')
        cursor = end
    out.append(html.escape(text[cursor:]))
    return "".join(out)


def quoted_places(reason: str, wanted: Iterable[str]) -> list[tuple[int, int]]:
    """Where the terms stand in the reason: each quoted span whole (quotes included), and
    the numbers outside excerpts."""
    wanted = list(wanted)
    spans = [
        (m.start(), m.end())
        for m in _QUOTED.finditer(reason)
        if (m.group(1) or m.group(2) or "").strip() in wanted
    ]
    excerpts = [(m.start(), m.end()) for m in _EXCERPT.finditer(reason)]
    numbers = [t for t in wanted if _NUMBER.fullmatch(t)]
    for start, end in places(reason, numbers):
        inside = any(a <= start < b for a, b in excerpts + spans)
        if not inside:
            spans.append((start, end))
    return sorted(spans)
