import math

from monitor.metrics.context_recall import score


def test_attributed_share() -> None:
    assert score([1, 0]) == 0.5
    assert score([1, 1]) == 1.0
    assert score([0, 0, 1, 1]) == 0.5


def test_unscoreable_without_reference_statements() -> None:
    assert math.isnan(score([]))
