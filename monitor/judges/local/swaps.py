"""The swap check (rule 6 of `verify`): a name, number or word a clause says where the
context says another; also what the context says in place of a missing one.

See docs/local-judge.md, "Swaps (rule 6)".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.judges.local.contexts import Context, segments_of
from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.lexical.clauses import Claim, Segment, segments
from monitor.judges.local.lexical.names import NAME_PARTS, names
from monitor.judges.local.lexical.quantities import Quantity, quantities
from monitor.judges.local.lexical.thesaurus import COMPARISONS, OPPOSITES
from monitor.judges.local.lexical.vocabulary import Vocabulary
from monitor.judges.local.lexical.wordforms import DISCOURSE, GENERIC, content_words, fold, stem
from monitor.judges.local.thresholds import LocalThresholds
from monitor.text.numerals import MONTHS, numbers
from monitor.text.sentences import words


@dataclass(frozen=True)
class Specific:
    """A name, number or word of a clause, as the swap check compares it."""

    #: as written in the clause
    surface: str
    #: "name", "word", or the number's kind (amount, percentage, year, date, number)
    kind: str
    #: its folded words (left out when the rest of the clause is aligned)
    words: frozenset[str]
    #: numbers: the values it may stand for
    values: frozenset[float] = frozenset()
    #: numbers: the stem of the unit word after it ("" without one)
    unit: str = ""
    #: names: a month ("March")
    month: bool = False
    #: numbers: the number alone, as written ("ten" of "ten leftover")
    number: str = ""

    def said(self, other: str) -> str:
        """How a reason quotes this specific next to ``other``, what the context says: a
        number with its unit only when ``other`` has it too."""
        if self.number and not (self.unit and stem(fold(other.split()[-1])) == self.unit):
            return self.number
        return self.surface


#: How much a number of a clause weighs when the rest of the clause is aligned (a word of
#: rank ≈ 2,000)
NUMBER_WEIGHT = 4.0


def name_specific(name: str) -> Specific:
    parts = frozenset(fold(w) for w in NAME_PARTS.split(name) if w)
    return Specific(name, "name", parts, month=bool(parts) and parts <= MONTHS)


def number_specific(q: Quantity) -> Specific:
    return Specific(
        q.surface,
        q.number.kind,
        frozenset(fold(w) for w in words(q.number.surface)),
        # a date's "unit" is its month, a year's whatever follows: no unit
        q.number.values,
        q.units[0] if q.units and q.number.kind not in ("date", "year") else "",
        number=q.number.surface,
    )


def specifics(clause: str, t: LocalThresholds, claim: Claim | None = None) -> list[Specific]:
    """The names and numbers of ``clause`` (numbers first), then, with ``claim``, its
    informative words that no name holds (who does what: "monthly", "engineers")."""
    found = [
        *(number_specific(q) for q in quantities(clause, reach=1)),
        *(name_specific(n) for n in names(clause)),
    ]
    if claim is not None:
        named = {w for f in found for w in f.words}
        found.extend(
            Specific(w, "word", frozenset({w}))
            for w in dict.fromkeys(fold(x) for x in words(clause))
            if w in OPPOSITES
        )
        found.extend(
            Specific(w, "word", frozenset({w}))
            for w, wt in zip(claim.words, claim.weights, strict=True)
            if w not in named
            and w not in claim.capitalised
            and w not in COMPARISONS
            and wt >= t.role_weight
        )
    return found


def holds(segment: Segment, specific: Specific) -> bool:
    vocabulary = segment.vocabulary
    if specific.kind == "word":
        return vocabulary.has_word(specific.surface)
    if specific.kind != "name":
        return bool(specific.values & vocabulary.numbers)
    return all(vocabulary.has_word(w) for w in specific.words) or (
        specific.surface.isupper() and fold(specific.surface) in vocabulary.acronyms
    )


def other_word(
    segment: Segment,
    specific: Specific,
    claim: str,
    holding: Sequence[Segment],
    embedder: MiniLMEmbedder,
    t: LocalThresholds,
    semantic: bool = True,
) -> str | None:
    """The word of ``segment`` in the role ``specific`` has in ``claim``: one neither the
    claim nor the parts holding ``specific`` have, closest to it by MiniLM (cosine ≥
    ``role_similarity``: "annual" for "monthly", "designers" for "engineers"; with
    ``semantic=False`` opposites only, no model call)."""
    said = Vocabulary.of(claim)
    opposite = [
        w
        for w in OPPOSITES.get(specific.surface, ())
        if w in segment.vocabulary.folded and w not in said.folded
    ]
    if opposite:
        return opposite[0]
    root = specific.surface[:5]
    candidates = [
        w
        for w in content_words(segment.text)
        if w not in DISCOURSE
        and w not in GENERIC
        and not said.has_word(w)
        and not w.startswith(root)  # another form of the same word ("refundable")
        and not any(g.vocabulary.has_word(w) for g in holding)
    ]
    if not candidates or not semantic:
        return None
    vectors = embedder.embed([specific.surface, *candidates])
    # parallel, not the same: a synonym is the same thing said again
    fits = [
        (float(c), w)
        for c, w in zip(vectors[1:] @ vectors[0], candidates, strict=True)
        if t.role_similarity <= float(c) < t.role_same
    ]
    return max(fits)[1] if fits else None


def other(segment: Segment, specific: Specific, claim: str, *, strict: bool = True) -> str | None:
    """A name or number of ``segment`` of the same kind as ``specific`` that ``claim``
    does not have: what the context says where the claim says ``specific``."""
    if specific.kind == "name":
        said = {fold(w) for w in words(claim)}
        for name in segment.names:
            parts = {fold(w) for w in NAME_PARTS.split(name) if w}
            # of its kind: a month for a month, an acronym for an acronym
            if (
                parts
                and parts.isdisjoint(said)
                and (parts <= MONTHS) == specific.month
                and name.isupper() == specific.surface.isupper()
            ):
                # as written, with the digits a name may end in ("Amazon S3")
                written = re.search(re.escape(name) + r"[\w-]*", segment.text)
                return written.group(0) if written else name
        return None
    values = {v for n in numbers(claim) for v in n.values}
    for q in segment.quantities:
        if q.number.values & values or q.number.kind != specific.kind:
            continue
        same_unit = bool(specific.unit and q.units and q.units[0] == specific.unit)
        if strict and specific.unit and not same_unit and q.number.kind not in ("date", "year"):
            continue
        # with its unit when the units agree ("three months"), else the number alone
        return q.surface if same_unit else q.number.surface
    return None


def other_numbers(clause: str, specific: Specific) -> list[frozenset[float]]:
    """The values of the numbers of ``clause`` other than ``specific``."""
    return [n.values for n in numbers(clause) if not n.values & specific.values]


def rest_share(
    claim: Claim,
    specific: Specific,
    segment: Segment,
    others: Sequence[frozenset[float]] = (),
) -> float:
    """The weighted share of the rest of ``claim`` — its words but ``specific``'s, and
    its other numbers (``others``, each weighing `NUMBER_WEIGHT`) — ``segment`` has."""
    total = found = 0.0
    for w, wt in zip(claim.words, claim.weights, strict=True):
        if w in specific.words:
            continue
        total += wt
        if segment.vocabulary.has_word(w) or (
            segment.shared is not None and segment.shared.has_word(w)
        ):
            found += wt
    for values in others:
        total += NUMBER_WEIGHT
        if values & segment.vocabulary.numbers:
            found += NUMBER_WEIGHT
    return found / total if total else 0.0


def swapped(
    clause: str,
    claim: Claim,
    passages: Sequence[Segment],
    embedder: MiniLMEmbedder,
    t: LocalThresholds,
    semantic: bool = True,
) -> tuple[Specific, str, Segment] | None:
    """Rule 6: a name or number of ``clause`` that its window says of something else.

    The rest of the clause (its words but the name's or number's) is aligned
    to the part of the window holding most of it (`segments`); when that
    part lacks the name or number, holds more of the rest than every part
    that has it, and has another of the same kind (a name; a number of the
    same kind and unit), the clause swapped them: (specific, the other, part).
    """
    parts = segments(clause)
    if len(parts) > 1:
        for part in parts:
            found = swapped(part, Claim.of(part), passages, embedder, t, semantic)
            if found is not None:
                return found
        return None
    for specific in specifics(clause, t, claim):
        others = other_numbers(clause, specific)
        shares = [rest_share(claim, specific, g, others) for g in passages]
        if not shares:
            return None
        best = max(range(len(shares)), key=shares.__getitem__)
        if shares[best] <= 0.0 or holds(passages[best], specific):
            continue
        holding = [k for k, g in enumerate(passages) if holds(g, specific)]
        # said where more of the rest is, or as the title of the passage ("Single sign-on.")
        if any(shares[k] >= shares[best] or len(words(passages[k].text)) <= 3 for k in holding):
            continue
        # not in this passage at all: a swap only where most of the rest is said
        if not holding and shares[best] < t.swap_rest:
            continue
        if specific.kind == "word":
            # a word of the clause the context says elsewhere, where the rest is said
            if not holding or shares[best] < t.swap_rest:
                continue
            said = other_word(
                passages[best],
                specific,
                clause,
                [passages[k] for k in holding],
                embedder,
                t,
                semantic,
            )
        else:
            said = other(passages[best], specific, clause)
        if said:
            return specific, said, passages[best]
    return None


def counterpart(claim: str, specific: Specific, ctx: Context) -> str:
    """For a name or number not in the context: what the part of the context holding most
    of the rest of ``claim`` says in its place ("" when nothing of that kind is there)."""
    parsed = Claim.of(claim)
    if not parsed.words or not ctx.windows:
        return ""
    passages = segments_of(ctx)
    others = other_numbers(claim, specific)
    shares = [rest_share(parsed, specific, g, others) for g in passages]
    if not shares or max(shares) <= 0.0:
        return ""
    best = passages[max(range(len(shares)), key=shares.__getitem__)]
    # the same unit in the closest part, then anywhere in the context, then any unit
    return (
        other(best, specific, claim)
        or next(filter(None, (other(g, specific, claim) for g in passages)), None)
        or other(best, specific, claim, strict=False)
        or ""
    )
