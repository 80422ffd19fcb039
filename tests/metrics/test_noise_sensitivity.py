import math

import pytest

from monitor.metrics.noise_sensitivity import NoiseSensitivity, score


def test_worked_example() -> None:
    # contexts: [irrelevant, relevant]; the reference's one statement is only in context 1
    g = [[0, 1]]
    # A0 copies the relevant chunk (correct); A1 copies the irrelevant chunk (wrong)
    a = [[0, 1], [1, 0]]
    wrong = [0, 1]
    assert score(g, a, wrong, contexts=2, mode="relevant") == 0.0
    assert score(g, a, wrong, contexts=2, mode="irrelevant") == 0.5


def test_wrong_statement_from_a_relevant_context() -> None:
    g = [[1, 0, 0]]
    a = [[1, 0, 0], [1, 0, 1], [0, 0, 1], [0, 0, 0]]
    wrong = [0, 1, 1, 1]
    # relevant: A1 (wrong, in relevant ctx 0) → 1/4
    assert score(g, a, wrong, contexts=3, mode="relevant") == 0.25
    # irrelevant: A2 (wrong, only in irrelevant ctx 2); A1 excluded: also in a relevant one
    assert score(g, a, wrong, contexts=3, mode="irrelevant") == 0.25


def test_no_relevant_context() -> None:
    g = [[0, 0]]
    a = [[1, 0], [0, 1]]
    assert score(g, a, [1, 1], contexts=2, mode="relevant") == 0.0
    assert score(g, a, [1, 1], contexts=2, mode="irrelevant") == 1.0
    # no reference statements at all: every context is irrelevant
    assert score([], a, [1, 0], contexts=2, mode="irrelevant") == 0.5


def test_correct_statements_never_count() -> None:
    g = [[1, 1]]
    a = [[1, 1], [1, 0]]
    for mode in ("relevant", "irrelevant"):
        assert score(g, a, [0, 0], contexts=2, mode=mode) == 0.0


def test_no_contexts() -> None:
    assert score([], [[], []], [1, 1], contexts=0, mode="relevant") == 0.0
    assert score([], [[], []], [1, 1], contexts=0, mode="irrelevant") == 0.0


def test_unscoreable_without_response_statements() -> None:
    assert math.isnan(score([[1]], [], [], contexts=1))


def test_shape_errors() -> None:
    with pytest.raises(ValueError, match="wrong flag"):
        score([[1]], [[1]], [], contexts=1)
    with pytest.raises(ValueError, match="columns"):
        score([[1, 0]], [[1]], [1], contexts=1)
    with pytest.raises(ValueError, match="mode"):
        NoiseSensitivity(mode="both")  # type: ignore[arg-type]
