"""response_relevancy: do questions generated from the response alone resemble the user's?

See docs/metrics.md, "How the scores are computed".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from monitor.metrics import _steps as st
from monitor.metrics._base import StepRunner, cosine
from monitor.records import Interaction, MetricResult

NAME = "response_relevancy"


def score(similarities: Sequence[float], noncommittal: Sequence[bool]) -> float:
    """Mean similarity, zeroed only when every question is noncommittal; 0.0 with no question."""
    if len(similarities) != len(noncommittal):
        raise ValueError("one noncommittal flag per similarity")
    if not similarities:
        return 0.0
    mean = sum(similarities) / len(similarities)
    return 0.0 if all(noncommittal) else mean


@dataclass(frozen=True)
class ResponseRelevancy:
    name: ClassVar[str] = NAME
    needs_reference: ClassVar[bool] = False
    questions: int = 3

    async def evaluate(self, steps: StepRunner, interaction: Interaction) -> MetricResult:
        generated = await st.questions(steps, NAME, interaction.response, self.questions)
        kept = [q for q in generated if q.question.strip()]
        if not kept:
            return MetricResult(
                metric=NAME,
                score=score([], []),
                details={
                    "questions": [],
                    "distinct_questions": [],
                    "all_noncommittal": False,
                    "response_as_question": False,
                },
            )
        texts = [q.question for q in kept]
        if steps.call_pattern == "frugal":
            vectors = await steps.embed([interaction.user_input, *texts], NAME)
            asked, found = vectors[0], vectors[1:]
        else:
            [asked] = await steps.embed([interaction.user_input], NAME)
            found = await steps.embed(texts, NAME)
        similarities = [cosine(asked, v) for v in found]
        flags = [bool(q.noncommittal) for q in kept]
        return MetricResult(
            metric=NAME,
            score=score(similarities, flags),
            details={
                "questions": [
                    {"question": q.question, "noncommittal": f, "similarity": s}
                    for q, f, s in zip(kept, flags, similarities, strict=True)
                ],
                "distinct_questions": list(dict.fromkeys(q.question.strip() for q in kept)),
                "all_noncommittal": all(flags),
                # no question was generated: the response itself was compared (local judge)
                "response_as_question": all(q.is_response for q in kept),
            },
        )
