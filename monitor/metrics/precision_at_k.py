"""precision_at_k: the share of retrieved contexts useful for the reference, order ignored.

Step: the same ``usefulness`` verdicts as context_precision (one call serves
both in the frugal pattern). score = mean verdict; no contexts → unscoreable.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from monitor.judges.steps import ContextVerdict
from monitor.metrics._base import mean_verdict
from monitor.metrics.context_precision import ContextPrecision, context_details
from monitor.records import MetricResult

NAME = "precision_at_k"


#: mean of the verdicts; NaN with no contexts.
score = mean_verdict


@dataclass(frozen=True)
class PrecisionAtK(ContextPrecision):
    """context_precision's verdicts, scored without their order."""

    name: ClassVar[str] = NAME

    def result(self, verdicts: list[ContextVerdict]) -> MetricResult:
        return MetricResult(
            metric=NAME,
            score=score([v.verdict for v in verdicts]),
            details={"k": len(verdicts), "contexts": context_details(verdicts)},
        )
