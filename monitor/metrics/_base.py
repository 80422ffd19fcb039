"""What every metric module shares: the step runner it asks, and small pure helpers.

See docs/design.md, "Steps and call patterns".
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel

from monitor.judges import Prompt
from monitor.records import Interaction, MetricResult

OutT = TypeVar("OutT", bound=BaseModel)

CallPattern = Literal["frugal", "per_call"]

NAN = math.nan


class StepRunner(Protocol):
    """The judge as a metric sees it, for one record."""

    @property
    def call_pattern(self) -> CallPattern:
        """``frugal``: batch and share; ``per_call``: one judge call per Ragas step."""
        ...

    @property
    def fuse_grounding(self) -> bool:
        """Whether this record's faithfulness and context_utility are asked as one
        ``grounding`` step (`monitor.metrics._steps.ground`) instead of their
        ``statements``, ``verify`` and ``usefulness`` steps."""
        ...

    async def generate(self, prompt: Prompt[OutT], n: int = 1) -> list[OutT]:
        """Exactly ``n`` answers to ``prompt`` (raises `monitor.judges.JudgeError`)."""
        ...

    async def embed(self, texts: Sequence[str], metric: str) -> list[list[float]]:
        """One vector per text, billed to ``metric``."""
        ...


class Metric(Protocol):
    """One metric: its name, whether it needs a reference, and how it runs on a record."""

    @property
    def name(self) -> str: ...

    @property
    def needs_reference(self) -> bool: ...

    async def evaluate(self, steps: StepRunner, interaction: Interaction) -> MetricResult:
        """Run the metric's judge steps and score them. Judge failures propagate."""
        ...


def unscoreable(metric: str, reason: str, **details: Any) -> MetricResult:
    """A result without a score (NaN) that is not an error: e.g. no statements, no contexts."""
    return MetricResult(metric=metric, score=NAN, details={"reason": reason, **details})


def mean_verdict(verdicts: Sequence[int]) -> float:
    """The share of 0/1 verdicts that are 1; NaN with no verdict."""
    if not verdicts:
        return NAN
    return sum(verdicts) / len(verdicts)


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity; 0.0 when either vector is all zeros (nothing to compare).

    Plain Python (no numpy import in the sidecar: ≈ 10 MB of resident memory),
    in float64 with the dot product's sum correctly rounded.
    """
    if len(a) != len(b):
        raise ValueError(f"vectors differ in dimension: {len(a)} vs {len(b)}")
    norm = math.hypot(*a) * math.hypot(*b)
    if norm == 0.0:
        return 0.0
    return math.fsum(map(operator.mul, a, b)) / norm
