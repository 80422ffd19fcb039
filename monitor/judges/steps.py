"""The judge steps every metric is built from, each defined once: inputs and answers.

See docs/design.md, "Steps and call patterns".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

STATEMENTS = "statements"
VERIFY = "verify"
QUESTIONS = "questions"
USEFULNESS = "usefulness"
GROUNDING = "grounding"

#: the basic steps, answered by every judge
STEPS = (STATEMENTS, VERIFY, QUESTIONS, USEFULNESS)
#: basic steps asked in one request (frugal call pattern, LLM judge)
FUSED_STEPS = (GROUNDING,)


def join_contexts(contexts: Sequence[str]) -> str:
    """All retrieved contexts as the one context statements are verified against."""
    return "\n".join(contexts)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- statements: break a text into self-contained statements


class StatementsInput(_Model):
    question: str | None = None
    text: str
    atomicity: Literal["low", "high"] = "high"
    coverage: Literal["low", "high"] = "high"


class Statements(_Model):
    statements: list[str]
    #: 1 when the text only declines, defers ("check with HR") or says it does not know:
    #: faithfulness is then unscoreable and the record is flagged ``noncommittal``
    noncommittal: int = Field(default=0, ge=0, le=1)
    #: per statement, the question it is read after where the judge reads it as the answer
    #: to one ("Enterprise." after "Which plan has SSO?"; the local judge), else None; None
    #: for all (an LLM judge: never in its schema). The metrics hand it on to ``verify``.
    read_after: SkipJsonSchema[list[str | None] | None] = None

    @model_validator(mode="after")
    def _one_read_after_per_statement(self) -> Statements:
        _check_read_after(self.statements, self.read_after)
        return self


# --- verify: can each statement be inferred from the context?


#: what the statements of a ``verify`` are checked against, for the reasons a judge writes
#: ("not in the reference"): faithfulness and noise_sensitivity use the contexts,
#: context_recall the contexts, factual_correctness the reference or the response
VerifySource = Literal["context", "reference", "response"]


class VerifyInput(_Model):
    context: str
    statements: list[str]
    source: VerifySource = "context"
    #: as `Statements.read_after`; rendered only where given, so an LLM judge's prompt
    #: never holds it
    read_after: list[str | None] | None = None

    @model_validator(mode="after")
    def _one_read_after_per_statement(self) -> VerifyInput:
        _check_read_after(self.statements, self.read_after)
        return self

    @model_serializer(mode="wrap")
    def _without_unread(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> dict[str, object]:
        data: dict[str, object] = handler(self)
        if self.read_after is None:
            data.pop("read_after", None)
        return data


def _check_read_after(statements: Sequence[str], read_after: Sequence[str | None] | None) -> None:
    if read_after is not None and len(read_after) != len(statements):
        raise ValueError("read_after: one entry (a question or null) per statement")


class StatementVerdict(_Model):
    statement: str
    reason: str
    verdict: int = Field(ge=0, le=1)


class Verdicts(_Model):
    verdicts: list[StatementVerdict]
    #: the probability that the statements hold at least one unsupported one, where the
    #: judge gives one (the local judge; never asked of an LLM: not in its schema)
    hallucination_probability: SkipJsonSchema[float | None] = None


# --- questions: a question the response answers, judged from the response alone


class QuestionsInput(_Model):
    response: str


class GeneratedQuestion(_Model):
    question: str
    noncommittal: int = Field(ge=0, le=1)
    #: True when no question was generated and ``question`` is the response itself, which
    #: relevancy then compares with the user input (the local judge; never asked of an LLM)
    is_response: SkipJsonSchema[bool] = False


# --- usefulness: was each context useful for arriving at the answer?


class UsefulnessInput(_Model):
    question: str
    answer: str
    contexts: list[str]


class ContextVerdict(_Model):
    reason: str
    verdict: int = Field(ge=0, le=1)


class ContextVerdicts(_Model):
    verdicts: list[ContextVerdict]


# --- grounding: statements + verify (contexts joined) + usefulness, in one request


class GroundingInput(_Model):
    question: str
    answer: str
    contexts: list[str]


class Grounding(_Model):
    #: the answer's statements, each with its verdict against all contexts joined
    statements: list[StatementVerdict]
    #: as `Statements.noncommittal`
    noncommittal: int = Field(default=0, ge=0, le=1)
    #: one usefulness verdict per context, in order
    contexts: list[ContextVerdict]
