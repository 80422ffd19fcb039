"""noise_sensitivity: how often the response says something wrong a context led it to.

See docs/metrics.md, "How the scores are computed".
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal

from monitor.judges.steps import Verdicts
from monitor.metrics import _steps as st
from monitor.metrics._base import NAN, StepRunner, unscoreable
from monitor.records import Interaction, MetricResult

NAME = "noise_sensitivity"

Mode = Literal["relevant", "irrelevant"]
MODES: tuple[Mode, ...] = ("relevant", "irrelevant")

Matrix = Sequence[Sequence[int | bool]]

if TYPE_CHECKING:  # numpy is imported where it is used: the sidecar never scores this metric
    import numpy as np
    import numpy.typing as npt


def _ones(read: Verdicts) -> list[int]:
    """The 0/1 verdicts of one verify step, in statement order."""
    return [v.verdict for v in read.verdicts]


def _bool_matrix(rows: Matrix, columns: int, what: str) -> npt.NDArray[np.bool_]:
    import numpy as np

    m = np.zeros((len(rows), columns), dtype=bool)
    for i, row in enumerate(rows):
        if len(row) != columns:
            raise ValueError(f"{what}: row {i} has {len(row)} columns, expected {columns}")
        m[i, :] = [bool(x) for x in row]
    return m


def score(
    reference_in_context: Matrix,
    response_in_context: Matrix,
    wrong: Sequence[int | bool],
    *,
    contexts: int,
    mode: Mode = "relevant",
) -> float:
    """The formulas above. ``reference_in_context`` is g (|G| × contexts),
    ``response_in_context`` is a (|A| × contexts), ``wrong`` has one flag per Aᵢ."""
    if mode not in MODES:
        raise ValueError(f"noise_sensitivity mode must be one of {', '.join(MODES)}")
    if len(wrong) != len(response_in_context):
        raise ValueError("one wrong flag per response statement")
    if not response_in_context:
        return NAN
    import numpy as np

    g = _bool_matrix(reference_in_context, contexts, "reference_in_context")
    a = _bool_matrix(response_in_context, contexts, "response_in_context")
    w = np.array([bool(x) for x in wrong], dtype=bool)
    relevant_context: npt.NDArray[np.bool_] = np.any(g, axis=0)  # rel[j]
    from_relevant: npt.NDArray[np.bool_] = np.any(a & relevant_context[np.newaxis, :], axis=1)
    if mode == "relevant":
        return float(np.mean(from_relevant & w))
    from_irrelevant: npt.NDArray[np.bool_] = np.any(a & ~relevant_context[np.newaxis, :], axis=1)
    return float(np.mean(from_irrelevant & ~from_relevant & w))


@dataclass(frozen=True)
class NoiseSensitivity:
    name: ClassVar[str] = NAME
    needs_reference: ClassVar[bool] = True
    mode: Mode = "relevant"

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"noise_sensitivity mode must be one of {', '.join(MODES)}")

    async def evaluate(self, steps: StepRunner, interaction: Interaction) -> MetricResult:
        reference = interaction.reference
        assert reference is not None
        question = interaction.user_input
        ref_found, resp_found = await asyncio.gather(
            st.statements(steps, NAME, reference, question=question),
            st.statements(steps, NAME, interaction.response, question=question),
        )
        ref_statements, resp_statements = ref_found.statements, resp_found.statements
        if not resp_statements:
            return unscoreable(NAME, "no statements in the response")
        contexts = interaction.context_texts
        ref_after, resp_after = ref_found.read_after, resp_found.read_after
        g_read, a_read, supported_read = await asyncio.gather(
            asyncio.gather(
                *(st.verify(steps, NAME, c, ref_statements, read_after=ref_after) for c in contexts)
            ),
            asyncio.gather(
                *(
                    st.verify(steps, NAME, c, resp_statements, read_after=resp_after)
                    for c in contexts
                )
            ),
            st.verify(
                steps, NAME, reference, resp_statements, source="reference", read_after=resp_after
            ),
        )
        g_columns, a_columns = [_ones(r) for r in g_read], [_ones(r) for r in a_read]
        supported = _ones(supported_read)
        g = [[col[i] for col in g_columns] for i in range(len(ref_statements))]
        a = [[col[i] for col in a_columns] for i in range(len(resp_statements))]
        wrong = [1 - v for v in supported]
        value = score(g, a, wrong, contexts=len(contexts), mode=self.mode)
        relevant = [any(row[j] for row in g) for j in range(len(contexts))]
        return MetricResult(
            metric=NAME,
            score=value,
            details={
                "mode": self.mode,
                "relevant_contexts": relevant,
                "reference_statements": [
                    {"statement": s, "in_contexts": row}
                    for s, row in zip(ref_statements, g, strict=True)
                ],
                "response_statements": [
                    {"statement": s, "in_contexts": row, "wrong": bool(w)}
                    for s, row, w in zip(resp_statements, a, wrong, strict=True)
                ],
            },
        )
