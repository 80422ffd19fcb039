"""faithfulness: the share of the response's statements that the retrieved contexts support.

See docs/metrics.md, "How the scores are computed".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from monitor.judges.steps import StatementVerdict, join_contexts
from monitor.metrics import _steps as st
from monitor.metrics._base import StepRunner, mean_verdict, unscoreable
from monitor.records import Interaction, MetricResult
from monitor.text import evasive

NAME = "faithfulness"

#: the reason of a noncommittal answer's unscoreable result
NONCOMMITTAL = "noncommittal answer"
#: the details' key of the judge's probability that the answer holds an unsupported claim
#: (the local judge gives one; docs/metrics.md, "The flag rule")
HALLUCINATION_PROBABILITY = "hallucination_probability"
#: the details' key of whether that probability reaches the local judge's cut, written beside
#: it where the local judge's risk screen read an answer another judge scored (an LLM judge):
#: the backlog then knows what both judges said (docs/review.md, "Both judges")
LOCAL_FLAGGED = "local_flagged"


#: supported / total; NaN when there is no statement.
score = mean_verdict


@dataclass(frozen=True)
class Faithfulness:
    name: ClassVar[str] = NAME
    needs_reference: ClassVar[bool] = False

    async def evaluate(self, steps: StepRunner, interaction: Interaction) -> MetricResult:
        question, contexts = interaction.user_input, interaction.context_texts
        if evasive.noncommittal(interaction.response):
            return unscoreable(NAME, NONCOMMITTAL, noncommittal=True)
        grounded = await st.ground(steps, NAME, question, interaction.response, contexts)
        verdicts: list[StatementVerdict]
        probability: float | None = None
        if grounded is not None:
            if grounded.noncommittal:
                return unscoreable(NAME, NONCOMMITTAL, noncommittal=True)
            verdicts = grounded.statements
            statements = [v.statement for v in verdicts]
        else:
            found = await st.statements(steps, NAME, interaction.response, question=question)
            if found.noncommittal:
                return unscoreable(NAME, NONCOMMITTAL, noncommittal=True)
            statements = found.statements
            read = await st.verify(
                steps, NAME, join_contexts(contexts), statements, read_after=found.read_after
            )
            verdicts, probability = read.verdicts, read.hallucination_probability
        if not statements:
            return unscoreable(NAME, "no statements in the response")
        details: dict[str, object] = {"statements": st.statement_details(statements, verdicts)}
        if probability is not None:
            details[HALLUCINATION_PROBABILITY] = probability
        share = score([v.verdict for v in verdicts])
        return MetricResult(metric=NAME, score=share, details=details)
