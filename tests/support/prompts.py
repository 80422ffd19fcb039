"""Judge prompts the judge tests send (`monitor.judges.Prompt`)."""

from __future__ import annotations

from monitor.judges import Prompt
from monitor.judges.steps import Statements, StatementsInput


def statements_prompt(
    text: str = "Receipts are required over $100. Lodging always.",
) -> Prompt[Statements]:
    """The statements step of faithfulness, on ``text``."""
    return Prompt(
        step="statements",
        metric="faithfulness",
        instruction="Rewrite the text as a list of standalone statements.",
        inputs=StatementsInput(text=text),
        output=Statements,
    )
