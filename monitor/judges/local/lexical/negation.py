"""Negation: whether a text negates, and which words its negators deny.

"SMS codes are not allowed" denies ``allowed``; "no later than 30 days" and
"not only" bound or extend instead, and deny nothing.
"""

from __future__ import annotations

from monitor.judges.local.lexical.wordforms import NEGATIONS, Tokens, is_content, stem


def has_negation(text: str) -> bool:
    return Tokens.of(text).negated()


#: Function words a negator may reach past to the words it denies: "not *be* allowed",
#: "no *other* ...", "without *a* receipt", "none *of the* contractors".
_DENIAL_SKIP = frozenset(
    "a an the any be been being have has had ever always yet even to get got of".split()
)
#: Words after which a negator bounds instead of denying: "not only", "not just".
_DENIAL_BOUND = frozenset("only just merely simply".split())


def _is_negator(folded: str) -> bool:
    return folded in NEGATIONS or folded.endswith("n't")


def denials(text: str, reach: int = 3) -> tuple[frozenset[str], frozenset[str]]:
    """(stems a negator of ``text`` denies, stems of its other content words).

    A negator (`NEGATIONS`, ``-n't``) denies the run of up to ``reach`` content
    words that follows it, past a few function words (`_DENIAL_SKIP`), in the
    same stretch between punctuation: ``SMS codes are not allowed as a second
    factor`` denies ``allowed``; ``After 14 days without payment the account
    ...`` denies ``payment``. Not a denial: a bound (``no more than``, ``no later
    than 30 days``, ``not only``) and ``or not`` (``whether or not``).
    """
    return denials_of(Tokens.of(text), reach)


def denials_of(found: Tokens, reach: int = 3) -> tuple[frozenset[str], frozenset[str]]:
    """`denials` of a text tokenised already."""
    tokens = found.marks
    if NEGATIONS.isdisjoint(tokens) and "n't" not in " ".join(tokens):  # no negator at all
        return frozenset(), frozenset(map(stem, found.content))
    denied: set[str] = set()
    governed: set[int] = set()
    for i, token in enumerate(tokens):
        if not _is_negator(token) or (i and tokens[i - 1] == "or"):
            continue
        j = i + 1
        while j < len(tokens) and tokens[j] in _DENIAL_SKIP:
            j += 1
        if j < len(tokens) and tokens[j] in _DENIAL_BOUND:
            continue
        run: list[int] = []
        while (
            j < len(tokens)
            and len(run) < reach
            and is_content(tokens[j])
            and not _is_negator(tokens[j])
        ):
            run.append(j)
            j += 1
        if j < len(tokens) and tokens[j] == "than":
            continue  # a bound: "no later than", "not longer than"
        governed.update(run)
        denied.update(stem(tokens[k]) for k in run)
    asserted = {
        stem(t)
        for k, t in enumerate(tokens)
        if k not in governed and is_content(t) and not _is_negator(t)
    }
    return frozenset(denied), frozenset(asserted)
