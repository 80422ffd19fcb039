"""When a scored record is suspicious: pure rules over its online scores.

Used by the Prometheus sink (hallucination counters) and the backlog sink
(what gets queued, with which reasons). Defined once here.
"""

from __future__ import annotations

from collections.abc import Mapping

from monitor.records import ScoredRecord

HALLUCINATION = "hallucination"
LOW_RELEVANCY = "low_relevancy"
LOW_UTILITY = "low_utility"
NONCOMMITTAL = "noncommittal"
CONTROL = "control"
#: every reason a record is queued in the backlog for
FLAG_REASONS = (HALLUCINATION, LOW_RELEVANCY, LOW_UTILITY, NONCOMMITTAL, CONTROL)

#: metric -> flag reason when its score falls below the metric's threshold
_BELOW_THRESHOLD = {
    "faithfulness": HALLUCINATION,
    "response_relevancy": LOW_RELEVANCY,
    "context_utility": LOW_UTILITY,
}

DEFAULT_THRESHOLD = 0.5


def threshold(thresholds: Mapping[str, float], metric: str) -> float:
    return thresholds.get(metric, DEFAULT_THRESHOLD)


def is_hallucination(record: ScoredRecord, thresholds: Mapping[str, float]) -> bool | None:
    """True/False when faithfulness was scored, None when it was not (or is unscoreable)."""
    result = record.results.get("faithfulness")
    if result is None or not result.scoreable:
        return None
    return result.score < threshold(thresholds, "faithfulness")


def flag_reasons(record: ScoredRecord, thresholds: Mapping[str, float]) -> list[str]:
    """The reasons to queue ``record`` for a golden set, in a stable order (may be empty)."""
    reasons: list[str] = []
    for metric, reason in _BELOW_THRESHOLD.items():
        result = record.results.get(metric)
        if result is not None and result.scoreable and result.score < threshold(thresholds, metric):
            reasons.append(reason)
    relevancy = record.results.get("response_relevancy")
    faithfulness = record.results.get("faithfulness")
    if (relevancy is not None and relevancy.details.get("all_noncommittal") is True) or (
        faithfulness is not None and faithfulness.details.get("noncommittal") is True
    ):
        reasons.append(NONCOMMITTAL)
    return reasons
