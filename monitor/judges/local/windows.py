"""Evidence windows: the short spans of the contexts a claim is checked against.

See docs/model.md.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache

import numpy as np

from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.evidence import content, stem
from monitor.text.sentences import WORD_RE, sentences

#: Sentences per window, and the longest context kept whole as one window.
SENTENCES = 2
WHOLE = 4
#: Windows read per claim.
TOP = 2
#: Windows each claim puts on the record's shortlist by the words it shares with them
#: (`shortlist`): only the shortlist is embedded. Embedding every window of a RAG-sized
#: record was two thirds of the judge's CPU; with 3 a claim the embedder reads about a
#: quarter of the windows, and the record's shortlist holds the embedder's own nearest window
#: for ~91 % of claims, with the dev sets' figures within 0.01 (docs/benchmarks.md,
#: "Local judge: cost on real RAG records").
SHORTLIST = 3


def windows_of(contexts: Sequence[str]) -> list[str]:
    """The windows of ``contexts``, in order, without repeats."""
    found: dict[str, None] = {}
    for text in contexts:
        said = sentences(text) or ([text.strip()] if text.strip() else [])
        if len(said) <= WHOLE and said:
            found[" ".join(said)] = None
        for k in range(max(0, len(said) - SENTENCES + 1)):
            found[" ".join(said[k : k + SENTENCES])] = None
        if len(said) == 1:
            found[said[0]] = None
    return list(found)


@lru_cache(maxsize=16384)
def stems(text: str) -> frozenset[str]:
    """The stems of ``text``'s content words, and its digit runs (a figure tells windows of
    one topic apart). Cached: retrieved chunks come back in later records."""
    said = {stem(word) for word in content(text)}
    said.update(word for word in WORD_RE.findall(text) if word.isdigit())
    return frozenset(said)


def picks(claims: Sequence[str], windows: Sequence[str], size: int = SHORTLIST) -> list[list[int]]:
    """Each claim's ``size`` best windows by the content words they share, best first: each
    shared stem weighs its rarity among ``windows`` (idf), the sum divided by the root of the
    window's stem count, so a long window does not win by length alone. A window that shares
    no word with a claim is never its pick."""
    held = [stems(w) for w in windows]
    spread = Counter(s for found in held for s in found)
    rarity = {s: math.log(1 + len(windows) / n) for s, n in spread.items()}
    scale = 1 / np.sqrt(np.array([len(found) + 1 for found in held], dtype=np.float64))
    out: list[list[int]] = []
    for claim in claims:
        words = stems(claim)
        score = np.array([sum(rarity[s] for s in words & found) for found in held]) * scale
        best = np.argsort(-score, kind="stable")[:size]
        out.append([int(i) for i in best if score[i] > 0])
    return out


def shortlist(claims: Sequence[str], windows: Sequence[str], size: int = SHORTLIST) -> list[int]:
    """The indices of the windows (in order) among some claim's ``size`` best by the
    content words they share (`picks`)."""
    return sorted({i for found in picks(claims, windows, size) for i in found})


def nearest(
    embedder: MiniLMEmbedder,
    claims: Sequence[str],
    windows: Sequence[str],
    top: int = TOP,
    size: int | None = SHORTLIST,
) -> list[list[int]]:
    """For each claim, the indices of its ``top`` nearest windows (MiniLM cosine),
    nearest first (all of them, in order, when there are no more). Only the windows of
    the record's `shortlist` (``size`` a claim) are embedded and ranked; all of them
    when ``size`` is None or the shortlist has fewer than ``top``."""
    if not claims:
        return []
    if len(windows) <= top:
        return [list(range(len(windows))) for _ in claims]
    ranked = list(range(len(windows)))
    if size is not None:
        kept = shortlist(claims, windows, size)
        ranked = kept if len(kept) >= top else ranked
    vectors = embedder.embed([*claims, *(windows[i] for i in ranked)])
    sims = vectors[: len(claims)] @ vectors[len(claims) :].T
    return [[ranked[int(i)] for i in np.argsort(-row, kind="stable")[:top]] for row in sims]
