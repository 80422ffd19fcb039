"""The judge steps as the metrics ask them: each step's instruction, once, and its call
in the ``frugal`` and ``per_call`` patterns (`ground`: the fused step).

See docs/design.md, "Steps and call patterns".
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, Literal

from monitor.judges import JudgeError, Prompt
from monitor.judges.steps import (
    GROUNDING,
    QUESTIONS,
    STATEMENTS,
    USEFULNESS,
    VERIFY,
    ContextVerdict,
    ContextVerdicts,
    GeneratedQuestion,
    Grounding,
    GroundingInput,
    QuestionsInput,
    Statements,
    StatementsInput,
    StatementVerdict,
    UsefulnessInput,
    Verdicts,
    VerifyInput,
    VerifySource,
)
from monitor.metrics._base import StepRunner

Level = Literal["low", "high"]

# --- instructions: stable text, sent first so provider prompt caches can reuse it.
# Every rule is written once below; the instruction of each step is composed of them,
# so the fused `grounding` step asks exactly what the basic steps ask.

_ATOMICITY = {"high": "split compound sentences into single facts", "low": "one per sentence"}
_COVERAGE = {"high": "keep every detail", "low": "keep only the main points"}


def _split(text: str) -> str:
    """The statements task for ``text`` ("the text", "the answer": also its input field)."""
    field = text.split()[-1]
    return (
        f'Break {text} ("{field}") into standalone statements: one claim each, '
        "understandable alone (pronouns replaced). Add nothing, not the question; keep "
        "numbers, dates, names and conditions exactly."
    )


def _supported(source: str) -> str:
    """The verify rule, against ``source`` ("context", "reference", "response")."""
    return (
        f"verdict 1 only if the statement can be directly inferred from the {source} alone, "
        f"without outside knowledge, else 0 (also when the {source} does not address it). "
        "Other words with the same meaning are inferred; a differing name, number, date or "
        "role is not."
    )


_SUPPORTED = _supported("context")
_USEFUL = (
    "For each context, in order: was it useful in arriving at the answer to the question? "
    "Verdict 1 if the answer relies on information the context holds, else 0."
)
_NONCOMMITTAL = (
    "noncommittal 1 if the response is evasive, vague or declines to answer "
    '("I don\'t know", "I\'m not sure", "I cannot answer that"), else 0.'
)
#: statements and grounding: an answer that asserts nothing about the question
_EVASIVE = 'noncommittal: 1 if {text} only declines, defers ("ask HR") or does not know; else 0.'
_REASON = "a short reason (at most 15 words), then the verdict"
_PER_CONTEXT = f"Exactly one verdict per context: {_REASON}."


def _none(text: str) -> str:
    return f"No statements if {text} asserts nothing."


def _reason_names(source: str) -> str:
    return f'Reasons for 0 start "not in the {source}:".'


STATEMENTS_INSTRUCTION = (
    _split("the text")
    + f'\natomicity "high": {_ATOMICITY["high"]}; "low": {_ATOMICITY["low"]}.'
    + f'\ncoverage "high": {_COVERAGE["high"]}; "low": {_COVERAGE["low"]}.'
    + "\n"
    + _none("the text")
    + "\n"
    + _EVASIVE.format(text="the text")
)


#: what the "context" field of a verify is, as the instruction names it
_SOURCES = {
    "context": "the retrieved context",
    "reference": "the reference answer",
    "response": "the response",
}


def verify_instruction(source: VerifySource) -> str:
    """The verify instruction for statements checked against ``source``."""
    return (
        f'Check each of "statements" against "context" ({_SOURCES[source]}): '
        + _supported(source)
        + f"\nOne verdict per statement, in order: the statement as given, {_REASON}. "
        + _reason_names(source)
    )


VERIFY_INSTRUCTION = verify_instruction("context")

QUESTIONS_INSTRUCTION = (
    "Write the question the response answers, as a user would have asked it, judging from "
    "the response only.\n" + _NONCOMMITTAL
)

USEFULNESS_INSTRUCTION = _USEFUL + "\n" + _PER_CONTEXT

GROUNDING_INSTRUCTION = (
    "statements: "
    + _split("the answer")
    + f" Also {_ATOMICITY['high']}; {_COVERAGE['high']}."
    + " Check each against all contexts together as one context: "
    + _SUPPORTED
    + f" Per statement: the statement, {_REASON}. "
    + _none("the answer")
    + "\n"
    + _EVASIVE.format(text="the answer")
    + "\ncontexts: "
    + _USEFUL
    + " "
    + _PER_CONTEXT
)


# --- steps


async def statements(
    steps: StepRunner,
    metric: str,
    text: str,
    *,
    question: str | None = None,
    atomicity: Level = "high",
    coverage: Level = "high",
) -> Statements:
    """The statements of ``text``, with the judge's noncommittal flag and, where it reads
    some after the question, what each is read after (statements stripped, empty ones
    dropped; empty text: no call, no statements, not noncommittal)."""
    if not text.strip():
        return Statements(statements=[])
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
    after = out.read_after or [None] * len(out.statements)
    kept = [(s.strip(), a) for s, a in zip(out.statements, after, strict=True) if s.strip()]
    return Statements(
        statements=[s for s, _ in kept],
        noncommittal=out.noncommittal,
        read_after=[a for _, a in kept] if out.read_after is not None else None,
    )


async def verify(
    steps: StepRunner,
    metric: str,
    context: str,
    statements: Sequence[str],
    *,
    source: VerifySource = "context",
    read_after: Sequence[str | None] | None = None,
) -> Verdicts:
    """One verdict per statement: inferable from ``context``? (no statements: no call), with
    the judge's reasons and its probability that the statements hold an unsupported one,
    where it gives one.

    ``source`` says what ``context`` is, for the judge's reasons ("not in the reference");
    ``read_after`` is what the statements step said each is read after
    (`Statements.read_after`), handed on as it came.
    """
    if not statements:
        return Verdicts(verdicts=[])
    prompt = Prompt(
        step=VERIFY,
        metric=metric,
        instruction=verify_instruction(source),
        inputs=VerifyInput(
            context=context,
            statements=list(statements),
            source=source,
            read_after=None if read_after is None else list(read_after),
        ),
        output=Verdicts,
        lengths={"verdicts": len(statements)},
    )
    [out] = await steps.generate(prompt)
    _expect(len(out.verdicts), len(statements), "verdicts for statements", VERIFY)
    return out


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
        lengths={"verdicts": len(contexts)},
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


async def ground(
    steps: StepRunner, metric: str, question: str, answer: str, contexts: Sequence[str]
) -> Grounding | None:
    """``answer``'s statements with their verdicts against all ``contexts`` joined, and one
    usefulness verdict per context, in one request; None, and the caller asks its basic
    steps instead, when the runner does not fuse the steps (`StepRunner.fuse_grounding`:
    no request then) or when the answer came back malformed or cut off at its cap.

    faithfulness and context_utility ask the same prompt; the runner makes it one
    call, billed to whichever asks first (and a malformed answer makes both fall
    back). Statements come back stripped, empty ones dropped, as from `statements`.
    The answer is not re-asked (`Prompt.reask`): the basic steps are the second try.
    """
    if not steps.fuse_grounding:
        return None
    prompt = Prompt(
        step=GROUNDING,
        metric=metric,
        instruction=GROUNDING_INSTRUCTION,
        inputs=GroundingInput(question=question, answer=answer, contexts=list(contexts)),
        output=Grounding,
        lengths={"contexts": len(contexts)},
        reask=False,
    )
    try:
        [out] = await steps.generate(prompt)
    except JudgeError as exc:
        if exc.reason in ("invalid_output", "truncated"):
            return None
        raise
    if len(out.contexts) != len(contexts):  # a judge that does not check `Prompt.lengths`
        return None
    return Grounding(
        statements=[
            v.model_copy(update={"statement": v.statement.strip()})
            for v in out.statements
            if v.statement.strip()
        ],
        noncommittal=out.noncommittal,
        contexts=out.contexts,
    )


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
