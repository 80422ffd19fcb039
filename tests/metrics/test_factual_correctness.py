import math

import numpy as np
import pytest

from monitor.metrics.factual_correctness import FactualCorrectness, fbeta, round2, score


def test_worked_example_f1_is_exactly_half() -> None:
    # one response claim supported, one not; one reference claim missing from the response
    assert score([1, 0], [1, 0], mode="f1") == 0.5
    assert score([1, 0], [1, 0], mode="precision") == 0.5
    assert score([1, 0], [1, 0], mode="recall") == 0.5


def test_modes() -> None:
    # tp=2, fp=1, fn=3 → P = 2/3, R = 2/5
    assert score([1, 1, 0], [0, 0, 0, 1, 1], mode="precision") == 0.67
    assert score([1, 1, 0], [0, 0, 0, 1, 1], mode="recall") == 0.4
    assert score([1, 1, 0], [0, 0, 0, 1, 1], mode="f1") == 0.5  # 2PR/(P+R) = 0.5


def test_beta_weights_recall() -> None:
    p, r = 2 / 3, 2 / 5
    assert fbeta(p, r, 2.0) == pytest.approx(5 * p * r / (4 * p + r))
    assert score([1, 1, 0], [0, 0, 0, 1, 1], mode="f1", beta=2.0) == float(
        np.round(fbeta(2 / (3 + 1e-8), 2 / (5 + 1e-8), 2.0), 2)
    )
    assert score([1, 1, 0], [0, 0, 0, 1, 1], mode="f1", beta=2.0) == 0.43
    assert score([1, 1, 0], [0, 0, 0, 1, 1], mode="f1", beta=0.5) == 0.59


def test_rounding_is_half_to_even() -> None:
    # exact binary halves go to the even neighbour (numpy), not always up
    assert round2(0.125) == 0.12
    assert round2(0.375) == 0.38
    assert round2(0.625) == 0.62
    assert round2(0.875) == 0.88
    assert round2(0.5) == 0.5


def test_epsilon_pulls_exact_halves_below() -> None:
    # P = 3/(8 + 1e-8) is just under 0.375, so it rounds down whatever the tie rule
    assert score([1, 1, 1, 0, 0, 0, 0, 0], [], mode="precision") == 0.37
    assert score([1] * 5 + [0] * 3, [], mode="precision") == 0.62
    assert score([1], [], mode="precision") == 1.0


def test_zero_when_nothing_agrees() -> None:
    assert fbeta(0.0, 0.0) == 0.0
    assert score([0, 0], [0], mode="f1") == 0.0
    # a response without claims against a reference with claims: P = R = 0 → 0
    assert score([], [1, 1], mode="f1") == 0.0


def test_unscoreable_when_the_needed_side_has_no_claims() -> None:
    assert math.isnan(score([], [1], mode="precision"))
    assert math.isnan(score([1], [], mode="recall"))
    assert math.isnan(score([], [], mode="f1"))


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="mode"):
        FactualCorrectness(mode="f2")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="beta"):
        FactualCorrectness(beta=0)
