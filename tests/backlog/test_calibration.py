"""The calibration estimator against simulated traffic whose truth is known."""

from __future__ import annotations

import numpy as np
import pytest

from monitor.backlog.calibration import Cell, Traffic, at_edge, estimate, stratum

P = 0.5  # the sample rate
SHARE = 0.05  # the control share


def simulate(
    seed: int,
    *,
    n: int = 20_000,
    rate: float = 0.08,
    sensitivity: float = 0.6,
    false_positive: float = 0.06,
    reviewed_flags: int = 120,
) -> tuple[float, list[Cell]]:
    """(the true hallucination rate of all n interactions, the backlog as cells)."""
    rng = np.random.default_rng(seed)
    truth = rng.random(n) < rate
    scored = rng.random(n) < P
    flagged = np.where(truth, rng.random(n) < sensitivity, rng.random(n) < false_positive)
    other = ~flagged & (rng.random(n) < 0.1)  # another flag, independent of the truth
    control = ~flagged & ~other & (rng.random(n) < SHARE)

    cells: list[Cell] = []

    def add(reasons: tuple[str, ...], mask: np.ndarray, weight: float, verdict: str | None) -> None:
        k = int(mask.sum())
        if k:
            verdicts = {} if verdict is None else {reasons[0]: verdict}
            cells.append(Cell(reasons, verdicts, k, k * weight, k * weight**2, k * weight**2))

    in_flagged = np.flatnonzero(scored & flagged)
    picked = np.zeros(n, dtype=bool)
    picked[rng.choice(in_flagged, size=min(reviewed_flags, len(in_flagged)), replace=False)] = True
    f = scored & flagged
    add(("hallucination",), f & picked & truth, 1 / P, "confirmed")
    add(("hallucination",), f & picked & ~truth, 1 / P, "false_alarm")
    add(("hallucination",), f & ~picked, 1 / P, None)
    add(("low_relevancy",), scored & other, 1 / P, None)
    c = scored & control
    w = 1 / (P * SHARE)
    add(("control",), c & truth, w, "confirmed")
    add(("control",), c & ~truth, w, "false_alarm")
    return float(truth.mean()), cells


def test_strata() -> None:
    assert stratum(["low_relevancy", "hallucination"]) == "flagged"
    assert stratum(["control"]) == "control"
    assert stratum(["low_utility", "noncommittal"]) == "other"


def test_interval_covers_the_truth_95_percent_and_beats_the_raw_rate() -> None:
    seeds = range(300)
    covered = 0
    raw_error = calibrated_error = 0.0
    for seed in seeds:
        truth, cells = simulate(seed)
        result = estimate(cells, draws=4000, seed=seed)
        assert result.calibrated_rate is not None and result.raw_rate is not None
        assert result.lower is not None and result.upper is not None
        assert result.lower <= result.calibrated_rate <= result.upper
        covered += result.lower <= truth <= result.upper
        raw_error += abs(result.raw_rate - truth)
        calibrated_error += abs(result.calibrated_rate - truth)
    coverage = covered / len(seeds)
    # 300 seeds: the binomial standard error at 95 % is 1.3 points
    assert 0.915 <= coverage <= 0.98, coverage
    # the judge over-flags (6 % false positives on 92 %) and misses 40 %: raw is ~2 points off
    assert calibrated_error < 0.5 * raw_error, (calibrated_error, raw_error)


def test_precision_per_reason_and_the_control_share() -> None:
    truth, cells = simulate(1, rate=0.1, sensitivity=0.9, false_positive=0.0)
    result = estimate(cells)
    assert result.flag_precision == {"hallucination": 1.0, "low_relevancy": None}
    assert result.reviewed["hallucination"] == 120
    assert result.control_hallucination_share is not None
    assert 0.0 <= result.control_hallucination_share < 0.05  # misses: 10 % of 10 %, diluted
    assert result.calibrated_rate == pytest.approx(truth, abs=0.02)


def test_not_enough_verdicts_gives_no_rate_rather_than_zero() -> None:
    unreviewed = [
        Cell(("hallucination",), {}, 10, 10.0, 10.0, 10.0),
        Cell(("control",), {}, 5, 500.0, 50000.0, 50000.0),
    ]
    result = estimate(unreviewed)
    assert result.raw_rate == pytest.approx(10 / 510)
    assert result.calibrated_rate is None and result.lower is None
    assert result.flag_precision == {"hallucination": None}
    assert len(result.missing) == 2
    no_controls = estimate([Cell(("hallucination",), {"hallucination": "confirmed"}, 3, 3, 3, 3)])
    assert no_controls.raw_rate is None and no_controls.calibrated_rate is None
    assert no_controls.flag_precision == {"hallucination": 1.0}
    assert no_controls.missing[0].startswith("no control answers: no unflagged answer has been")
    assert "control_share = 0" not in no_controls.missing[0]  # a guess at a cause, often wrong


def test_unsure_counts_as_unreviewed_and_the_estimate_is_reproducible() -> None:
    cells = [
        Cell(("hallucination",), {"hallucination": "confirmed"}, 6, 6, 6, 6),
        Cell(("hallucination",), {"hallucination": "false_alarm"}, 2, 2, 2, 2),
        Cell(("hallucination",), {"hallucination": "unsure"}, 50, 50, 50, 50),
        Cell(("control",), {"control": "false_alarm"}, 20, 2000, 200000, 200000),
    ]
    first = estimate(cells)
    assert first.flag_precision["hallucination"] == pytest.approx(0.75)
    assert first.reviewed["hallucination"] == 8
    assert first.verdicts == 78
    # 58 flagged out of 2058: 75 % of them confirmed, none of the unflagged
    assert first.calibrated_rate == pytest.approx(58 * 0.75 / 2058)
    assert estimate(cells) == first


def test_answers_without_a_faithfulness_score_count_for_precision_not_for_the_rate() -> None:
    cells = [
        Cell(("hallucination",), {"hallucination": "confirmed"}, 2, 2, 2, 2),
        Cell(("control",), {"control": "false_alarm"}, 4, 8, 16, 16),
        Cell(
            ("noncommittal",), {"noncommittal": "confirmed"}, 5, 5, 5, 5, faithfulness_scored=False
        ),
    ]
    result = estimate(cells)
    assert result.flag_precision["noncommittal"] == 1.0
    assert result.raw_rate == pytest.approx(2 / 10)
    assert result.calibrated_rate == pytest.approx(2 / 10)


def test_no_context_answers_count_for_precision_not_for_the_rate() -> None:
    """A retrieval failure is no hallucination: neither term of the rate holds it."""
    cells = [
        Cell(("hallucination",), {"hallucination": "confirmed"}, 2, 2, 2, 2),
        Cell(("control",), {"control": "false_alarm"}, 4, 8, 16, 16),
        Cell(("no_context", "low_relevancy"), {"no_context": "confirmed"}, 6, 6, 6, 6),
    ]
    result = estimate(cells)
    assert result.flag_precision["no_context"] == 1.0
    assert result.reviewed["no_context"] == 6
    assert result.other_weight == 0.0  # not in the "other flags" stratum either
    assert result.raw_rate == pytest.approx(2 / 10)
    assert result.calibrated_rate == pytest.approx(2 / 10)


def test_traffic_totals_replace_the_estimated_ones() -> None:
    cells = [
        Cell(("hallucination",), {"hallucination": "confirmed"}, 6, 6, 6, 6),
        Cell(("hallucination",), {"hallucination": "false_alarm"}, 2, 2, 2, 2),
        Cell(("low_relevancy",), {}, 5, 5, 5, 5),
        Cell(("control",), {"control": "confirmed"}, 1, 20, 400, 400),
        Cell(("control",), {"control": "false_alarm"}, 3, 60, 1200, 1200),
    ]
    # estimated: 8 flagged of 8 + 5 + 80; counted: 10 flagged (2 not queued) of 100
    estimated = estimate(cells)
    assert estimated.raw_rate == pytest.approx(8 / 93)
    traffic = Traffic(scored=100, hallucinations=10, scored_weight=100.0, hallucination_weight=10.0)
    counted = estimate(cells, traffic)
    assert counted.traffic == traffic
    assert counted.raw_rate == traffic.raw_rate == pytest.approx(0.10)
    assert counted.calibrated_rate == pytest.approx((10 * 0.75 + 90 * 0.25) / 100)
    assert counted.lower is not None and counted.upper is not None and counted.calibrated_rate
    assert counted.lower < counted.calibrated_rate < counted.upper
    # the raw rate needs no control answers once it is counted; the calibrated one does
    flags_only = estimate(cells[:2], traffic)
    assert flags_only.raw_rate == pytest.approx(0.10) and flags_only.calibrated_rate is None
    assert estimate(cells, Traffic()).raw_rate == estimated.raw_rate  # empty totals: estimated


def test_a_point_on_the_end_of_its_interval_says_why() -> None:
    """No reviewed control answer hallucinated: the point is the interval's lower end, and
    the words say so (the demo's --records 20 case: 2 controls reviewed, none confirmed)."""
    cells = [  # every flagged answer reviewed: their precision is known, not estimated
        Cell(("hallucination",), {"hallucination": "confirmed"}, 3, 3, 3, 3),
        Cell(("hallucination",), {"hallucination": "false_alarm"}, 6, 6, 6, 6),
        Cell(("control",), {"control": "false_alarm"}, 2, 4, 8, 8),
    ]
    traffic = Traffic(scored=17, hallucinations=9, scored_weight=17.0, hallucination_weight=9.0)
    result = estimate(cells, traffic)
    assert result.calibrated_rate == pytest.approx(9 / 17 / 3)  # the demo's 17.6 %
    assert result.control_hallucination_share == 0.0
    assert result.calibrated_rate is not None and result.lower is not None
    assert result.upper is not None and result.upper > result.calibrated_rate
    assert result.lower == result.calibrated_rate  # every draw allows some misses: above it
    said = at_edge(result.calibrated_rate, result.lower, result.upper,
                   result.flag_precision["hallucination"], 0.0, 2)  # fmt: skip
    assert said is not None and said.startswith("at the interval's lower end: none of the 2")
    inside = [
        Cell(("hallucination",), {"hallucination": "confirmed"}, 30, 30, 30, 30),
        Cell(("hallucination",), {"hallucination": "false_alarm"}, 60, 60, 60, 60),
        Cell(("control",), {"control": "confirmed"}, 5, 40, 320, 320),
        Cell(("control",), {"control": "false_alarm"}, 45, 360, 2880, 2880),
    ]
    fine = estimate(inside)
    assert fine.lower is not None and fine.upper is not None and fine.calibrated_rate
    assert fine.lower < fine.calibrated_rate < fine.upper
    assert at_edge(fine.calibrated_rate, fine.lower, fine.upper, 1 / 3, 0.1, 50) is None
