"""monitor.judges.caps: each step's answer cap, against the answers the steps get."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import BaseModel

from monitor.judges import Prompt, steps
from monitor.judges.caps import FRAME, QUESTION, VERDICT, answer_cap, step_size
from monitor.text.sentences import sentences
from monitor.tokens import count_tokens
from tests.support import ROOT, answers
from tests.support.prompts import step_prompt

MODEL = "gpt-4o-mini"
REALISTIC = ROOT / "bench" / "data" / "realistic.jsonl"


def step_prompts(record: dict[str, Any]) -> list[Prompt[Any]]:
    question, response = record["user_input"], record["response"]
    contexts: list[str] = record["retrieved_contexts"]
    return [
        step_prompt(steps.StatementsInput(question=question, text=response), steps.Statements),
        step_prompt(
            steps.VerifyInput(context="\n".join(contexts), statements=sentences(response)),
            steps.Verdicts,
        ),
        step_prompt(steps.QuestionsInput(response=response), steps.GeneratedQuestion),
        step_prompt(
            steps.UsefulnessInput(question=question, answer=response, contexts=contexts),
            steps.ContextVerdicts,
        ),
        step_prompt(
            steps.GroundingInput(question=question, answer=response, contexts=contexts),
            steps.Grounding,
        ),
    ]


def realistic() -> list[dict[str, Any]]:
    lines = REALISTIC.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line]


def test_every_steps_answer_fits_its_cap_even_laid_out() -> None:
    """The deterministic judge's answers to the labelled set's 82 records fit each step's
    cap, also indented as a json_object endpoint may lay them out."""
    records = realistic()
    assert len(records) >= 80
    for record in records:
        for step in step_prompts(record):
            [answer] = answers.answer(step.step, step.inputs.model_dump(), 1)
            size = step_size(step, MODEL)
            assert size is not None
            laid_out = count_tokens(json.dumps(answer, indent=2, ensure_ascii=False), MODEL)
            assert laid_out <= size, (record["id"], step.step, laid_out, size)


def test_sizes_follow_what_the_answer_holds() -> None:
    short, longer = "Two weeks.", "Two weeks. " * 20
    statements = [
        step_size(step_prompt(steps.StatementsInput(text=t), steps.Statements), MODEL)
        for t in (short, longer)
    ]
    assert statements[0] == FRAME + 2 * count_tokens(short, MODEL)
    assert statements[0] is not None and statements[1] is not None
    assert statements[1] > statements[0]
    with_question = steps.StatementsInput(question="How much notice do I give?", text=short)
    question_size = count_tokens("How much notice do I give?", MODEL)
    assert step_size(step_prompt(with_question, steps.Statements), MODEL) == (
        statements[0] + question_size
    )
    # one verdict per statement or context; a question whatever the response
    one = steps.VerifyInput(context="c", statements=["Notice is two weeks"])
    three = steps.VerifyInput(context="c", statements=["Notice is two weeks"] * 3)
    sizes = [step_size(step_prompt(v, steps.Verdicts), MODEL) for v in (one, three)]
    assert sizes[0] is not None and sizes[1] is not None
    assert sizes[1] - sizes[0] == 2 * (VERDICT + 2 * count_tokens("Notice is two weeks", MODEL))
    useful = [
        step_size(
            step_prompt(
                steps.UsefulnessInput(question="q", answer="a", contexts=["c"] * k),
                steps.ContextVerdicts,
            ),
            MODEL,
        )
        for k in (1, 4)
    ]
    assert useful == [FRAME + VERDICT, FRAME + 4 * VERDICT]
    for response in (short, longer):
        asked = step_prompt(steps.QuestionsInput(response=response), steps.GeneratedQuestion)
        assert step_size(asked, MODEL) == FRAME + QUESTION


@pytest.mark.parametrize("bound", [1, 40, 10_000])
def test_the_cap_is_at_most_the_bound(bound: int) -> None:
    statements = step_prompt(steps.StatementsInput(text="Two weeks. " * 40), steps.Statements)
    size = step_size(statements, MODEL)
    assert size is not None
    assert answer_cap(statements, bound, MODEL) == min(size, bound)


def test_a_step_it_does_not_know_gets_the_bound() -> None:
    class Other(BaseModel):
        text: str

    unknown = Prompt(
        step="other",
        metric="faithfulness",
        instruction="",
        inputs=Other(text="anything"),
        output=steps.Statements,
    )
    assert step_size(unknown, MODEL) is None
    assert answer_cap(unknown, 300, MODEL) == 300
