"""When a scored record is suspicious: the flag reasons, pure rules over its online scores.

See docs/metrics.md, "Quality metrics".
"""

from __future__ import annotations

from collections.abc import Mapping

from monitor.records import ScoredRecord

HALLUCINATION = "hallucination"
LOW_RELEVANCY = "low_relevancy"
LOW_UTILITY = "low_utility"
NONCOMMITTAL = "noncommittal"
NO_CONTEXT = "no_context"
CONTROL = "control"
#: every reason a record is queued in the backlog for
FLAG_REASONS = (HALLUCINATION, NO_CONTEXT, LOW_RELEVANCY, LOW_UTILITY, NONCOMMITTAL, CONTROL)

#: metric -> flag reason when its score falls below the metric's threshold
_BELOW_THRESHOLD = {
    "faithfulness": HALLUCINATION,
    "response_relevancy": LOW_RELEVANCY,
    "context_utility": LOW_UTILITY,
}

#: metric -> the score below which it flags (``RAG_MONITOR_THRESHOLDS`` overrides each).
#: Faithfulness 1: an answer with any claim its context does not support is a
#: hallucination, as the metric's definition says (docs/metrics.md, "The flag rule").
DEFAULT_THRESHOLDS = {"faithfulness": 1.0, "response_relevancy": 0.5, "context_utility": 0.5}


def threshold(thresholds: Mapping[str, float], metric: str) -> float:
    return thresholds.get(metric, DEFAULT_THRESHOLDS.get(metric, 0.5))


def hallucination_rule(thresholds: Mapping[str, float]) -> str:
    """The hallucination rule in force, in one sentence, for wherever the rate is shown."""
    limit = threshold(thresholds, "faithfulness")
    if limit >= 1.0:
        return (
            "an answer counts as a hallucination when any of its claims is not supported "
            "by its retrieved context (faithfulness below 1)"
        )
    return (
        f"an answer counts as a hallucination when less than {limit:.0%} of its claims "
        f"are supported by its retrieved context (faithfulness below {limit:g})"
    )


def has_context(record: ScoredRecord) -> bool:
    """Whether the interaction came with at least one retrieved chunk that has text."""
    return any(c.text.strip() for c in record.interaction.retrieved_contexts)


def is_no_context(record: ScoredRecord) -> bool:
    """Faithfulness was scored, against no context: a retrieval failure (`NO_CONTEXT`)."""
    result = record.results.get("faithfulness")
    return result is not None and result.scoreable and not has_context(record)


def is_hallucination(record: ScoredRecord, thresholds: Mapping[str, float]) -> bool | None:
    """True/False when faithfulness was scored against context; None otherwise.

    None when faithfulness was not scored, is unscoreable, or had no context to be
    faithful to (`is_no_context`): such a record is not part of the hallucination rate.
    """
    result = record.results.get("faithfulness")
    if result is None or not result.scoreable or not has_context(record):
        return None
    return result.score < threshold(thresholds, "faithfulness")


def flag_reasons(record: ScoredRecord, thresholds: Mapping[str, float]) -> list[str]:
    """The reasons to queue ``record`` for a golden set, in a stable order (may be empty)."""
    reasons: list[str] = []
    for metric, reason in _BELOW_THRESHOLD.items():
        result = record.results.get(metric)
        if result is not None and result.scoreable and result.score < threshold(thresholds, metric):
            reasons.append(reason)
    if is_no_context(record):
        # whatever faithfulness says against nothing, the flag is the retrieval's
        reasons = [NO_CONTEXT, *(r for r in reasons if r != HALLUCINATION)]
    relevancy = record.results.get("response_relevancy")
    faithfulness = record.results.get("faithfulness")
    if (relevancy is not None and relevancy.details.get("all_noncommittal") is True) or (
        faithfulness is not None and faithfulness.details.get("noncommittal") is True
    ):
        reasons.append(NONCOMMITTAL)
    return reasons
