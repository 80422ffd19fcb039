"""Texts and helpers shared by the local judges' tests (`tests/judges/local/`)."""

from __future__ import annotations

from pydantic import BaseModel

from monitor.judges import OutT, Prompt
from monitor.records import Interaction, validate_record

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


def prompt(step: str, inputs: BaseModel, output: type[OutT]) -> Prompt[OutT]:
    """A prompt for one judge step (the local judges read the inputs, not the wording)."""
    return Prompt(step=step, metric="test", instruction="-", inputs=inputs, output=output)


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
