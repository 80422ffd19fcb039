"""The rule judge's statements step: which sentences of an answer assert something.

See docs/local-judge.md, "The steps".
"""

from __future__ import annotations

import re

from monitor.text.evasive import asserts, declines
from monitor.text.sentences import sentences, words

#: A statement of at most this many words is a phrase that answers the question.
PHRASE_WORDS = 4

#: A sentence that starts by referring to the one before it.
_REFERS_BACK = re.compile(r"(?:They|It|This|That|These|Those|Its|Their)\b")


def statements(text: str) -> list[str]:
    """The sentences of ``text`` that assert something (see the module docstring)."""
    found = sentences(text)
    response_declines = any(declines(s) for s in found)
    kept: list[str] = []
    for s in found:
        if not asserts(s, response_declines=response_declines):
            continue
        # a sentence that goes on about the last one ("They expire on 30 June.") is not
        # standalone: it is one statement with the sentence it refers to
        if kept and _REFERS_BACK.match(s):
            kept[-1] = f"{kept[-1]} {s}"
        else:
            kept.append(s)
    return kept


def standalone(found: list[str], question: str | None) -> list[str]:
    """``found``, each phrase-only statement read after ``question`` (see the module docstring)."""
    if not question or not question.strip():
        return found
    return [f"{question.strip()} {s}" if len(words(s)) <= PHRASE_WORDS else s for s in found]
