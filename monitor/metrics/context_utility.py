"""context_utility: context precision without a reference.

See docs/metrics.md, "How the scores are computed".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from monitor.metrics import _steps as st
from monitor.metrics._base import StepRunner, unscoreable
from monitor.metrics.context_precision import average_precision, context_details
from monitor.records import Interaction, MetricResult

NAME = "context_utility"

score = average_precision


@dataclass(frozen=True)
class ContextUtility:
    name: ClassVar[str] = NAME
    needs_reference: ClassVar[bool] = False

    async def evaluate(self, steps: StepRunner, interaction: Interaction) -> MetricResult:
        if not interaction.retrieved_contexts:
            return unscoreable(NAME, "no contexts")
        question, answer, contexts = (
            interaction.user_input,
            interaction.response,
            interaction.context_texts,
        )
        grounded = await st.ground(steps, NAME, question, answer, contexts)
        if grounded is not None:
            verdicts = grounded.contexts
        else:
            verdicts = await st.usefulness(steps, NAME, question, answer, contexts)
        return MetricResult(
            metric=NAME,
            score=average_precision([v.verdict for v in verdicts]),
            details={"contexts": context_details(verdicts)},
        )
