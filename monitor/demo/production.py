"""The calibrated rate the demo's run would give at production's control share: simulated.

The demo queues half the unflagged answers as controls and its played reviewer judges
every queued answer, so its calibrated interval is narrow. Production queues
``control_share`` of them (1 % by default) and reviewers get through what they can, in
queue order. `at_production` replays that on the run's own records: each round takes as
many answers as the played reviewer judged, drawn from the queue production would fill
(every flagged record, and an unflagged one at the control share's odds), gives each the
verdicts the labels give, and calibrates them with `monitor.backlog.calibration.estimate`
against the run's traffic totals scaled up a thousandfold (the reviews are a small part
of a large queue, as in production). See docs/demo.md, "The report".
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from monitor.backlog.calibration import Cell, Traffic, estimate
from monitor.config import Settings
from monitor.demo.statistics import Outcome
from monitor.demo.traffic import played_verdict
from monitor.flags import CONTROL

#: production's control share: the setting's default
CONTROL_SHARE: float = Settings.model_fields["control_share"].default
ROUNDS = 200
SEED = 20261204
#: how much larger than the run the simulated traffic is (the reviews are a small part of it)
SCALE = 1000.0
#: Monte Carlo draws of each round's interval (the calibration's own default is for one
#: estimate; 200 rounds of it would take seconds)
DRAWS = 4000


@dataclass(frozen=True)
class AtProduction:
    """What ``rounds`` simulated review rounds at production's control share gave."""

    control_share: float
    #: answers reviewed in each round (as many as the played reviewer judged)
    reviewed: int
    rounds: int
    #: control answers among them, on average over the rounds
    controls: float
    #: rounds with a calibrated rate (the others had no verdict on a control answer)
    calibrated: int
    #: medians over the calibrated rounds: the rate and its 95 % interval's ends
    rate: float | None
    low: float | None
    high: float | None

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def at_production(
    outcomes: Mapping[str, Outcome],
    reviewed: int,
    *,
    control_share: float = CONTROL_SHARE,
    rounds: int = ROUNDS,
    seed: int = SEED,
) -> AtProduction | None:
    """The simulation (module docstring) over the labelled ``outcomes`` (by interaction id,
    taken in id order: the draws do not depend on the order records arrived in); None
    when there is nothing to simulate (no labelled record, or no review)."""
    population = [o for _, o in sorted(outcomes.items()) if o.label is not None]
    if not population or reviewed <= 0 or control_share <= 0:
        return None
    odds = np.array([1.0 if o.reasons else control_share for o in population])
    scored = [o for o in population if o.hallucinated is not None]
    scored_weight = sum(o.weight for o in scored)
    if scored_weight <= 0:
        return None
    traffic = Traffic(
        scored=round(len(scored) * SCALE),
        hallucinations=round(sum(1 for o in scored if o.hallucinated) * SCALE),
        scored_weight=scored_weight * SCALE,
        hallucination_weight=sum(o.weight for o in scored if o.hallucinated) * SCALE,
    )
    rng = np.random.default_rng(seed)
    controls: list[int] = []
    results: list[tuple[float, float, float]] = []
    for number in range(rounds):
        picks = rng.choice(len(population), size=reviewed, p=odds / odds.sum())
        cells = [_cell(population[i], control_share) for i in picks]
        controls.append(sum(1 for c in cells if c.reasons == (CONTROL,)))
        cal = estimate(cells, traffic, draws=DRAWS, seed=seed + number)
        if cal.calibrated_rate is not None and cal.lower is not None and cal.upper is not None:
            results.append((cal.calibrated_rate, cal.lower, cal.upper))
    return AtProduction(
        control_share=control_share,
        reviewed=reviewed,
        rounds=rounds,
        controls=sum(controls) / rounds,
        calibrated=len(results),
        rate=statistics.median(r[0] for r in results) if results else None,
        low=statistics.median(r[1] for r in results) if results else None,
        high=statistics.median(r[2] for r in results) if results else None,
    )


def _cell(outcome: Outcome, control_share: float) -> Cell:
    """One reviewed answer: its reasons (control when unflagged), the labels' verdicts, its
    weight 1/π (π: the sample rate, times the control share for a control)."""
    assert outcome.label is not None
    reasons = outcome.reasons or (CONTROL,)
    weight = outcome.weight / (control_share if reasons == (CONTROL,) else 1.0)
    return Cell(
        reasons=reasons,
        verdicts={r: played_verdict(r, outcome.label) for r in reasons},
        n=1,
        weight=weight,
        weight_squares=weight * weight,
        answer_weight_squares=weight * weight,
        faithfulness_scored=outcome.hallucinated is not None,
    )
