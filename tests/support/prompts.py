"""Judge prompts the judge tests send (`monitor.judges.Prompt`)."""

from __future__ import annotations

from pydantic import BaseModel

from monitor.judges import OutT, Prompt, steps

#: the step each input model belongs to (`monitor.judges.steps`)
STEP_OF: dict[type[BaseModel], str] = {
    steps.StatementsInput: steps.STATEMENTS,
    steps.VerifyInput: steps.VERIFY,
    steps.QuestionsInput: steps.QUESTIONS,
    steps.UsefulnessInput: steps.USEFULNESS,
    steps.GroundingInput: steps.GROUNDING,
}


def step_prompt(
    inputs: BaseModel, output: type[OutT], *, metric: str = "faithfulness", instruction: str = "-"
) -> Prompt[OutT]:
    """A prompt for the step ``inputs`` belong to (`STEP_OF`), answered as ``output``. The
    judges the tests run without a model read the inputs, not the wording."""
    return Prompt(
        step=STEP_OF[type(inputs)],
        metric=metric,
        instruction=instruction,
        inputs=inputs,
        output=output,
    )


def statements_prompt(
    text: str = "Receipts are required over $100. Lodging always.",
) -> Prompt[steps.Statements]:
    """The statements step of faithfulness, on ``text``."""
    return step_prompt(
        steps.StatementsInput(text=text),
        steps.Statements,
        instruction="Rewrite the text as a list of standalone statements.",
    )
