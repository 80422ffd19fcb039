"""What a text holds, for membership tests: its folded words, stems, numbers and acronyms.

`Vocabulary` answers "does this text have that word or number?"; `Sentence`
is what the judge reads of one context sentence from a single tokenisation.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, fields
from operator import attrgetter

from monitor.judges.local.lexical.names import acronyms
from monitor.judges.local.lexical.negation import denials_of
from monitor.judges.local.lexical.quantities import quantities, ranges
from monitor.judges.local.lexical.thesaurus import negated_word
from monitor.judges.local.lexical.wordforms import Tokens, fold, stem
from monitor.text.numerals import NUMBER_WORDS

#: Where a word divides into its parts: an apostrophe or a hyphen
_PARTS = re.compile(r"['-]")
#: (the lookbehind starts a match only where a word starts: same matches, no rescans)
_COMPOUND = re.compile(r"(?<![^\W\d_])[^\W\d_]+(?:-[^\W\d_]+)+")


@dataclass(frozen=True)
class Vocabulary:
    """The words of a text, for membership tests: folded forms and stems."""

    folded: frozenset[str]
    stems: frozenset[str]
    numbers: frozenset[float]
    #: initials of the text's phrases ("multi-factor authentication" → ``mfa``)
    acronyms: frozenset[str] = frozenset()
    #: words written in capitals (``SSO``), folded: acronyms a phrase may spell out
    capitals: frozenset[str] = frozenset()
    #: hyphenated words as written, folded (``kestrel-guest``)
    compounds: frozenset[str] = frozenset()
    #: (value, stem of a following word) of every quantity: ``14 days`` → (14.0, "day")
    quantities: frozenset[tuple[float, str]] = frozenset()

    @classmethod
    def union(cls, parts: Sequence[Vocabulary]) -> Vocabulary:
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls(frozenset(), frozenset(), frozenset())
        # field by field, the union of the parts' sets
        return cls(*(frozenset().union(*sets) for sets in zip(*map(_sets, parts), strict=True)))

    @classmethod
    def of(cls, text: str) -> Vocabulary:
        return cls._of(text, Tokens.of(text))

    @classmethod
    def _of(cls, text: str, tokens: Tokens) -> Vocabulary:
        """`of` on ``text`` tokenised already."""
        folded = set(tokens.folded)
        # split hyphenated and apostrophe forms too: "Mecklenburg-Strelitz", "rock'n'roll"
        # (a word without either is its own only part)
        folded.update(
            part for w in tokens.folded if "'" in w or "-" in w for part in _PARTS.split(w) if part
        )
        # a spelled number is a whole word or a part of one: without one, no scan for it
        spelled = "one" in folded or not NUMBER_WORDS.keys().isdisjoint(folded)
        counted = quantities(text, spelled=spelled)
        spanned, spanned_units = ranges(text, spelled=spelled)
        return cls(
            folded=frozenset(folded),
            stems=frozenset(map(stem, folded)),
            numbers=frozenset(v for q in counted for v in q.number.values) | spanned,
            acronyms=acronyms(text),
            capitals=tokens.capitals(),
            compounds=frozenset(fold(w) for w in _COMPOUND.findall(text))
            if "-" in text
            else frozenset(),
            quantities=frozenset(
                (v, unit) for q in counted for v in q.number.values for unit in q.units
            )
            | spanned_units,
        )

    def has_word(self, folded_word: str) -> bool:
        return folded_word in self.folded or stem(folded_word) in self.stems


#: the sets of a `Vocabulary`, in the order of its fields
_sets = attrgetter(*(f.name for f in fields(Vocabulary)))


@dataclass(frozen=True)
class Sentence:
    """What the local judge reads of one context sentence, from a single tokenisation
    (`Vocabulary.of`, `negation.has_negation`, `wordforms.content_words` and
    `negation.denials` of it)."""

    vocabulary: Vocabulary
    #: `negation.has_negation`, or a word negated by its prefix (`thesaurus.negated_word`)
    negated: bool
    #: `wordforms.content_words`
    content: list[str]
    #: `negation.denials`
    denials: tuple[frozenset[str], frozenset[str]]

    @classmethod
    def of(cls, text: str) -> Sentence:
        tokens = Tokens.of(text)
        # a context sentence that says "unused" may back a claim that says "not used"
        return cls(
            Vocabulary._of(text, tokens),
            tokens.negated() or any(map(negated_word, tokens.folded)),
            tokens.content,
            denials_of(tokens),
        )


def coverage(wanted: Sequence[str], vocabulary: Vocabulary) -> float:
    """Share of ``wanted`` (folded words) present in ``vocabulary``; 1.0 when nothing is wanted."""
    if not wanted:
        return 1.0
    return sum(vocabulary.has_word(w) for w in wanted) / len(wanted)
