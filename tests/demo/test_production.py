"""The calibrated rate at production's control share, simulated from a run's records."""

from __future__ import annotations

from monitor.config import Settings
from monitor.demo.production import CONTROL_SHARE, at_production
from monitor.demo.statistics import Outcome


def population() -> dict[str, Outcome]:
    """300 records shaped like the demo's: most flagged, a third of the hallucination flags
    right, one unflagged answer in six a hallucination."""
    records = [
        Outcome("hallucinated" if i < 43 else "faithful", ("hallucination",), True, 1.0, 0)
        for i in range(131)
    ]
    records += [
        Outcome("off_topic" if i < 60 else "faithful", ("low_relevancy",), False, 1.0, 0)
        for i in range(105)
    ]
    records += [Outcome("hallucinated" if i < 11 else "faithful", (), False, 1.0, 0)
                for i in range(64)]  # fmt: skip
    records.append(Outcome(None, (), False, 1.0, 0))  # unlabelled: not in the simulation
    return {f"id-{i:03d}": o for i, o in enumerate(records)}


def test_the_default_is_the_settings_control_share() -> None:
    assert CONTROL_SHARE == Settings().control_share == 0.01


def test_few_controls_at_production_share_widen_the_interval() -> None:
    """At 1 % the same reviewing holds well under one control answer on average, so many
    rounds cannot calibrate and the rest have a wide interval; at the demo's 50 % the
    interval is narrow and every round calibrates."""
    production = at_production(population(), 255)
    demo_like = at_production(population(), 255, control_share=0.5)
    assert production is not None and demo_like is not None
    # expected controls: 255 x (64 x 0.01) / (236 + 64 x 0.01) = 0.69
    assert 0.4 < production.controls < 1.0
    assert 0 < production.calibrated < production.rounds
    assert demo_like.calibrated == demo_like.rounds and 25 < demo_like.controls < 40
    assert production.low is not None and production.high is not None
    assert demo_like.low is not None and demo_like.high is not None
    assert production.high - production.low > 2 * (demo_like.high - demo_like.low)


def test_the_simulation_is_deterministic_in_any_arrival_order_and_needs_reviews() -> None:
    arrived = population()
    reversed_arrival = dict(reversed(list(arrived.items())))
    assert at_production(arrived, 255) == at_production(reversed_arrival, 255)
    assert at_production(arrived, 0) is None
    assert at_production({"x": Outcome(None, (), False, 1.0, 0)}, 10) is None
