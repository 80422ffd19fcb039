"""precision_at_k: the share of retrieved contexts useful for the reference, order ignored.

Step: the same ``usefulness`` verdicts as context_precision (one call serves
both in the frugal pattern). score = mean verdict; no contexts → unscoreable.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from monitor.metrics import _steps as st
from monitor.metrics._base import NAN, StepRunner, unscoreable
from monitor.metrics.context_precision import context_details
from monitor.records import Interaction, MetricResult

NAME = "precision_at_k"


def score(verdicts: Sequence[int]) -> float:
    """Mean of the verdicts; NaN with no contexts."""
    if not verdicts:
        return NAN
    return sum(verdicts) / len(verdicts)


@dataclass(frozen=True)
class PrecisionAtK:
    name: ClassVar[str] = NAME
    needs_reference: ClassVar[bool] = True

    async def evaluate(self, steps: StepRunner, interaction: Interaction) -> MetricResult:
        assert interaction.reference is not None
        if not interaction.retrieved_contexts:
            return unscoreable(NAME, "no contexts")
        verdicts = await st.usefulness(
            steps, NAME, interaction.user_input, interaction.reference, interaction.context_texts
        )
        return MetricResult(
            metric=NAME,
            score=score([v.verdict for v in verdicts]),
            details={"k": len(verdicts), "contexts": context_details(verdicts)},
        )
