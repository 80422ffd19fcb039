import math

import pytest

from monitor.metrics._base import cosine
from monitor.metrics.response_relevancy import score


def test_mean_cosine_when_committal() -> None:
    assert score([0.9, 0.6, 0.3], [False, False, False]) == pytest.approx(0.6)


def test_some_noncommittal_keeps_the_mean() -> None:
    assert score([0.9, 0.6, 0.3], [True, False, True]) == pytest.approx(0.6)


def test_all_noncommittal_is_zero() -> None:
    assert score([0.9, 0.6, 0.3], [True, True, True]) == 0.0


def test_no_question_generated_is_zero_not_nan() -> None:
    value = score([], [])
    assert value == 0.0
    assert not math.isnan(value)


def test_lengths_must_match() -> None:
    with pytest.raises(ValueError, match="noncommittal"):
        score([0.5], [])


def test_cosine() -> None:
    assert cosine([1.0, 0.0], [1.0, 0.0]) == pytest.approx(1.0)
    assert cosine([1.0, 0.0], [0.0, 2.0]) == pytest.approx(0.0)
    assert cosine([3.0, 4.0], [6.0, 8.0]) == pytest.approx(1.0)
    assert cosine([0.0, 0.0], [1.0, 1.0]) == 0.0
    with pytest.raises(ValueError, match="dimension"):
        cosine([1.0], [1.0, 2.0])
