"""What a word means to the rule judge: its weight, its synonyms and opposites.

See docs/local-judge.md, "Graded support (rule 4)".
"""

from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

from monitor.judges.local.lexical.wordforms import stem

#: Words of degree and order: a statement using one claims a comparison, which only the
#: same word in the context supports (never a look-alike: ``earlier`` is not ``early``).
COMPARISONS = frozenset(
    """
    first last earlier earliest later latest before after older oldest younger youngest
    larger largest smaller smallest bigger biggest longer longest shorter shortest higher
    highest lower lowest more most fewer fewest less least greater greatest better best worse
    worst only sole single previous next former latter
    """.split()
)

#: Words whose opposite says the other case ("within the EU" / "outside the EU", "under
#: $50,000" / "$50,000 or more"): a clause saying one where its passage says the other
#: swapped them (most are function words, no content word of a claim).
OPPOSITES = {
    "within": ("outside",),
    "inside": ("outside",),
    "outside": ("within", "inside"),
    "under": ("over", "above", "more"),
    "below": ("above", "over", "more"),
    "over": ("under", "below", "less"),
    "above": ("below", "under", "less"),
    "before": ("after",),
    "after": ("before",),
    "minimum": ("maximum",),
    "maximum": ("minimum",),
    "domestic": ("international",),
    "international": ("domestic",),
    "online": ("paper", "offline"),
    "paper": ("online",),
    "offline": ("online",),
}

#: Units of time: a statement's "end of the week" is not the context's "next renewal" or
#: "month", however close MiniLM puts them; they match as themselves (or a thesaurus word).
TIME_UNITS = frozenset(
    """
    second seconds minute minutes hour hours day days week weeks weekend weekends month months
    quarter quarters year years decade decades morning mornings afternoon evening evenings night
    nights monday tuesday wednesday thursday friday saturday sunday weekday weekdays
    """.split()
)


#: Words of comparison or order that say the same as another one ("the next year" is "the
#: following year").
SAME_COMPARISON = {
    "next": "following",
    "following": "next",
    "previous": "prior",
    "prior": "previous",
    "former": "previous",
}


#: Words that say the same in the policy, product and service texts RAG answers paraphrase
#: ("lost" for "expire", "sign-off" for "approval"), each group one meaning. MiniLM's word
#: vectors rate many of these pairs no closer than unrelated words of the same topic.
SYNONYM_GROUPS = (
    "expire expiry lapse lost lose forfeit forfeited void",
    "transfer move carry roll",
    "maximum max limit cap most",
    "minimum min least",
    "unused leftover remaining untaken spare",
    "following next subsequent",
    "previous prior preceding",
    "require required requirement mandatory compulsory obligatory must need needed",
    "allow allowed permit permitted",
    "approve approval approved sign authorise authorize authorised authorized",
    "refund refunded refundable reimburse reimbursed reimbursement",
    "employee employees staff worker workers personnel",
    "holiday holidays vacation leave pto",
    "salary wage wages pay compensation",
    "fee charge cost price",
    "cancel cancelled canceled terminate terminated termination",
    "purchase purchased buy bought",
    "start begin commence",
    "finish complete",
    "phone mobile cell",
    "doctor physician gp",
    "medicine medication drug",
    "car vehicle",
    "headquarters hq",
    "deadline due",
    "yearly annual annually",
    "monthly month",
    "daily day",
    "weekly week",
    "free complimentary",
    "immediately instantly",
    "help assist assistance support",
    "contact reach call ring phone",
    "delete deleted erase erased",
    "error failure",
    "monitor display screen",
)


@lru_cache(maxsize=1)
def _synonym_table() -> dict[str, frozenset[str]]:
    table: dict[str, set[str]] = {}
    for group in SYNONYM_GROUPS:
        stems = {stem(w) for w in group.split()}
        for s in stems:
            table.setdefault(s, set()).update(stems - {s})
    return {s: frozenset(others) for s, others in table.items()}


def synonyms(folded: str) -> frozenset[str]:
    """The stems of the words of `SYNONYM_GROUPS` that mean what ``folded`` means."""
    return _synonym_table().get(stem(folded), frozenset())


# --- how informative a word is


@lru_cache(maxsize=1)
def _ranks() -> dict[str, int]:
    """Frequency rank of the whole words of the vendored BERT vocabulary (``vocab.txt``).

    Past its reserved entries the WordPiece vocabulary is ordered by frequency
    in its training corpus (Wikipedia and books), so the line number is a rank.
    """
    lines = (Path(__file__).parents[1] / "vocab.txt").read_text(encoding="utf-8").splitlines()
    first = lines.index("the")
    return {
        w: i - first + 1
        for i, w in enumerate(lines[first:], start=first)
        if w.isalpha() and not w.startswith("#")
    }


@lru_cache(maxsize=1)
def _unknown_rank() -> int:
    return max(_ranks().values()) + 1


@lru_cache(maxsize=65536)
def weight(folded: str) -> float:
    """How much a word says, ≈ its inverse document frequency: ``1 + ln(rank / 100)``, ≥ 1.

    Zipf's law makes a word's frequency ∝ 1/rank, so ln(rank) is its IDF up to a
    constant; the 100 commonest words weigh 1, a word at rank 3,000 (``printer``)
    ≈ 4.4, a word BERT's vocabulary lacks (``yubikey``) as its last word, ≈ 6.7.
    """
    ranks = _ranks()
    rank = ranks.get(folded) or ranks.get(stem(folded)) or _unknown_rank()
    return max(1.0, 1.0 + math.log(rank / 100))


def negated_word(folded: str) -> bool:
    """``folded`` is a word negated by its prefix: "un" before a word of the vocabulary
    ("unused", "unpaid", "unlimited"; not "under", "universal")."""
    return len(folded) >= 6 and folded.startswith("un") and folded[2:] in _ranks()
