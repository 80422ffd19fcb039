"""The judge steps every metric is built from, each defined once: inputs and answers.

See docs/design.md, "Steps and call patterns".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
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


# --- verify: can each statement be inferred from the context?


#: what the statements of a ``verify`` are checked against, for the reasons a judge writes
#: ("not in the reference"): faithfulness and noise_sensitivity use the contexts,
#: context_recall the contexts, factual_correctness the reference or the response
VerifySource = Literal["context", "reference", "response"]


class VerifyInput(_Model):
    context: str
    statements: list[str]
    source: VerifySource = "context"


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
