"""What a judge is asked, answers and fails with: the `Judge` contract judges and metrics share.

See docs/design.md, "Judges".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from pydantic import BaseModel

from monitor.records import Usage

OutT = TypeVar("OutT", bound=BaseModel)


@dataclass(frozen=True)
class Prompt(Generic[OutT]):
    """One judge step.

    ``step`` names the step (``statements``, ``verify``, ``questions``,
    ``usefulness``, or the fused ``grounding`` of the frugal pattern; see
    `monitor.judges.steps`); it is also the JSON-schema name sent to the endpoint, so
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
    """A judge step that failed for good (after the judge's retries and one re-ask).

    ``reason`` is a short bounded label used in metrics and logs:
    ``timeout``, ``rate_limited``, ``server_error``, ``connection``, ``auth`` (the
    key refused: HTTP 401 or 403), ``too_long`` (the request does not fit the model's
    context), ``bad_request`` (any other refusal), ``invalid_output``, ``truncated``
    (the answer cut off at its cap, also after its re-ask), ``budget``.
    """

    def __init__(self, reason: str, detail: str = "", *, retryable: bool = False) -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
        self.retryable = retryable


class BudgetExhausted(JudgeError):
    """The token budget cannot cover this call now."""

    #: its `JudgeError.reason`, and the skip reason of a record it stopped (`monitor.budget`)
    REASON = "budget"

    def __init__(self, needed: int, available: int) -> None:
        super().__init__(self.REASON, f"needs ~{needed} tokens, {available} left", retryable=True)
        self.needed = needed
        self.available = available


class TokenGate(Protocol):
    """The budget as a judge sees it (implemented by `budget.TokenBudget`)."""

    def reserve(self, tokens: int) -> None:
        """Take ``tokens`` from the budget or raise `BudgetExhausted`."""

    def reconcile(self, reserved: int, used: int) -> None:
        """Replace a reservation by what the call really used."""

    async def room(self, tokens: int) -> None:
        """Return once ``reserve(tokens)`` is worth trying: at once, unless it would fail
        only for what calls in flight hold (they give back what they reserved beyond their
        use when they end); then when one of them ends."""


class Judge(Protocol):
    """Anything that can answer prompts and embed text.

    Constructing one opens nothing; `aclose` lets go of what it opened (HTTP
    connections, worker threads) and is called once by whoever built it.
    """

    #: ``llm`` or ``local``: names the judge in metric labels and is stamped on every
    #: result it produces
    kind: str

    @property
    def fuse_grounding(self) -> bool:
        """Whether `monitor.scoring.Scorer` may ask it the fused ``grounding`` step.

        ``RAG_MONITOR_JUDGE_FUSE_GROUNDING`` for the LLM judge; False for a judge
        that answers only the basic steps.
        """
        ...

    @property
    def varies_choices(self) -> bool:
        """Whether ``n`` choices of one prompt can differ (False: it answers every choice
        alike, so `monitor.scoring.Scorer` asks it for one)."""
        ...

    @property
    def reads_metric(self) -> bool:
        """Whether its answer to a prompt depends on the metric that asks it (the local
        judge reads faithfulness's claims as one answer, another metric's one by one): then
        `monitor.scoring.Scorer` shares an answer only within the metric that asked."""
        ...

    async def generate(self, prompt: Prompt[OutT], n: int = 1) -> Judged[OutT]:
        """Answer ``prompt`` with ``n`` independent choices (``n`` > 1 only for sampling steps)."""
        ...

    async def embed(self, texts: Sequence[str]) -> Embedded:
        """One vector per text, in order."""
        ...

    async def aclose(self) -> None:
        """Close what the judge opened; it answers nothing after."""
        ...


#: what `model_name` reports for a judge that names no model (the local judge's word rules)
BUILTIN_MODEL = "builtin"


def model_name(judge: Judge) -> str:
    """The judge's model, as it reports it: a local judge's ``model_name``, the LLM judge's
    ``model`` (the endpoint's model it asks), else `BUILTIN_MODEL`."""
    for attribute in ("model_name", "model"):
        value = getattr(judge, attribute, None)
        if isinstance(value, str) and value:
            return value
    return BUILTIN_MODEL
