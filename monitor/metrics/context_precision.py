"""context_precision: were the contexts useful for the reference, the useful ones ranked first?

Step: ``usefulness`` of each context (retrieval order) against the reference.
score = average precision Σₖ precision@k·vₖ / (Σₖ vₖ + 1e-10); no contexts →
unscoreable. `average_precision` is also context_utility's score.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from monitor.judges.steps import ContextVerdict
from monitor.metrics import _steps as st
from monitor.metrics._base import NAN, StepRunner, unscoreable
from monitor.records import Interaction, MetricResult

NAME = "context_precision"

#: Ragas's guard against an empty denominator: one useful context scores 0.9999999999
AP_EPSILON = 1e-10


def average_precision(verdicts: Sequence[int]) -> float:
    """Σₖ precision@k·vₖ / (Σₖ vₖ + 1e-10), k over retrieval order; NaN with no contexts."""
    if not verdicts:
        return NAN
    numerator = 0.0
    useful = 0
    for k, v in enumerate(verdicts, start=1):
        useful += v
        numerator += (useful / k) * v
    return numerator / (useful + AP_EPSILON)


score = average_precision


def context_details(verdicts: Sequence[ContextVerdict]) -> list[dict[str, Any]]:
    return [{"index": i, "verdict": v.verdict, "reason": v.reason} for i, v in enumerate(verdicts)]


@dataclass(frozen=True)
class ContextPrecision:
    """Asks the ``usefulness`` of each context for the reference; `result` scores them."""

    name: ClassVar[str] = NAME
    needs_reference: ClassVar[bool] = True

    async def evaluate(self, steps: StepRunner, interaction: Interaction) -> MetricResult:
        assert interaction.reference is not None
        if not interaction.retrieved_contexts:
            return unscoreable(self.name, "no contexts")
        verdicts = await st.usefulness(
            steps,
            self.name,
            interaction.user_input,
            interaction.reference,
            interaction.context_texts,
        )
        return self.result(verdicts)

    def result(self, verdicts: list[ContextVerdict]) -> MetricResult:
        return MetricResult(
            metric=NAME,
            score=average_precision([v.verdict for v in verdicts]),
            details={"contexts": context_details(verdicts)},
        )
