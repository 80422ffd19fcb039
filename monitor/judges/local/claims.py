"""The local judge's statements step: an answer as the atomic claims it makes.

One word each: a *sentence* is what `sentences` keeps of the answer's sentences, a *claim*
is what `claims` cuts them into and what the judge decides the support of.

An answer is first cut into the sentences that assert something (an evasive
sentence asserts nothing; a sentence that starts by referring back, "They
expire in June.", stays with the one before it). Each sentence is then cut into
claims where it joins clauses or list items: at semicolons, at a colon before a
clause, at commas, and at "and", "but", "then", "so", "while", "or" after a
comma ("Cancel in Settings, refunds post in 5-7 days, and amounts over $500
need manager sign-off" → three claims). Every claim is a span of the answer as
written: nothing is added or dropped. A part that cannot stand alone is not cut
off: a condition ("If you work full time, ...") stays with what it conditions, a
part that qualifies the one before it ("..., whichever comes sooner") or starts
with its verb ("..., and must be taken by March") stays with it, a part of fewer
than `MIN_WORDS` words or a list after a colon stays with its neighbour, and a part
without a verb before one that starts with its verb is that verb's subject. A claim
of at most `PHRASE_WORDS` words (a phrase that answers the question) is one claim,
read after the question (its last line: a question that carries the conversation
before it ends with the turn asked): `Claims.asked` says so beside the claim, which
stays as the answer wrote it. See docs/local-judge.md, "The steps".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.text.evasive import asserts, declines
from monitor.text.sentences import sentences as all_sentences
from monitor.text.sentences import strip_particle, words

#: A claim of at most this many words is a phrase that answers the question.
PHRASE_WORDS = 4
#: What the support model reads between the question and a phrase answer read after it
#: ("Which plan has SSO?" and "Enterprise." on the next line: `as_read`). Nothing is ever
#: parsed back out of it: which claim is a phrase answer travels in `Claims.asked`.
PHRASE_JOIN = "\n"
#: A part of fewer words than this is not a claim of its own ...
MIN_WORDS = 3
#: ... nor is a part of fewer words than this without a verb (a list item)
CLAUSE_WORDS = 5

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
    r"whichever|whatever|whoever|wherever|(?!\w*thing\b)[a-z]{2,}ing|[a-z]{2,}ed)\b"
)
#: A conjunction that opens a sentence ("But only five of them").
_LEAD = re.compile(r"^(?:but|and|so|also|then)\s+", re.IGNORECASE)
#: A part that starts with its verb: it stays with the claim whose subject it shares.
_VERB_FIRST = re.compile(
    r"^(?:is|are|was|were|can|cannot|can't|may|must|will|won't|should|shall|would|could|has|"
    r"have|had|does|do|doesn't|don't|isn't|aren't|needs?|gets?|takes?|costs?|includes?|"
    r"requires?|covers?|offers?|allows?|lasts?|runs?|comes?|goes?|expires?|applies|apply|"
    r"brings?|lets?|makes?|helps?|gives?|means?|pays?|sends?|keeps?|stays?|works?|holds?|"
    r"shows?|lowers?|raises?|returns?|stops?|starts?|ends?|opens?|closes?|depends?)\b",
    re.IGNORECASE,
)
#: A first word `_VERB_FIRST` takes for a verb that is a noun: an auxiliary follows it.
_NOUN_THEN_VERB = re.compile(
    r"^[\w'-]+\s+(?:is|are|was|were|can|cannot|can't|may|might|must|will|won't|would|should|"
    r"shall|could|has|have|had|do|does|did|don't|doesn't|didn't|need|needs)\b",
    re.IGNORECASE,
)
#: A part whose first word, ending in -ing, is the subject of the verb after it.
_GERUND_SUBJECT = re.compile(r"^[a-z]{2,}ing\s+(?=" + _VERB_FIRST.pattern[1:] + ")", re.IGNORECASE)
#: The subject of a claim: its words before its first verb of `_VERB_FIRST`.
_SUBJECT_END = re.compile(r"\s+(?=" + _VERB_FIRST.pattern[1:] + ")", re.IGNORECASE)


@dataclass(frozen=True)
class Claims:
    """The claims of one text, each as the text wrote it, and beside each the question it
    is read after: a phrase answer's ("Enterprise." after "Which plan has SSO?"), None for
    a claim read on its own. The two lists are as long as each other."""

    said: list[str]
    asked: list[str | None]

    def __post_init__(self) -> None:
        if len(self.said) != len(self.asked):
            raise ValueError("one asked entry (a question or None) per claim")

    @classmethod
    def of(cls, said: Sequence[str], asked: Sequence[str | None] | None = None) -> Claims:
        """``said``, each claim read after its ``asked`` entry (None: each on its own)."""
        return cls(list(said), [None] * len(said) if asked is None else list(asked))

    def as_read(self) -> list[str]:
        """Each claim as the support model reads it (`as_read`)."""
        return [as_read(c, a) for c, a in zip(self.said, self.asked, strict=True)]


def turn(question: str) -> str:
    """What a phrase answer answers: the question's last line with text (a question that
    carries the conversation before it ends with the turn being answered)."""
    lines = [line.strip() for line in question.splitlines() if line.strip()]
    return lines[-1] if lines else ""


def claims(text: str, question: str | None = None) -> Claims:
    """The atomic claims ``text`` makes (see the module docstring)."""
    said: list[str] = []
    asked: list[str | None] = []
    current = turn(question or "")
    for s in sentences(text):
        if current and len(words(s)) <= PHRASE_WORDS:
            said.append(s)  # one claim, read after the turn it answers
            asked.append(current)
        else:
            parts = split(s)
            said.extend(parts)
            asked.extend([None] * len(parts))
    return Claims(said, asked)


def claims_or_text(text: str, question: str | None = None) -> Claims:
    """What the screens and usefulness read of ``text``: its claims, or ``text`` whole when
    it has none (no sentence of it asserts anything: "I'm not sure."), none when blank."""
    found = claims(text, question)
    if found.said or not text.strip():
        return found
    return Claims([text], [None])


def as_read(claim: str, asked: str | None) -> str:
    """``claim`` as the support model reads it: after the question it answers when it is a
    phrase answer (``asked``), else alone."""
    return claim if asked is None else f"{asked}{PHRASE_JOIN}{claim}"


def sentences(text: str) -> list[str]:
    """The sentences of ``text`` that assert something, each with the sentences that refer
    back to it."""
    found = all_sentences(text)
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
    """The claims of one sentence (see the module docstring): each a span of it as written."""
    sentence = _LEAD.sub("", strip_particle(sentence)).strip()
    parts = _parts(sentence)
    merged: list[list[int]] = []  # [start, end) of each claim in ``sentence``
    pending = -1  # the start of a condition, or of a subject, waiting for what follows it
    for k, (start, end, colon) in enumerate(parts):
        part = sentence[start:end]
        last = k == len(parts) - 1
        if pending >= 0:
            merged.append([pending, end])
            pending = -1
        elif merged and (_modifier(part) or _VERB_FIRST.match(part) and not _noun(part)):
            merged[-1][1] = end  # "..., because that is the rule", "..., and must be ..."
        elif _CONDITION.match(part) and not last:
            pending = start
        elif merged and _subject_of_next(sentence, parts, k):
            pending = start  # "..., and glucagon, from alpha cells, raises it ..."
        elif merged and (_fragment(part) or colon and not _has_verb(part)):
            merged[-1][1] = end  # a list item, or a list after a colon
        else:
            merged.append([start, end])
    if pending >= 0:
        merged.append([pending, parts[-1][1]])
    if len(merged) > 1 and len(words(sentence[slice(*merged[0])])) < MIN_WORDS:
        merged[:2] = [[merged[0][0], merged[1][1]]]  # "Sorry, we don't take PayPal"
    if (
        len(merged) > 1
        and not _SUBJECT_END.search(sentence[slice(*merged[0])])
        and _VERB_FIRST.match(sentence[slice(*merged[1])])
    ):
        merged[:2] = [[merged[0][0], merged[1][1]]]  # "Insulin, made by beta cells, lowers ..."
    out = [_sentence_case(sentence[start:end]) for start, end in merged]
    return [c for c in out if c] or ([sentence] if sentence else [])


def _parts(sentence: str) -> list[tuple[int, int, bool]]:
    """The spans of ``sentence`` between the places `_CUT` finds, each without the
    punctuation at its edges, and whether it follows a colon."""
    found = []
    start, colon = 0, False
    for m in [*_CUT.finditer(sentence), None]:
        end = m.start() if m else len(sentence)
        a, b = start, end
        while a < b and sentence[a] in " ,;:":
            a += 1
        while b > a and sentence[b - 1] in " ,;:":
            b -= 1
        if a < b:
            found.append((a, b, colon))
        if m:
            start, colon = m.end(), ":" in m.group(0)
    return found


def _modifier(part: str) -> bool:
    """``part`` qualifies the one before it (`_MODIFIER`), unless its "-ing" word is the
    subject of a verb ("shipping takes 5 days")."""
    return bool(_MODIFIER.match(part)) and not _GERUND_SUBJECT.match(part)


def _noun(part: str) -> bool:
    """``part`` starts with a noun that `_VERB_FIRST` would take for a verb: "returns are
    free", "costs will rise"."""
    return bool(_NOUN_THEN_VERB.match(part))


def _has_verb(part: str) -> bool:
    return any(_VERB_FIRST.fullmatch(w) or w.lower().endswith("ed") for w in words(part))


def _subject_of_next(sentence: str, parts: list[tuple[int, int, bool]], k: int) -> bool:
    """Part ``k`` has no verb and, past any parts that qualify it, the next part starts with
    its verb: part ``k`` is that verb's subject."""
    if _has_verb(sentence[parts[k][0] : parts[k][1]]):
        return False
    for start, end, _ in parts[k + 1 :]:
        part = sentence[start:end]
        if _VERB_FIRST.match(part) and not _noun(part):
            return True
        if not _modifier(part):
            return False
    return False


def _fragment(part: str) -> bool:
    """``part`` is a list item, not a clause: too short, or short without a verb."""
    said = words(part)
    if len(said) < MIN_WORDS:
        return True
    return len(said) < CLAUSE_WORDS and not any(
        _VERB_FIRST.fullmatch(w) or w.lower().endswith("ed") for w in said
    )


def _sentence_case(claim: str) -> str:
    claim = claim.strip().rstrip(",;:")
    return claim[:1].upper() + claim[1:] if claim[:1].islower() else claim
