"""bench.spike on fixed verdicts: the shipped alert rules, run by the real promtool over three
days of composed counters, page on a spike that a specific judge sees and stay quiet for one
whose flags saturate. The full bench scores real pools with the shipped judge (by hand)."""

from __future__ import annotations

from bench.spike import DAY, Plan, Verdicts, compose, run
from tests.support.tools import require_tool


def verdicts(false_flags: float, recall: float, n: int = 200) -> Verdicts:
    """A pool whose judge flags exactly these shares of its faithful and hallucinated answers."""
    return Verdicts(
        faithful=[k < false_flags * n for k in range(n)],
        hallucinated=[k < recall * n for k in range(n)],
    )


def test_the_composed_traffic_has_its_spike() -> None:
    plan = Plan(per_minute=30)
    flagged, scored = compose(verdicts(0.0, 1.0), plan, seed=1)
    assert len(scored) == plan.minutes == 3 * DAY and scored[-1] == 30 * plan.minutes
    # with a judge that is always right, flags are the hallucinated answers drawn
    before = flagged[DAY - 1] - flagged[DAY - 61]
    during = flagged[DAY + 59] - flagged[DAY - 1]
    assert 0.02 * 1800 < before < 0.09 * 1800 and 0.18 * 1800 < during < 0.32 * 1800


def test_a_specific_judge_pages_within_the_hour_and_never_on_the_control_day() -> None:
    require_tool("promtool", "prometheus")
    outcome = run(verdicts(0.02, 0.8), Plan(), seed=0)
    assert outcome.to_fire is not None and 15 <= outcome.to_fire <= 60
    assert outcome.false_fires == 0


def test_a_saturated_judge_never_pages() -> None:
    """Flags on half the faithful answers (the local judge's default on long answers):
    a spike from 5 % to 25 % moves the raw rate about 1.2×, and the 2× rule stays quiet."""
    require_tool("promtool", "prometheus")
    outcome = run(verdicts(0.5, 0.9), Plan(), seed=0)
    assert outcome.to_fire is None and outcome.false_fires == 0
