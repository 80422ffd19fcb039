from __future__ import annotations

import math

import pytest

from monitor.budget import AdaptiveRate, TokenBudget
from monitor.config import TokenBudgetSpec
from monitor.judges import BudgetExhausted


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_reserve_and_reconcile() -> None:
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("1000/h"), clock=clock)
    budget.reserve(600)
    assert budget.remaining() == 400
    with pytest.raises(BudgetExhausted) as info:
        budget.reserve(500)
    assert info.value.reason == "budget" and info.value.available == 400
    budget.reconcile(600, 450)
    assert budget.spent == 450 and budget.remaining() == 550
    budget.reserve(550)
    assert budget.exhausted()


def test_window_rolls_over_and_carries_open_reservations() -> None:
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("1000/m"), clock=clock)
    budget.reserve(300)
    budget.reconcile(300, 300)
    budget.reserve(200)  # still open at the window change
    clock.now += 61
    assert budget.spent == 0
    assert budget.remaining() == 800
    budget.reconcile(200, 150)
    assert budget.spent == 150
    assert budget.seconds_left() == pytest.approx(59)


def test_unlimited_never_refuses() -> None:
    budget = TokenBudget(TokenBudgetSpec.parse("0"))
    budget.reserve(10**9)
    assert math.isinf(budget.remaining()) and not budget.exhausted()


def test_spend_never_exceeds_the_budget_under_load() -> None:
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("10000/m"), clock=clock)
    spent_per_window: dict[int, int] = {}
    for step in range(2000):
        clock.now = 1000.0 + step * 0.1
        try:
            budget.reserve(120)
        except BudgetExhausted:
            continue
        budget.reconcile(120, 100 + step % 20)
        window = int((clock.now - 1000.0) // 60)
        spent_per_window[window] = spent_per_window.get(window, 0) + 100 + step % 20
    assert spent_per_window and max(spent_per_window.values()) <= 10000


def test_adaptive_rate_spreads_the_budget_over_the_window() -> None:
    """Offered 10 records/s at 100 tokens each = 60k/min against 15k/min: scale ≈ 0.25."""
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("15000/m"), clock=clock)
    adaptive = AdaptiveRate(budget, horizon_seconds=10, clock=clock)
    assert adaptive.scale() == 1.0  # no spend seen yet
    scored_at: list[float] = []
    credit = 0.0
    for step in range(600):  # one minute in 0.1 s steps
        clock.now = 1000.0 + step * 0.1
        adaptive.offered(1.0)
        credit += adaptive.scale()
        if credit >= 1.0:  # keep a record with probability = scale (deterministic thinning)
            credit -= 1.0
            try:
                budget.reserve(100)
            except BudgetExhausted:
                continue
            budget.reconcile(100, 100)
            adaptive.spent(100)
            scored_at.append(clock.now - 1000.0)
    assert budget.spent <= 15000
    # the budget lasted: records were still scored in the last tenth of the window
    assert max(scored_at) > 54
    # and it was used: at least 80% spent
    assert budget.spent >= 12000


def test_a_burst_the_window_can_pay_for_is_not_thinned() -> None:
    """300 records in half a second, 1000 tokens each, against 100M/h: scale stays 1."""
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("100m/h"), clock=clock)
    adaptive = AdaptiveRate(budget, clock=clock)
    scales = []
    for i in range(300):
        clock.now = 1000.0 + i * 0.5 / 300
        adaptive.offered(1.0)
        scales.append(adaptive.scale())
        budget.reserve(1000)
        budget.reconcile(1000, 1000)
        adaptive.spent(1000)
    assert min(scales) == 1.0


def test_the_rate_drops_once_the_window_is_projected_to_run_out() -> None:
    """A steady 10 records/s at 1000 tokens = 36M/h against 24k/h: the sustainable share."""
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("24000/h"), clock=clock)
    adaptive = AdaptiveRate(budget, clock=clock)
    for step in range(6000):  # ten minutes
        clock.now = 1000.0 + step * 0.1
        adaptive.offered(1.0)
        adaptive.spent(1000)
    expected = budget.remaining() / (10 * budget.seconds_left() * 1000)
    assert adaptive.scale() == pytest.approx(expected, rel=0.05)
    assert adaptive.scale() < 0.001
