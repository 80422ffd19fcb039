import math

import pytest

from monitor.metrics import context_utility
from monitor.metrics.context_precision import AP_EPSILON, average_precision, score


def test_same_formula_as_context_utility() -> None:
    assert score is average_precision
    assert context_utility.score is average_precision


def test_irrelevant_then_relevant() -> None:
    assert score([0, 1]) == pytest.approx(0.5, abs=1e-9)
    assert score([0, 1]) == 0.5 / (1 + AP_EPSILON)


def test_denominator_epsilon() -> None:
    assert score([1]) == 0.9999999999000000
    assert f"{score([1]):.10f}" == "0.9999999999"


def test_unscoreable_without_contexts() -> None:
    assert math.isnan(score([]))
