"""The four judge steps every metric is built from, each defined once.

| step         | input                 | output            | used by |
|--------------|-----------------------|-------------------|---------|
| `statements` | StatementsInput       | Statements        | faithfulness, context_recall, factual_correctness, noise_sensitivity |
| `verify`     | VerifyInput           | Verdicts          | faithfulness, context_recall, factual_correctness, noise_sensitivity |
| `questions`  | QuestionsInput        | GeneratedQuestion | response_relevancy (n choices) |
| `usefulness` | UsefulnessInput       | ContextVerdicts   | context_utility, context_precision, precision_at_k |

The step name is the contract between metrics and judges: the LLM judge sends
it as the JSON-schema name, the local judge dispatches on it.
"""

# ruff: noqa: E501  (the table in the docstring)
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

STATEMENTS = "statements"
VERIFY = "verify"
QUESTIONS = "questions"
USEFULNESS = "usefulness"

STEPS = (STATEMENTS, VERIFY, QUESTIONS, USEFULNESS)


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


# --- verify: can each statement be inferred from the context?


class VerifyInput(_Model):
    context: str
    statements: list[str]


class StatementVerdict(_Model):
    statement: str
    reason: str
    verdict: int = Field(ge=0, le=1)


class Verdicts(_Model):
    verdicts: list[StatementVerdict]


# --- questions: a question the response answers, judged from the response alone


class QuestionsInput(_Model):
    response: str


class GeneratedQuestion(_Model):
    question: str
    noncommittal: int = Field(ge=0, le=1)


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
