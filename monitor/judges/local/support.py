"""Graded support (rule 4 of `verify`): how much of a clause one context window says.

See docs/local-judge.md, "Graded support (rule 4)".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from monitor.judges.local.contexts import Context
from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.lexical.clauses import Claim
from monitor.judges.local.lexical.thesaurus import COMPARISONS, TIME_UNITS
from monitor.judges.local.thresholds import LocalThresholds

Vector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Windows:
    """A clause's (or an answer's) words against the windows of a context."""

    claim: Claim
    #: per window, the claim's words it lacks (folded form, stem, acronym compared)
    exact: list[list[str]]
    #: window indexes, best (largest weighted share matched, then shortest) first
    order: list[int]


def rank_windows(claim: Claim, ctx: Context) -> Windows:
    """``claim`` against every window of ``ctx``, windows ranked by words matched exactly."""
    exact = [claim.missing(v) for v in ctx.window_vocabularies]
    shares = [claim.share(missing) for missing in exact]
    # then by the claim's numbers the window has ("leave by 11 a.m." → "Check-out is 11:00")
    values = claim.numbers
    held = [len(values & v.numbers) if values else 0 for v in ctx.window_vocabularies]
    order = sorted(range(len(exact)), key=lambda i: (-shares[i], -held[i], len(ctx.windows[i]), i))
    return Windows(claim, exact, order)


def synonym_words(windows: Windows, ctx: Context, t: LocalThresholds) -> list[str]:
    """The words MiniLM compares for ``windows``: none when a window matches exactly."""
    if not windows.order or not windows.exact[windows.order[0]]:
        return []
    exact, claim = windows.exact, windows.claim
    # only soft words (`exact_only` ones are not) are compared, in windows that can win
    top = [
        i
        for i in contenders(windows, t)
        if ctx.window_content[i] and any(not exact_only(claim, w) for w in exact[i])
    ]
    unmatched = sorted({w for i in top for w in exact[i] if not exact_only(claim, w)})
    candidates = sorted({w for i in top for w in ctx.window_content[i]})
    return [*unmatched, *candidates]


def contenders(windows: Windows, t: LocalThresholds) -> list[int]:
    """The lexically best windows `best_window` compares word by word, without those
    that could not beat the best one even with every soft word matched (the share
    of the first window's exact matches is a floor, and the first of equals wins)."""
    claim, exact = windows.claim, windows.exact
    top = windows.order[: t.semantic_windows]
    if not top:
        return []
    floor = claim.share(exact[top[0]])
    return [
        top[0],
        *(i for i in top[1:] if claim.share([w for w in exact[i] if exact_only(claim, w)]) > floor),
    ]


def word_vectors(
    pending: Sequence[tuple[Windows, Context]], embedder: MiniLMEmbedder, t: LocalThresholds
) -> dict[str, Vector]:
    """The MiniLM vectors of every word ``pending`` compares, from one embed call."""
    compared = list(
        dict.fromkeys(w for windows, ctx in pending for w in synonym_words(windows, ctx, t))
    )
    if not compared:
        return {}
    return dict(zip(compared, embedder.embed(compared), strict=True))


def best_window(
    windows: Windows,
    ctx: Context,
    vectors: dict[str, Vector],
    t: LocalThresholds,
    *,
    graded: bool = True,
) -> tuple[int | None, float, list[str], bool]:
    """The window holding most of the claim: (index, graded support, words not matched,
    reworded).

    Words match by folded form, stem or acronym (1 each); the words still
    unmatched in the lexically best windows count by `soft_match` of their
    closest word of the window, by MiniLM similarity (synonyms, other word
    forms: ``bought``/``purchased``, ``leftover``/``unused``) — when ``vectors``
    (from `word_vectors`) holds them. Words of comparison only match exactly.
    A word counting less than half is "not matched". Graded matches count
    only when the window lacks two words or more of the claim (``reworded``:
    a paraphrase rewords; a copy that changes one word changes the fact, and
    that word must match as a synonym). ``graded=False`` (usefulness): a word
    matches, fully, at cosine ≥ ``word_similarity`` only.
    """
    claim, exact = windows.claim, windows.exact
    if not windows.order:
        return None, 0.0, list(claim.words), False
    best = windows.order[0]
    if not exact[best] or not vectors:
        return best, claim.share(exact[best]), exact[best], False
    total = sum(claim.weights) or 1.0
    weight = dict(zip(claim.words, claim.weights, strict=True))
    # a short claim (a bare name or phrase) has nothing to be loose about: its words match
    # as synonyms only, as in usefulness
    graded = graded and len(claim.words) > t.short_claim
    best_share, best_missing, best_reworded = -1.0, list(claim.words), False
    for i in contenders(windows, t):
        missing = exact[i]
        soft = [w for w in missing if not exact_only(claim, w)]
        window_words = ctx.window_content[i]
        credit: dict[str, float] = {}
        # words found as synonyms are reworded too
        reworded = graded and len(soft) + len(claim.synonymous(ctx.window_vocabularies[i])) > 1
        if window_words and soft:
            sims = (
                np.stack([vectors[w] for w in soft])
                @ np.stack([vectors[w] for w in window_words]).T
            )
            credit = {
                w: soft_match(float(row.max()), t)
                if reworded
                else float(float(row.max()) >= t.word_similarity)
                for w, row in zip(soft, sims, strict=True)
            }
        share = claim.share(missing) + sum(weight[w] * c for w, c in credit.items()) / total
        if share > best_share:
            best, best_share, best_reworded = i, share, reworded
            best_missing = [w for w in missing if credit.get(w, 0.0) < 0.5]
    return best, best_share, best_missing, best_reworded


def soft_match(cosine: float, t: LocalThresholds) -> float:
    """How much a word counts as matched by a window word at this MiniLM cosine: 0 up to
    ``soft_low``, 1 from ``soft_high``, linear in between."""
    return min(1.0, max(0.0, (cosine - t.soft_low) / (t.soft_high - t.soft_low)))


def exact_only(claim: Claim, word: str) -> bool:
    """A word of ``claim`` MiniLM does not match: a word of comparison or order, a unit of
    time, a word written with a capital (`Claim.capitalised`)."""
    return word in COMPARISONS or word in TIME_UNITS or word in claim.capitalised
