"""semantic_similarity: cosine similarity of the response's and the reference's embeddings.

With a threshold the score is 1.0 when the similarity reaches it, else 0.0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from monitor.metrics._base import StepRunner, cosine
from monitor.records import Interaction, MetricResult

NAME = "semantic_similarity"


def score(
    response_vector: Sequence[float],
    reference_vector: Sequence[float],
    *,
    threshold: float | None = None,
) -> float:
    """cosine(response, reference), or 0/1 against ``threshold``."""
    similarity = cosine(response_vector, reference_vector)
    if threshold is None:
        return similarity
    return 1.0 if similarity >= threshold else 0.0


@dataclass(frozen=True)
class SemanticSimilarity:
    name: ClassVar[str] = NAME
    needs_reference: ClassVar[bool] = True
    threshold: float | None = None

    async def evaluate(self, steps: StepRunner, interaction: Interaction) -> MetricResult:
        reference = interaction.reference
        assert reference is not None
        if steps.call_pattern == "frugal":
            response_vector, reference_vector = await steps.embed(
                [interaction.response, reference], NAME
            )
        else:
            [response_vector] = await steps.embed([interaction.response], NAME)
            [reference_vector] = await steps.embed([reference], NAME)
        similarity = cosine(response_vector, reference_vector)
        return MetricResult(
            metric=NAME,
            score=score(response_vector, reference_vector, threshold=self.threshold),
            details={"similarity": similarity, "threshold": self.threshold},
        )
