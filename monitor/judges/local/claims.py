"""The local judge's statements step: an answer as the atomic claims it makes.

An answer is first cut into the sentences that assert something (an evasive
sentence asserts nothing; a sentence that starts by referring back, "They
expire in June.", stays with the one before it). Each sentence is then cut into
claims where it joins clauses or list items: at semicolons, at a colon before a
clause, at commas, and at "and", "but", "then", "so", "while", "or" after a
comma ("Cancel in Settings, refunds post in 5-7 days, and amounts over $500
need manager sign-off" → three claims). A part that cannot stand alone is not
cut off: a condition ("If you work full time, ...") stays with what it
conditions, a part of fewer than `MIN_WORDS` words stays with its neighbour,
and a part that starts with its verb ("..., and must be taken by March") gets
the subject of the sentence's first claim. A claim of at most `PHRASE_WORDS`
words (a phrase that answers the question) is one claim, read after the question (its
last line: a question that carries the conversation before it ends with the turn asked).
See docs/local-judge.md, "The steps".
"""

from __future__ import annotations

import re

from monitor.text.evasive import asserts, declines
from monitor.text.sentences import sentences, strip_particle, words

#: A claim of at most this many words is a phrase that answers the question.
PHRASE_WORDS = 4
#: What joins a phrase answer to the question it is read after ("Which plan has SSO? —
#: Enterprise."): `phrase` finds the phrase again by it.
PHRASE_JOIN = " — "
#: A part of fewer words than this is not a claim of its own ...
MIN_WORDS = 3
#: ... nor is a part of fewer words than this without a verb (a list item)
CLAUSE_WORDS = 5
#: A first claim without a verb of this many words at most is a subject for the next part.
SUBJECT_WORDS = 8

#: A sentence that starts by referring to the one before it.
_REFERS_BACK = re.compile(r"(?:They|It|This|That|These|Those|Its|Their)\b")
#: Where a sentence joins two claims.
_CUT = re.compile(
    r"\s*;\s*"
    r"|:\s+(?=\S+\s+\S+\s+\S+)"
    r"|,\s+(?:and\s+then|and\s+also|and|but|then|so|while|whereas|or|plus|although|though)\s+"
    r"|,\s+"
    r"|\s+(?:but|whereas|and\s+then)\s+",
    re.IGNORECASE,
)
#: A part that conditions or frames the next one: it is not cut off from it.
_CONDITION = re.compile(
    r"^(?:if|when|whenever|unless|once|after|before|as\s+long\s+as|provided|while|since|"
    r"although|though|because|for\s+example|for\s+instance|in\s+that\s+case|however|also|"
    r"otherwise|then|so|in\s+\w+|on\s+\w+|at\s+\w+|by\s+\w+|for\s+\w+|with\s+\w+|from\s+\w+|"
    r"after\s+\w+|to\s+\w+|as\s+\w+)\b",
    re.IGNORECASE,
)
#: A part that qualifies the one before it ("..., including ...", "..., made by ...", "...,
#: because ...", "..., in about a week"): not a claim of its own after the first part.
_MODIFIER = re.compile(
    r"^(?:including|like|such\s+as|especially|e\.g\.|i\.e\.|which|who|whose|where|with|"
    r"without|plus|from|via|per|as|in|on|at|by|for|to|of|than|after|before|until|within|"
    r"during|because|unless|if|when|once|provided|although|though|except|"
    r"(?!\w*thing\b)[a-z]{2,}ing|[a-z]{2,}ed)\b"
)
#: A conjunction that opens a sentence ("But only five of them").
_LEAD = re.compile(r"^(?:but|and|so|also|then)\s+", re.IGNORECASE)
#: A part that starts with its verb: it shares the subject of the sentence's first claim.
_VERB_FIRST = re.compile(
    r"^(?:is|are|was|were|can|cannot|can't|may|must|will|won't|should|shall|would|could|has|"
    r"have|had|does|do|doesn't|don't|isn't|aren't|needs?|gets?|takes?|costs?|includes?|"
    r"requires?|covers?|offers?|allows?|lasts?|runs?|comes?|goes?|expires?|applies|apply|"
    r"brings?|lets?|makes?|helps?|gives?|means?|pays?|sends?|keeps?|stays?|works?|holds?|"
    r"shows?|lowers?|raises?|returns?|stops?|starts?|ends?|opens?|closes?|depends?)\b",
    re.IGNORECASE,
)
#: The subject of a claim: its words before its first verb of `_VERB_FIRST`.
_SUBJECT_END = re.compile(r"\s+(?=" + _VERB_FIRST.pattern[1:] + ")", re.IGNORECASE)


def asked(question: str) -> str:
    """What a phrase answer answers: the question's last line with text (a question that
    carries the conversation before it ends with the turn being answered)."""
    lines = [line.strip() for line in question.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def claims(text: str, question: str | None = None) -> list[str]:
    """The atomic claims ``text`` makes (see the module docstring)."""
    found = []
    current = asked(question or "")
    for s in statements(text):
        if current and len(words(s)) <= PHRASE_WORDS:
            found.append(f"{current}{PHRASE_JOIN}{s}")  # one claim, as asked
        else:
            found.extend(split(s))
    return found


def phrase(claim: str) -> tuple[str, bool]:
    """What ``claim`` itself says, without the question a phrase answer is read after
    (those words are given, not claimed), and whether it was such a phrase."""
    if PHRASE_JOIN not in claim:
        return claim, False
    said = claim.rsplit(PHRASE_JOIN, 1)[1]
    return (said, True) if len(words(said)) <= PHRASE_WORDS else (claim, False)


def statements(text: str) -> list[str]:
    """The sentences of ``text`` that assert something, each with the sentences that refer
    back to it."""
    found = sentences(text)
    response_declines = any(declines(s) for s in found)
    kept: list[str] = []
    for s in found:
        if not asserts(s, response_declines=response_declines):
            continue
        if kept and _REFERS_BACK.match(s):
            kept[-1] = f"{kept[-1]} {s}"
        else:
            kept.append(s)
    return kept


def split(sentence: str) -> list[str]:
    """The claims of one sentence (see the module docstring)."""
    sentence = _LEAD.sub("", strip_particle(sentence)).strip()
    parts = [p.strip(" ,;:") for p in _CUT.split(sentence) if p and p.strip(" ,;:")]
    merged: list[str] = []
    pending = ""  # a condition waiting for what it conditions
    for k, part in enumerate(parts):
        last = k == len(parts) - 1
        if pending:
            merged.append(f"{pending}, {part}")
            pending = ""
        elif merged and _MODIFIER.match(part):
            merged[-1] = f"{merged[-1]}, {part}"  # "..., because that is the rule"
        elif _CONDITION.match(part) and not last:
            pending = part
        elif merged and _fragment(part):
            merged[-1] = f"{merged[-1]}, {part}"
        else:
            merged.append(part)
    if pending:
        merged.append(pending)
    if len(merged) > 1 and len(words(merged[0])) < MIN_WORDS:
        merged[:2] = [f"{merged[0]}, {merged[1]}"]  # "Sorry, we don't take PayPal"
    if len(merged) > 1 and not _SUBJECT_END.search(merged[0]) and _VERB_FIRST.match(merged[1]):
        merged[:2] = [f"{merged[0]}, {merged[1]}"]  # "Insulin, made by beta cells, lowers ..."
    subject = _subject(merged[0]) if merged else ""
    out = []
    for k, part in enumerate(merged):
        if k and subject and _VERB_FIRST.match(part):
            part = f"{subject} {part}"
        out.append(_sentence_case(part))
    return out or ([sentence] if sentence else [])


def _fragment(part: str) -> bool:
    """``part`` is a list item, not a clause: too short, or short without a verb."""
    said = words(part)
    if len(said) < MIN_WORDS:
        return True
    return len(said) < CLAUSE_WORDS and not any(
        _VERB_FIRST.fullmatch(w) or w.lower().endswith("ed") for w in said
    )


def _subject(claim: str) -> str:
    """The words of ``claim`` before its first verb, when it has one after a subject; a short
    claim without such a verb is all subject ("Insulin, made by the beta cells")."""
    m = _SUBJECT_END.search(claim)
    if not m:
        return claim if len(words(claim)) <= SUBJECT_WORDS else ""
    return claim[: m.start()].strip(" ,") if m.start() else ""


def _sentence_case(claim: str) -> str:
    claim = claim.strip().rstrip(",;:")
    return claim[:1].upper() + claim[1:] if claim[:1].islower() else claim
