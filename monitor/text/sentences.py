"""How text divides: into sentences, a sentence into clauses, a clause into words.

`sentences` splits with nupunkt (a dependency) and splits long
compound sentences at semicolons; `clauses` splits a compound statement where
each part can be checked on its own; `strip_particle` sets a leading answer
particle ("Yes, ...") aside; `words` finds the word tokens as written.
"""

from __future__ import annotations

import re

import nupunkt

#: A word as written: letters (with inner apostrophes), or a run of digits.
WORD_RE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*|\d+", re.UNICODE)

#: A leading answer particle: "No, SMS codes are not allowed." claims what follows it.
_PARTICLE = re.compile(
    r"^\s*(?:yes|yeah|yep|no|nope|sure|okay|ok)\s*[,:;.!\u2013\u2014-]+\s*", re.IGNORECASE
)
#: Clause boundaries: a semicolon, a comma before a conjunction, "and" before a subject pronoun.
_CLAUSE = re.compile(
    r"\s*;\s*"
    r"|,\s+(?:and|but|so|while|whereas|or|once|when|after|before|if|unless|because)\s+"
    r"|\s+and\s+(?=(?:it|they|you|he|she|we|this|these|there)\b)",
    re.I,
)


def words(text: str) -> list[str]:
    """Word tokens of ``text`` as written (letters, or digit runs)."""
    return WORD_RE.findall(text)


def strip_particle(statement: str) -> str:
    """``statement`` without a leading answer particle ("Yes, ...", "No: ...")."""
    return _PARTICLE.sub("", statement, count=1)


def clauses(statement: str) -> list[str]:
    """The clauses of a compound statement, each checked on its own."""
    return [c for c in _CLAUSE.split(statement) if c.strip()]


def sentences(text: str, *, long_clause: int = 25) -> list[str]:
    """Sentences of ``text`` (nupunkt), long compound sentences also split at ``;``.

    A sentence of more than ``long_clause`` words is split at semicolons when
    every part keeps at least three words.
    """
    out: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        for sentence in _punkt(line):
            parts = [p.strip() for p in sentence.split(";")]
            if (
                len(parts) > 1
                and len(words(sentence)) > long_clause
                and all(len(words(p)) >= 3 for p in parts)
            ):
                out.extend(parts)
            elif sentence.strip():
                out.append(sentence.strip())
    return out


def _punkt(text: str) -> list[str]:
    return [s if isinstance(s, str) else s[0] for s in nupunkt.sent_tokenize(text)]
