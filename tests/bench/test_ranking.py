"""The benchmarks' and the training code's one AUROC."""

from __future__ import annotations

import math
import random

import pytest

from bench.ranking import auroc


def _pairwise(scores: list[float], positive: list[bool]) -> float:
    pos = [s for s, p in zip(scores, positive, strict=True) if p]
    neg = [s for s, p in zip(scores, positive, strict=True) if not p]
    return sum((a > b) + 0.5 * (a == b) for a in pos for b in neg) / (len(pos) * len(neg))


def test_perfect_inverted_and_tied_rankings() -> None:
    assert auroc([0.9, 0.8, 0.1, 0.2], [True, True, False, False]) == 1.0
    assert auroc([0.1, 0.2, 0.9, 0.8], [True, True, False, False]) == 0.0
    assert auroc([0.5, 0.5, 0.5], [True, False, False]) == 0.5


@pytest.mark.parametrize("seed", range(10))
def test_it_is_the_share_of_positive_negative_pairs_ranked_right(seed: int) -> None:
    rng = random.Random(seed)
    scores = [rng.choice([0.0, 0.5, 1.0, rng.random()]) for _ in range(60)]
    positive = [rng.random() < 0.4 for _ in scores]
    assert auroc(scores, positive) == pytest.approx(_pairwise(scores, positive))


def test_one_class_alone_has_no_area() -> None:
    assert math.isnan(auroc([0.1, 0.2], [True, True]))
    assert math.isnan(auroc([], []))
    with pytest.raises(ValueError):
        auroc([0.1], [True, False])
