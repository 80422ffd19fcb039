"""`LearnedJudge`: the local judge with every support decision made by the support model.

See docs/local-judge.md and docs/model.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from monitor.judges import JudgeError, OutT, Prompt
from monitor.judges.local import statements as st
from monitor.judges.local.base import InProcessJudge, Screen
from monitor.judges.local.entailment import Support, SupportModel
from monitor.judges.local.reasons import excerpt
from monitor.judges.steps import (
    QUESTIONS,
    STATEMENTS,
    USEFULNESS,
    VERIFY,
    ContextVerdict,
    ContextVerdicts,
    GeneratedQuestion,
    QuestionsInput,
    Statements,
    StatementsInput,
    StatementVerdict,
    UsefulnessInput,
    Verdicts,
    VerifyInput,
    VerifySource,
)

#: The judge's model, as the start-up log and ``rag_monitor_judge_info`` name it.
MODEL_NAME = "support-model"

#: How a reason names what statements were checked against.
WHERE = {"context": "the context", "reference": "the reference", "response": "the response"}


def reason(found: Support, source: VerifySource = "context") -> str:
    """What a verdict rests on: the probability and the window it was read against."""
    if not found.window:
        return f"{WHERE[source]} is empty: nothing supports it (p=0.00)"
    said = "supported" if found.supported else "not supported"
    return (
        f"{said} (p={found.probability:.2f}); closest in {WHERE[source]}: {excerpt(found.window)}"
    )


@dataclass
class LearnedJudge(InProcessJudge):
    """The Judge protocol answered in-process by the support model (zero tokens)."""

    #: the support model (built over ``embedder`` when not given)
    model: SupportModel | None = None
    #: worker threads (onnxruntime releases the GIL: a few per core keep them busy)
    threads: int = 8
    model_name: str = MODEL_NAME
    thread_name: ClassVar[str] = "learned-judge"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.support_model = self.model or SupportModel(self.embedder)

    # --- synchronous answers (also usable without an event loop)

    def answer(self, prompt: Prompt[OutT]) -> OutT:
        """The local answer to one prompt, validated as the prompt's output model."""
        inputs = prompt.inputs
        result: Statements | Verdicts | GeneratedQuestion | ContextVerdicts
        if prompt.step == STATEMENTS and isinstance(inputs, StatementsInput):
            result = Statements(
                statements=self.statements(inputs.text, inputs.question),
                noncommittal=int(self.noncommittal(inputs.text)),
            )
        elif prompt.step == VERIFY and isinstance(inputs, VerifyInput):
            found = self.verify(inputs.context, inputs.statements)
            result = Verdicts(
                verdicts=[
                    StatementVerdict(
                        statement=s, reason=reason(f, inputs.source), verdict=int(f.supported)
                    )
                    for s, f in zip(inputs.statements, found, strict=True)
                ]
            )
        elif prompt.step == QUESTIONS and isinstance(inputs, QuestionsInput):
            result = self.question(inputs.response)
        elif prompt.step == USEFULNESS and isinstance(inputs, UsefulnessInput):
            result = ContextVerdicts(
                verdicts=self.usefulness(inputs.answer, inputs.contexts, inputs.question)
            )
        else:
            raise JudgeError("bad_request", f"local judge cannot answer step {prompt.step!r}")
        return prompt.output.model_validate(result.model_dump())

    # statements

    def statements(self, text: str, question: str | None = None) -> list[str]:
        """The sentences of ``text`` that assert something (`statements.statements`)."""
        return st.standalone(st.statements(text), question)

    # verify

    def verify(self, context: str, statements: Sequence[str]) -> list[Support]:
        """The support of each statement by ``context`` (one passage a line)."""
        return self.support_model.support(statements, context.split("\n"))

    # the risk screen (not a judge step: a record-level score for risk-based sampling)

    def screen(self, contexts: Sequence[str], response: str, question: str | None = None) -> Screen:
        """A hallucination risk for one record, in [0, 1] (1 = surely unsupported):
        1 − the support probability of the response's weakest statement."""
        said = self.statements(response, question) or ([response] if response.strip() else [])
        if not said:
            return Screen(risk=0.5, faithfulness=float("nan"), reason="empty response")
        found = self.support_model.support(said, contexts)
        worst = min(found, key=lambda f: f.probability)
        return Screen(
            risk=round(1.0 - worst.probability, 6),
            faithfulness=sum(f.supported for f in found) / len(found),
            reason=reason(worst),
            support=sum(f.probability for f in found) / len(found),
        )

    # usefulness

    def usefulness(
        self, answer: str, contexts: Sequence[str], question: str | None = None
    ) -> list[ContextVerdict]:
        """A context is useful when it supports at least one statement of the answer."""
        said = self.statements(answer, question) or ([answer] if answer.strip() else [])
        verdicts: list[ContextVerdict] = []
        for found in self.support_model.support_each(said, contexts):
            if not found:
                verdicts.append(ContextVerdict(reason="the answer states nothing", verdict=0))
                continue
            best = max(range(len(found)), key=lambda k: found[k].probability)
            p = found[best].probability
            if found[best].supported:
                why = f"supports {excerpt(said[best], 80)} (p={p:.2f})"
            else:
                why = f"supports none of the answer's statements (best p={p:.2f})"
            verdicts.append(ContextVerdict(reason=why, verdict=int(found[best].supported)))
        return verdicts
