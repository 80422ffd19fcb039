"""What the demo measures against its labels: `Tally` (each record's outcome), rates with a
95% Wilson interval, and the confusion matrix of flags against labels.

The Wilson interval is written out here: a closed form of a few lines is not worth a
scipy or statsmodels dependency.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from monitor.flags import flag_reasons, is_hallucination
from monitor.records import ScoredRecord

#: two-sided 95% normal quantile
Z95 = 1.959963984540054


@dataclass(frozen=True)
class Outcome:
    """What the sidecar decided about one scored record."""

    label: str | None
    reasons: tuple[str, ...]
    hallucinated: bool | None
    weight: float
    tokens: int


class Tally:
    """A `monitor.sinks.Sink` that remembers each scored record's outcome (idempotent per id).

    It sits last in the sink list, so a record it holds is in every other sink.
    """

    name = "demo-tally"

    def __init__(self, thresholds: dict[str, float]) -> None:
        self.thresholds = thresholds
        self.outcomes: dict[str, Outcome] = {}

    async def write(self, batch: Sequence[ScoredRecord]) -> None:
        for record in batch:
            label = record.interaction.metadata.get("label")
            self.outcomes[record.interaction.id] = Outcome(
                label=label if isinstance(label, str) else None,
                reasons=tuple(flag_reasons(record, self.thresholds)),
                hallucinated=is_hallucination(record, self.thresholds),
                weight=record.weight,
                tokens=record.usage.total_tokens,
            )

    async def flush(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    @property
    def flagged(self) -> int:
        return sum(1 for o in self.outcomes.values() if o.reasons)


@dataclass(frozen=True)
class RateEstimate:
    """A proportion with a 95% Wilson score interval (on Kish's effective n when weighted)."""

    rate: float | None
    low: float | None
    high: float | None
    #: records, and how many of them had the event (unweighted)
    n: int
    events: int
    effective_n: float
    weighted_events: float
    weighted_total: float
    method: str


def wilson_interval(rate: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``rate`` observed on ``n`` (> 0) trials."""
    if n <= 0:
        raise ValueError("n must be positive")
    z2 = z * z
    denominator = 1.0 + z2 / n
    centre = (rate + z2 / (2 * n)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / n + z2 / (4 * n * n)) / denominator
    # the interval holds the observed rate; at 0 and 1 rounding would leave it a hair outside
    return max(0.0, min(rate, centre - half)), min(1.0, max(rate, centre + half))


def estimate_rate(
    events: Iterable[tuple[bool, float]],
    *,
    weighted_events: float | None = None,
    weighted_total: float | None = None,
) -> RateEstimate:
    """Rate of True among ``(event, weight)`` pairs, weight = 1/p.

    The point estimate is Σw·event / Σw (given explicitly when it comes from
    the exporter's counters); the interval is Wilson's with n = (Σw)² / Σw²,
    which is the plain count when every weight is 1.
    """
    pairs = list(events)
    n = len(pairs)
    count = sum(1 for e, _ in pairs if e)
    total = sum(w for _, w in pairs)
    squares = sum(w * w for _, w in pairs)
    hits = sum(w for e, w in pairs if e)
    if weighted_events is not None:
        hits = weighted_events
    if weighted_total is not None:
        total = weighted_total
    uniform = all(math.isclose(w, pairs[0][1]) for _, w in pairs)
    method = (
        "Wilson score interval, 95%"
        if uniform  # equal weights: the effective n is the count
        else "Wilson score interval, 95%, on Kish's effective sample size (weights 1/p)"
    )
    if n == 0 or total <= 0:
        return RateEstimate(None, None, None, n, count, 0.0, hits, total, method)
    effective = (sum(w for _, w in pairs) ** 2) / squares if squares > 0 else 0.0
    rate = hits / total
    low, high = wilson_interval(min(1.0, max(0.0, rate)), effective)
    return RateEstimate(rate, low, high, n, count, effective, hits, total, method)


@dataclass(frozen=True)
class Confusion:
    """Flags (predicted) against labels (actual)."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "precision": self.precision, "recall": self.recall}


def confusion(pairs: Iterable[tuple[bool, bool]]) -> Confusion:
    """From ``(flagged, actually_bad)`` pairs."""
    counts = Counter(pairs)
    return Confusion(
        tp=counts[(True, True)],
        fp=counts[(True, False)],
        fn=counts[(False, True)],
        tn=counts[(False, False)],
    )
