"""factual_correctness: do the response's claims and the reference's claims agree?

See docs/metrics.md, "How the scores are computed".
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Literal

from monitor.metrics import _steps as st
from monitor.metrics._base import NAN, StepRunner, unscoreable
from monitor.records import Interaction, MetricResult

NAME = "factual_correctness"

Mode = Literal["f1", "precision", "recall"]
MODES: tuple[Mode, ...] = ("f1", "precision", "recall")

EPSILON = 1e-8


def round2(value: float) -> float:
    """Two decimals, half to even (``numpy.round``, as Ragas rounds): 0.125 → 0.12, 0.375 → 0.38."""
    import numpy as np  # here: the sidecar never scores this metric, and numpy costs ≈ 10 MB

    return float(np.round(value, 2))


def fbeta(precision: float, recall: float, beta: float = 1.0) -> float:
    """(1+β²)PR/(β²P+R); 0.0 when both are 0."""
    if precision == 0.0 and recall == 0.0:
        return 0.0
    b2 = beta * beta
    return (1 + b2) * precision * recall / (b2 * precision + recall)


def score(
    response_verdicts: Sequence[int],
    reference_verdicts: Sequence[int],
    *,
    mode: Mode = "f1",
    beta: float = 1.0,
) -> float:
    """From the verdicts on the response's claims (vs the reference) and the reference's claims
    (vs the response) to the rounded score; NaN when the mode's side has no claims."""
    tp = sum(response_verdicts)
    fp = len(response_verdicts) - tp
    fn = len(reference_verdicts) - sum(reference_verdicts)
    precision = tp / (tp + fp + EPSILON)
    recall = tp / (tp + fn + EPSILON)
    if mode == "precision":
        if not response_verdicts:
            return NAN
        value = precision
    elif mode == "recall":
        if not reference_verdicts:
            return NAN
        value = recall
    else:
        if not response_verdicts and not reference_verdicts:
            return NAN
        value = fbeta(precision, recall, beta)
    return round2(value)


@dataclass(frozen=True)
class FactualCorrectness:
    name: ClassVar[str] = NAME
    needs_reference: ClassVar[bool] = True
    mode: Mode = "f1"
    beta: float = 1.0
    atomicity: st.Level = "low"
    coverage: st.Level = "low"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"factual_correctness mode must be one of {', '.join(MODES)}")
        if not self.beta > 0:
            raise ValueError("factual_correctness beta must be > 0")

    async def _claims(self, steps: StepRunner, text: str) -> list[str]:
        found = await st.statements(
            steps, NAME, text, atomicity=self.atomicity, coverage=self.coverage
        )
        return found.statements

    async def evaluate(self, steps: StepRunner, interaction: Interaction) -> MetricResult:
        reference = interaction.reference
        assert reference is not None
        response = interaction.response
        response_claims: list[str]
        reference_claims: list[str] = []
        if self.mode == "precision":
            response_claims = await self._claims(steps, response)
        else:
            response_claims, reference_claims = await asyncio.gather(
                self._claims(steps, response), self._claims(steps, reference)
            )
        forward_read, backward_read = await asyncio.gather(
            st.verify(steps, NAME, reference, response_claims, source="reference"),
            st.verify(steps, NAME, response, reference_claims, source="response"),
        )
        forward, backward = forward_read.verdicts, backward_read.verdicts
        value = score(
            [v.verdict for v in forward],
            [v.verdict for v in backward],
            mode=self.mode,
            beta=self.beta,
        )
        details = {
            "mode": self.mode,
            "beta": self.beta,
            "response_claims": st.statement_details(response_claims, forward),
            "reference_claims": st.statement_details(reference_claims, backward),
            "tp": sum(v.verdict for v in forward),
            "fp": sum(1 - v.verdict for v in forward),
            "fn": sum(1 - v.verdict for v in backward),
        }
        if math.isnan(value):
            return unscoreable(NAME, "no claims to compare", **details)
        return MetricResult(metric=NAME, score=value, details=details)
