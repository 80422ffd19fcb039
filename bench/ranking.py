"""The one AUROC of the benchmarks and the training code (docs/benchmarks.md)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def auroc(scores: Sequence[float], positive: Sequence[bool]) -> float:
    """The probability that a positive outscores a negative, ties counting half; NaN
    unless both classes are present. Rank-based (Mann–Whitney U): O(n log n)."""
    if len(scores) != len(positive):
        raise ValueError("one label per score")
    n_pos = sum(1 for p in positive if p)
    n_neg = len(positive) - n_pos
    if not n_pos or not n_neg:
        return math.nan
    order = sorted(range(len(scores)), key=lambda k: scores[k])
    rank_sum = 0.0  # of the positives, ties given their average rank (1-based)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and scores[order[j + 1]] == scores[order[i]]:
            j += 1
        average = (i + j) / 2 + 1
        rank_sum += average * sum(1 for k in order[i : j + 1] if positive[k])
        i = j + 1
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
