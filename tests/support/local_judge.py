"""Texts and helpers shared by the local judges' tests (`tests/judges/local/`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from monitor.judges import Judge, steps
from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.entailment import SupportModel
from monitor.records import Interaction
from tests.support.prompts import step_prompt
from tests.support.records import validate_record

#: a context full of checkable facts: an amount, a year, a date, names and places
BYRON = (
    "Byron v. Rajneesh Foundation International was a 1985 lawsuit filed by Helen Byron in "
    "Portland, Oregon. Byron provided over US$300,000 to the organization, and some of the "
    "money was used to buy an armored Rolls Royce. She was born on March 2, 1942."
)
#: a short policy context: an amount and a spelled count
RECEIPTS = (
    "Employees must attach a receipt for every travel expense over $100. "
    "Lodging receipts are required for stays of three or more nights."
)

#: one context of twelve numbered facts (many windows), and two claims each of one fact in it
TOPIC_FACTS = [" ".join(f"Fact number {k} is about topic {k}." for k in range(12))]
TOPIC_CLAIMS = ["Topic 3 has a fact.", "Topic 9 has a fact."]


class FixedLogit(SupportModel):
    """The support model with every pair's logit fixed: the windows, their choice and the
    batching are real; ``seen`` keeps every (claim, window) pair the model was asked."""

    def __init__(self, logit: float) -> None:
        super().__init__(MiniLMEmbedder())
        self.logit = logit
        self.seen: list[tuple[str, str]] = []

    def logits(self, pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float32]:
        self.seen.extend(pairs)
        return np.full(len(pairs), self.logit, dtype=np.float32)


def receipt_interaction(
    response: str, contexts: list[str], reference: str | None = None
) -> Interaction:
    """An interaction asking about travel receipts, with this response and these contexts."""
    return validate_record(
        {
            "id": "r1",
            "user_input": "When do I need to attach a receipt for travel expenses?",
            "retrieved_contexts": contexts,
            "response": response,
            "reference": reference,
        }
    )


async def answers_every_step_at_zero_tokens(judge: Judge) -> None:
    """Both local judges answer each judge step, and embed, without a call or a token."""
    assert judge.kind == "local"
    out = await judge.generate(
        step_prompt(steps.StatementsInput(text="One fact. Another fact."), steps.Statements)
    )
    assert isinstance(out.value, steps.Statements) and len(out.value.statements) == 2
    verdicts = await judge.generate(
        step_prompt(
            steps.VerifyInput(context=BYRON, statements=["Byron gave $500,000."]), steps.Verdicts
        )
    )
    assert isinstance(verdicts.value, steps.Verdicts)
    assert verdicts.value.verdicts[0].verdict == 0
    assert verdicts.value.verdicts[0].statement == "Byron gave $500,000."
    questions = await judge.generate(
        step_prompt(steps.QuestionsInput(response="I don't know."), steps.GeneratedQuestion), n=3
    )
    assert len(questions.values) == 3
    assert all(isinstance(q, steps.GeneratedQuestion) and q.noncommittal for q in questions.values)
    useful = await judge.generate(
        step_prompt(
            steps.UsefulnessInput(question="q", answer="Byron gave $300,000.", contexts=[BYRON]),
            steps.ContextVerdicts,
        )
    )
    assert isinstance(useful.value, steps.ContextVerdicts)
    for judged in (out, verdicts, questions, useful):
        assert judged.usage.calls == 0 and judged.usage.total_tokens == 0
    embedded = await judge.embed(["a", "b"])
    assert len(embedded.vectors) == 2 and len(embedded.vectors[0]) == 384
    assert embedded.usage.total_tokens == 0
