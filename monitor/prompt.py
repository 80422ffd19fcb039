"""What a judge is asked, and what a judge is.

A `Prompt` is a structured request: a stable instruction (the cacheable
prefix), the step's inputs as a pydantic model (rendered as JSON after the
instruction), and the pydantic model the answer must validate against.
Metrics build prompts; judges answer them. The LLM judge (`judge.py`) sends
them over HTTP; the local judge (`local/`) answers them in-process.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from pydantic import BaseModel

from monitor.records import Usage

OutT = TypeVar("OutT", bound=BaseModel)


@dataclass(frozen=True)
class Prompt(Generic[OutT]):
    """One judge step.

    ``step`` names the step (``statements``, ``verify``, ``questions``,
    ``usefulness``, or the fused ``grounding`` of the frugal pattern; see
    `monitor.metrics.steps`); it is also the JSON-schema name sent to the endpoint, so
    a deterministic test server can tell the steps apart. ``metric`` is whom
    the tokens are billed to.

    ``lengths`` pins list fields of the answer to an exact number of items
    (``{"verdicts": 3}``: one verdict per statement sent); the LLM judge puts
    them in the schema it sends (``minItems``/``maxItems``) and treats an answer
    with another count as invalid. ``reask`` False: an invalid answer is not
    asked again, the step fails at once (the fused ``grounding`` step, whose
    metrics fall back to the basic steps instead).
    """

    step: str
    metric: str
    instruction: str
    inputs: BaseModel
    output: type[OutT]
    #: a worked example shown after the instruction: (inputs, output)
    examples: tuple[tuple[BaseModel, BaseModel], ...] = ()
    lengths: Mapping[str, int] = field(default_factory=dict)
    reask: bool = True

    def render_inputs(self) -> str:
        return self.inputs.model_dump_json(indent=None)


@dataclass
class Judged(Generic[OutT]):
    """Answers to a prompt (one per requested choice) and what they cost."""

    values: list[OutT]
    usage: Usage = field(default_factory=Usage)

    @property
    def value(self) -> OutT:
        return self.values[0]


@dataclass
class Embedded:
    vectors: list[list[float]]
    usage: Usage = field(default_factory=Usage)


class JudgeError(Exception):
    """A judge step that failed for good (after the SDK's own retries and one re-ask).

    ``reason`` is a short bounded label used in metrics and logs:
    ``timeout``, ``rate_limited``, ``server_error``, ``connection``,
    ``bad_request``, ``invalid_output``, ``budget``.
    """

    def __init__(self, reason: str, detail: str = "", *, retryable: bool = False) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        self.retryable = retryable


class BudgetExhausted(JudgeError):
    """The token budget cannot cover this call now."""

    def __init__(self, needed: int, available: int) -> None:
        super().__init__("budget", f"needs ~{needed} tokens, {available} left", retryable=True)
        self.needed = needed
        self.available = available


class TokenGate(Protocol):
    """The budget as a judge sees it (implemented by `budget.TokenBudget`)."""

    def reserve(self, tokens: int) -> None:
        """Take ``tokens`` from the budget or raise `BudgetExhausted`."""

    def reconcile(self, reserved: int, used: int) -> None:
        """Replace a reservation by what the call really used."""


class Judge(Protocol):
    """Anything that can answer prompts and embed text."""

    #: ``llm`` or ``local``; stamped on every result it produces
    kind: str

    async def generate(self, prompt: Prompt[OutT], n: int = 1) -> Judged[OutT]:
        """Answer ``prompt`` with ``n`` independent choices (``n`` > 1 only for sampling steps)."""
        ...

    async def embed(self, texts: Sequence[str]) -> Embedded:
        """One vector per text, in order."""
        ...


# --- the wire form of a prompt, shared by the LLM judge and the test judge server


def pin_lengths(schema: dict[str, Any], lengths: Mapping[str, int]) -> dict[str, Any]:
    """``schema`` with each named top-level list property pinned to exactly that many items.

    ``minItems``/``maxItems`` are part of the subset strict structured outputs
    accept, and llama.cpp's grammar honours them. A copy; ``schema`` is not changed.
    """
    if not lengths:
        return schema
    pinned = copy.deepcopy(schema)
    for name, count in lengths.items():
        prop = pinned.get("properties", {}).get(name)
        if not isinstance(prop, dict) or prop.get("type") != "array":
            raise ValueError(f"{name!r} is not a list field of the output schema")
        prop["minItems"] = prop["maxItems"] = count
    return pinned


STEP_LINE = "Step: "
INPUT_LINE = "Input:"


def render_messages(prompt: Prompt[OutT], *, schema_in_text: bool) -> list[dict[str, str]]:
    """Chat messages for ``prompt``: the stable instruction (and examples) first, the inputs last.

    With ``schema_in_text`` (the json_object fallback) the output JSON schema is
    spelled out in the system message, since the endpoint will not enforce it.
    """
    import json

    system = prompt.instruction.strip()
    for example_in, example_out in prompt.examples:
        system += (
            "\n\nExample input:\n"
            + example_in.model_dump_json()
            + "\nExample output:\n"
            + example_out.model_dump_json()
        )
    if schema_in_text:
        system += (
            "\n\nAnswer with one JSON object and nothing else, matching this JSON schema:\n"
            + json.dumps(
                pin_lengths(prompt.output.model_json_schema(), prompt.lengths),
                separators=(",", ":"),
            )
        )
    user = f"{STEP_LINE}{prompt.step}\n{INPUT_LINE}\n{prompt.render_inputs()}"
    return [{"role": "system", "content": system}, {"role": "user", "content": user}]


def parse_user_message(content: str) -> tuple[str, str]:
    """Inverse of the user message of `render_messages`: (step, inputs JSON text)."""
    head, _, rest = content.partition("\n")
    if not head.startswith(STEP_LINE):
        raise ValueError("not a rag-monitor prompt: missing step line")
    marker, _, inputs = rest.partition("\n")
    if marker != INPUT_LINE:
        raise ValueError("not a rag-monitor prompt: missing input line")
    return head[len(STEP_LINE) :], inputs
