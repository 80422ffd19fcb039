"""faithfulness: the share of the response's statements that the retrieved contexts support.

Steps: ``statements`` (response, with the question for reference resolution),
then ``verify`` of every statement against all contexts joined by newlines.
score = supported / statements; no statements → unscoreable. With no context
nothing supports any statement and the score is 0, as defined (`monitor.flags`
calls that record ``no_context``: a retrieval failure, not a hallucination). An
answer that only declines, defers or says it does not know is unscoreable too,
never 0: it asserts nothing that could be unfaithful (details ``noncommittal:
true``, read by `monitor.flags`). Such an answer is recognised by the rule both
judges share (`monitor.text.evasive`), before any judge is asked, or by the
judge's own ``statements`` answer. When the runner fuses
(`StepRunner.fuse_grounding`) both steps come from the one ``grounding``
request shared with context_utility; when that answer is malformed, from the
basic steps.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from monitor.judges.steps import StatementVerdict, join_contexts
from monitor.metrics import _steps as st
from monitor.metrics._base import NAN, StepRunner, unscoreable
from monitor.records import Interaction, MetricResult
from monitor.text import evasive

NAME = "faithfulness"

#: the reason of a noncommittal answer's unscoreable result
NONCOMMITTAL = "noncommittal answer"


def score(verdicts: Sequence[int]) -> float:
    """supported / total; NaN when there is no statement."""
    if not verdicts:
        return NAN
    return sum(verdicts) / len(verdicts)


@dataclass(frozen=True)
class Faithfulness:
    name: ClassVar[str] = NAME
    needs_reference: ClassVar[bool] = False

    async def evaluate(self, steps: StepRunner, interaction: Interaction) -> MetricResult:
        question, contexts = interaction.user_input, interaction.context_texts
        if evasive.noncommittal(interaction.response):
            return unscoreable(NAME, NONCOMMITTAL, noncommittal=True)
        grounded = None
        if steps.fuse_grounding:
            grounded = await st.ground(steps, NAME, question, interaction.response, contexts)
        verdicts: list[StatementVerdict]
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
            verdicts = await st.verify_verbose(steps, NAME, join_contexts(contexts), statements)
        if not statements:
            return unscoreable(NAME, "no statements in the response")
        return MetricResult(
            metric=NAME,
            score=score([v.verdict for v in verdicts]),
            details={"statements": st.statement_details(statements, verdicts)},
        )
