"""The judge steps every metric is built from, with their instructions, each defined once.

The step models live in `monitor.metrics.steps` (the contract with the
judges); this module holds the instruction each step is sent with and the
functions metrics call to run a step. The functions are where the two call
patterns differ:

- ``frugal``: all contexts' usefulness verdicts in one request; the N
  relevancy questions in one request with ``n=N`` (the runner tops up choices
  the server did not return);
- ``per_call``: one usefulness request per context and N question requests,
  as Ragas makes them.

Sharing identical steps between metrics of a record and the LRU cache are the
runner's business (`monitor.scoring`), not the metric's: in ``frugal`` two
metrics that decompose the same text with the same parameters get one call.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

from monitor.metrics._base import StepRunner
from monitor.metrics.steps import (
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
)
from monitor.prompt import JudgeError, Prompt

Level = Literal["low", "high"]

# --- instructions: stable text, sent first so provider prompt caches can reuse it

STATEMENTS_INSTRUCTION = """\
Rewrite the text as a list of standalone statements.
- Each statement says one thing the text says, and can be understood without the text: \
replace pronouns and vague references ("it", "they", "this policy") by what they refer to; \
use the question, when given, only to resolve such references.
- Add nothing the text does not say; keep numbers, dates, names and conditions exactly.
- atomicity "high": split compound sentences into single facts; "low": one statement per sentence.
- coverage "high": keep every detail; "low": keep only the main points.
Return {"statements": [...]}, an empty list if the text asserts nothing."""

VERIFY_INSTRUCTION = """\
Check each statement against the context. A statement passes (verdict 1) only if it can be \
directly inferred from the context alone, without outside knowledge; otherwise, or when the \
context does not address it, it fails (verdict 0).
Return {"verdicts": [...]} with one entry per statement, in the given order: the statement \
copied as given, a one-sentence reason, then the verdict."""

QUESTIONS_INSTRUCTION = """\
Read the response and write the question it answers, as a user of the service would have \
asked it. Judge from the response only.
Set noncommittal to 1 if the response is evasive, vague or declines to answer (for example \
"I don't know", "I'm not sure", "I cannot answer that"), else 0.
Return {"question": "...", "noncommittal": 0 or 1}."""

USEFULNESS_INSTRUCTION = """\
For each context, in the given order, decide whether it was useful in arriving at the \
answer to the question: verdict 1 if the answer relies on information the context \
contains, else 0.
Return {"verdicts": [...]} with exactly one entry per context: a short reason, then the verdict."""


# --- steps


async def decompose(
    steps: StepRunner,
    metric: str,
    text: str,
    *,
    question: str | None = None,
    atomicity: Level = "high",
    coverage: Level = "high",
) -> list[str]:
    """The statements of ``text`` (empty text: no call, no statements)."""
    if not text.strip():
        return []
    prompt = Prompt(
        step=STATEMENTS,
        metric=metric,
        instruction=STATEMENTS_INSTRUCTION,
        inputs=StatementsInput(
            question=question, text=text, atomicity=atomicity, coverage=coverage
        ),
        output=Statements,
    )
    [out] = await steps.generate(prompt)
    return [s.strip() for s in out.statements if s.strip()]


async def verify(
    steps: StepRunner, metric: str, context: str, statements: Sequence[str]
) -> list[int]:
    """One 0/1 verdict per statement: inferable from ``context``? (no statements: no call)."""
    return [v.verdict for v in await verify_verbose(steps, metric, context, statements)]


async def verify_verbose(
    steps: StepRunner, metric: str, context: str, statements: Sequence[str]
) -> list[StatementVerdict]:
    """As `verify`, with the judge's reasons."""
    if not statements:
        return []
    prompt = Prompt(
        step=VERIFY,
        metric=metric,
        instruction=VERIFY_INSTRUCTION,
        inputs=VerifyInput(context=context, statements=list(statements)),
        output=Verdicts,
    )
    [out] = await steps.generate(prompt)
    _expect(len(out.verdicts), len(statements), "verdicts for statements", VERIFY)
    return out.verdicts


async def usefulness(
    steps: StepRunner, metric: str, question: str, answer: str, contexts: Sequence[str]
) -> list[ContextVerdict]:
    """One verdict per context, in order: useful for arriving at ``answer``?"""
    if not contexts:
        return []
    if steps.call_pattern == "frugal":
        return await _usefulness(steps, metric, question, answer, list(contexts))
    per_context = await asyncio.gather(
        *(_usefulness(steps, metric, question, answer, [c]) for c in contexts)
    )
    return [verdicts[0] for verdicts in per_context]


async def _usefulness(
    steps: StepRunner, metric: str, question: str, answer: str, contexts: list[str]
) -> list[ContextVerdict]:
    prompt = Prompt(
        step=USEFULNESS,
        metric=metric,
        instruction=USEFULNESS_INSTRUCTION,
        inputs=UsefulnessInput(question=question, answer=answer, contexts=contexts),
        output=ContextVerdicts,
    )
    [out] = await steps.generate(prompt)
    _expect(len(out.verdicts), len(contexts), "verdicts for contexts", USEFULNESS)
    return out.verdicts


async def questions(
    steps: StepRunner, metric: str, response: str, n: int
) -> list[GeneratedQuestion]:
    """``n`` questions the response answers, each with its noncommittal flag."""
    prompt = Prompt(
        step=QUESTIONS,
        metric=metric,
        instruction=QUESTIONS_INSTRUCTION,
        inputs=QuestionsInput(response=response),
        output=GeneratedQuestion,
    )
    if steps.call_pattern == "frugal":
        return await steps.generate(prompt, n)
    singles = await asyncio.gather(*(steps.generate(prompt) for _ in range(n)))
    return [one[0] for one in singles]


def statement_details(
    statements: Sequence[str], verdicts: Sequence[StatementVerdict]
) -> list[dict[str, Any]]:
    """Statement-level details as stored and exported: the statement we sent, verdict, reason."""
    return [
        {"statement": s, "verdict": v.verdict, "reason": v.reason}
        for s, v in zip(statements, verdicts, strict=True)
    ]


def _expect(got: int, wanted: int, what: str, step: str) -> None:
    if got != wanted:
        raise JudgeError("invalid_output", f"step {step}: {got} {what}, expected {wanted}")
