"""The few numbers the local judge decides with, in one place.

Each belongs to a rule of `verify`, `support` or `swaps`, to the windows of
`contexts`, or to the usefulness step of `judge`; those modules say what the
rules do with them.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LocalThresholds:
    """The numbers of the local judge's rules (see the module docstring)."""

    #: graded support (weighted share of a clause's informative words one context window
    #: holds, MiniLM word matches counted by `support.soft_match`) at which a clause is supported
    support: float = 0.65
    #: the share one window must hold for a near copy (one word reworded), a short clause
    #: and with ``semantic=False`` (7/8)
    window_coverage: float = 0.875
    #: lexical only: below this share of its words anywhere in the context, a clause fails at
    #: once; and the share of a clause a denying sentence must hold (rule 5)
    min_coverage: float = 0.5
    #: MiniLM word cosine from which a word of the window counts towards a clause's word ...
    soft_low: float = 0.3
    #: ... and at which it counts fully (linear in between)
    soft_high: float = 0.6
    #: MiniLM cosine at which two words count as the same (usefulness, near copies, short
    #: clauses)
    word_similarity: float = 0.8
    #: share of the rest of a clause a passage without its name or number must hold for
    #: the passage's other name or number to be a swap (rule 6)
    swap_rest: float = 0.67
    #: words of a clause weighing at least this are checked for a swap (who does what) ...
    role_weight: float = 3.0
    #: ... against a word of the part the rest is said in, at this MiniLM cosine or more ...
    role_similarity: float = 0.5
    #: ... and less than this (the same word said again: "refunded"/"refundable")
    role_same: float = 0.9
    #: a clause of at most this many informative words gets no graded word matches
    short_claim: int = 2
    #: share of the answer's content words a useful context holds
    useful_coverage: float = 0.5
    #: windows compared word by word with MiniLM per statement (the lexically best ones)
    semantic_windows: int = 3
    #: window share from which MiniLM may decide a clause short of passing (rule 7) ...
    tie_coverage: float = 0.7
    #: ... by the cosine of the clause and its best window (a restatement)
    sentence_similarity: float = 0.85
    #: neighbouring sentences a context window spans at most
    window_sentences: int = 3
