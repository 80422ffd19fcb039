"""context_recall: the share of the reference's statements attributable to the retrieved contexts.

Steps: ``statements`` (reference, with the question), then ``verify`` of each
against all contexts joined by newlines. score = attributed / total; no
reference statements → unscoreable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from monitor.judges.steps import join_contexts
from monitor.metrics import _steps as st
from monitor.metrics._base import StepRunner, mean_verdict, unscoreable
from monitor.records import Interaction, MetricResult

NAME = "context_recall"


#: attributed / total; NaN with no reference statement.
score = mean_verdict


@dataclass(frozen=True)
class ContextRecall:
    name: ClassVar[str] = NAME
    needs_reference: ClassVar[bool] = True

    async def evaluate(self, steps: StepRunner, interaction: Interaction) -> MetricResult:
        assert interaction.reference is not None
        found = await st.statements(
            steps, NAME, interaction.reference, question=interaction.user_input
        )
        statements = found.statements
        if not statements:
            return unscoreable(NAME, "no statements in the reference")
        context = join_contexts(interaction.context_texts)
        read = await st.verify(steps, NAME, context, statements, read_after=found.read_after)
        verdicts = read.verdicts
        return MetricResult(
            metric=NAME,
            score=score([v.verdict for v in verdicts]),
            details={"statements": st.statement_details(statements, verdicts)},
        )
