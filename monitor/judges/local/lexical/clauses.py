"""What one clause claims, and the parts of a context sentence that each state one fact.

See docs/local-judge.md, "Text analysis".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from monitor.judges.local.lexical.names import name_like, names, phrases
from monitor.judges.local.lexical.quantities import SPELLED_SMALL, Quantity, quantities
from monitor.judges.local.lexical.thesaurus import synonyms, weight
from monitor.judges.local.lexical.vocabulary import Vocabulary
from monitor.judges.local.lexical.wordforms import DISCOURSE, GENERIC, Tokens
from monitor.text.numerals import DIGIT, NUMBER_WORDS, located_numbers, numbers
from monitor.text.sentences import words


@dataclass(frozen=True)
class Claim:
    """What a clause claims: its informative words, their weights, its possible acronyms."""

    text: str
    words: tuple[str, ...]
    weights: tuple[float, ...]
    capitals: frozenset[str]
    phrases: tuple[tuple[str, tuple[str, ...]], ...]
    negated: bool
    #: words written with a capital past the first word, and a first word that looks like a
    #: name (`name_like`): matched exactly only
    capitalised: frozenset[str] = frozenset()
    #: the values of its numbers
    numbers: frozenset[float] = frozenset()

    @classmethod
    def of(cls, text: str) -> Claim:
        tokens = Tokens.of(text)
        informative = tuple(
            w
            for w in tokens.content
            if w not in DISCOURSE and w not in GENERIC and w not in NUMBER_WORDS
        )
        return cls(
            text=text,
            words=informative,
            weights=tuple(weight(w) for w in informative),
            capitals=tokens.capitals(),
            # a phrase spelling out an acronym starts with a word that says something
            phrases=tuple(p for p in phrases(text) if p[1][0] in informative),
            negated=tokens.negated(),
            capitalised=frozenset(
                f
                for k, (w, f) in enumerate(zip(tokens.written, tokens.folded, strict=True))
                if w[:1].isupper() and (k or name_like(w, f))
            ),
            numbers=frozenset(v for n in numbers(text) for v in n.values)
            if DIGIT.search(text) or not NUMBER_WORDS.keys().isdisjoint(tokens.folded)
            else frozenset(),
        )

    @classmethod
    def unweighted(cls, folded_words: Sequence[str]) -> Claim:
        """Plain words, each weighing 1, no acronyms (the usefulness step's answer words)."""
        return cls(
            " ".join(folded_words),
            tuple(folded_words),
            (1.0,) * len(folded_words),
            frozenset(),
            (),
            False,
        )

    def missing(self, vocabulary: Vocabulary) -> list[str]:
        """The claim's words ``vocabulary`` lacks: as written, by stem, or as an acronym.

        A word written in capitals is found when it spells a phrase of the text
        (``MFA`` ↔ ``multi-factor authentication``), and a phrase's words are
        found when the text has its acronym in capitals (the reverse).
        """
        lacking = [
            w
            for w in self.words
            if not vocabulary.has_word(w)
            and not (w in self.capitals and w in vocabulary.acronyms)
            and vocabulary.stems.isdisjoint(synonyms(w))
        ]
        if not lacking or not self.phrases:
            return lacking
        expanded = {
            w for initials, run in self.phrases if initials in vocabulary.capitals for w in run
        }
        return [w for w in lacking if w not in expanded]

    def synonymous(self, vocabulary: Vocabulary) -> list[str]:
        """The claim's words ``vocabulary`` has only as a synonym (`synonyms`): reworded."""
        return [
            w
            for w in self.words
            if not vocabulary.has_word(w) and not vocabulary.stems.isdisjoint(synonyms(w))
        ]

    def share(self, missing: Sequence[str]) -> float:
        """The weighted share of the claim's words not in ``missing`` (1.0 without words)."""
        if not missing:
            return 1.0
        total = sum(self.weights)
        if not total:
            return 1.0
        lacking = set(missing)
        return (
            1.0
            - sum(wt for w, wt in zip(self.words, self.weights, strict=True) if w in lacking)
            / total
        )


#: Where a context sentence divides into the parts that each state one fact: a semicolon
#: or colon, a comma before a conjunction, "and", "but", "while", "whereas".
_SEGMENT = re.compile(
    r"\s*[;:]\s*"
    r"|,\s+(?:and|but|so|while|whereas|or|once|when|after|before|if|unless|because)\s+"
    r"|\s+(?:but|while|whereas)\s+"
    # "and" before a number: a list of quantities ("three months for managers and one month
    # for all other staff"); elsewhere it mostly joins nouns ("SAML and OIDC")
    r"|\s+and\s+(?=(?:US\$|USD|EUR|GBP|[$€£¥₹])?\s?\d"
    rf"|(?:one|{SPELLED_SMALL})\b)",
    re.I,
)


#: A part that starts with a number: the next item of a list of quantities.
_LIST_ITEM = re.compile(
    r"(?:US\$|USD|EUR|GBP|[$€£¥₹])?\s?\d"
    rf"|(?:one|{SPELLED_SMALL})\b",
    re.I,
)


def segments(sentence: str) -> list[str]:
    """The parts of ``sentence`` that each state one fact ("three months for managers" |
    "one month for all other staff"): where a swapped name or number shows."""
    return [p for p in _SEGMENT.split(sentence) if words(p)]


@dataclass(frozen=True)
class Segment:
    """One part of a context sentence (`segments`): its words, names and quantities."""

    text: str
    vocabulary: Vocabulary
    #: `names`, as written
    names: tuple[str, ...]
    #: `quantities` with one unit word
    quantities: tuple[Quantity, ...]
    #: a part that goes on a list of quantities ("… EUR 60 for trips within the EU | EUR 80
    #: for trips outside the EU") shares the words the list started with ("daily meal
    #: allowance"): those of the sentence's first part before its first number
    shared: Vocabulary | None = None

    @classmethod
    def split(cls, sentence: str, vocabulary: Vocabulary | None = None) -> list[Segment]:
        """The `segments` of ``sentence``, names found in the whole sentence (a name that
        starts a part is still a name); ``vocabulary``: the sentence's, reused when the
        sentence is one part."""
        parts = segments(sentence)
        found = names(sentence) if any(ch.isupper() for ch in sentence[1:]) else []
        out: list[Segment] = []
        shared: Vocabulary | None = None
        for k, part in enumerate(parts):
            said = vocabulary if vocabulary is not None and len(parts) == 1 else Vocabulary.of(part)
            counted = tuple(quantities(part, reach=1)) if said.numbers else ()
            goes_on = k > 0 and bool(_LIST_ITEM.match(part))
            if goes_on and shared is None:
                first = located_numbers(parts[0])
                head = parts[0][: min(end - len(n.surface) for n, end in first)] if first else ""
                shared = Vocabulary.of(head)
            out.append(
                cls(
                    part,
                    said,
                    tuple(n for n in found if n in part),
                    counted,
                    shared if goes_on else None,
                )
            )
        return out
