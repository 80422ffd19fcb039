import math

from monitor.metrics.precision_at_k import score


def test_mean_of_verdicts_order_ignored() -> None:
    assert score([0, 1]) == 0.5
    assert score([1, 0]) == 0.5
    assert score([1, 1, 0, 0]) == 0.5
    assert score([1]) == 1.0
    assert score([0, 0]) == 0.0


def test_unscoreable_without_contexts() -> None:
    assert math.isnan(score([]))
