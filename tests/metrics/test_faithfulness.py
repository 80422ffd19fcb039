import math

from monitor.metrics.faithfulness import score


def test_share_of_supported_statements() -> None:
    assert score([1, 0]) == 0.5
    assert score([1, 1, 1]) == 1.0
    assert score([0, 0, 0, 0]) == 0.0
    assert score([1, 0, 0]) == 1 / 3


def test_no_statements_is_unscoreable() -> None:
    assert math.isnan(score([]))
