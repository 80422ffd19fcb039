import pytest

from monitor.metrics.semantic_similarity import score


def test_cosine() -> None:
    assert score([1.0, 0.0], [1.0, 0.0]) == pytest.approx(1.0)
    assert score([1.0, 1.0], [1.0, 0.0]) == pytest.approx(2**-0.5)
    assert score([1.0, 0.0], [0.0, 1.0]) == pytest.approx(0.0)


def test_threshold_makes_it_binary() -> None:
    assert score([1.0, 1.0], [1.0, 0.0], threshold=0.7) == 1.0
    assert score([1.0, 1.0], [1.0, 0.0], threshold=0.71) == 0.0
    assert score([1.0, 0.0], [1.0, 0.0], threshold=1.0) in (0.0, 1.0)


def test_zero_vector() -> None:
    assert score([0.0, 0.0], [1.0, 0.0]) == 0.0
