import math

import pytest

from monitor.metrics.context_utility import score


def test_one_useful_context_is_not_exactly_one() -> None:
    # Ragas's 1e-10 in the denominator: 1 / (1 + 1e-10)
    assert score([1]) == 1 / (1 + 1e-10)
    assert score([1]) == pytest.approx(0.9999999999, abs=1e-12)
    assert score([1]) < 1.0


def test_average_precision_rewards_useful_contexts_ranked_first() -> None:
    # precision@1 = 0, precision@2 = 1/2: (0.5 * 1) / (1 + 1e-10)
    assert score([0, 1]) == 0.5 / (1 + 1e-10)
    # (1 + 0 + 2/3) / 2
    assert score([1, 0, 1]) == pytest.approx((1 + 2 / 3) / 2, abs=1e-9)
    assert score([1, 1, 0]) == pytest.approx(1.0, abs=1e-9)
    assert score([1, 1, 0]) > score([1, 0, 1]) > score([0, 1, 1])


def test_no_useful_context_is_zero() -> None:
    assert score([0, 0, 0]) == 0.0


def test_no_contexts_is_unscoreable() -> None:
    assert math.isnan(score([]))
