"""A prompt in the chat-completions wire form: messages, the output's JSON schema, and back.

Shared by the LLM judge (`monitor.judges.llm`), which sends prompts in this
form, and the deterministic test judge server, which reads them back
(`parse_user_message`) to answer each step. A request's `Form` (response format, the
cap's field) and what to change in it when an endpoint refuses a part (`FALLBACKS`) are
here too: `chat_body` puts a prompt's messages in that form.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Literal

from pydantic import BaseModel

from monitor.judges import OutT, Prompt

ResponseMode = Literal["json_schema", "json_object"]
#: the request field that carries the cap: ``max_tokens`` (every OpenAI-compatible server)
#: until the endpoint refuses it and names it; then ``max_completion_tokens``
CapParam = Literal["max_tokens", "max_completion_tokens"]
#: the parts of a chat request an endpoint may refuse while another form works
Part = Literal["response_format", "max_tokens"]


@dataclass(frozen=True)
class Fallback:
    """When an endpoint refuses ``part`` of a chat request: the setting of `Form` that put
    it, from what to what it changes, and what the observer and the log hear."""

    part: Part
    setting: Literal["response_mode", "cap_param"]
    before: str
    after: str
    outcome: str
    warning: str


#: the refusal fallbacks, as data. Each is taken once at most, so a request is sent three
#: times at most
FALLBACKS: dict[Part, Fallback] = {
    fallback.part: fallback
    for fallback in (
        Fallback(
            "response_format", "response_mode", "json_schema", "json_object", "fallback",
            "judge endpoint rejected response_format json_schema; "
            "falling back to json_object with the schema in the prompt",
        ),
        Fallback(
            "max_tokens", "cap_param", "max_tokens", "max_completion_tokens", "fallback_cap",
            "judge endpoint refused max_tokens; sending the cap as max_completion_tokens",
        ),
    )
}  # fmt: skip


@dataclass(frozen=True)
class Form:
    """How a chat request is put: its response format and the field of its cap."""

    response_mode: ResponseMode = "json_schema"
    cap_param: CapParam = "max_tokens"

    @property
    def refusable(self) -> frozenset[Part]:
        """The parts of a request in this form that have another form."""
        return frozenset(f.part for f in FALLBACKS.values() if getattr(self, f.setting) == f.before)

    def after(self, fallback: Fallback) -> Form:
        """This form, with the refused part in its other form."""
        changes: dict[str, Any] = {fallback.setting: fallback.after}
        return replace(self, **changes)


def strict_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema in the subset strict structured outputs accept.

    Every object gets ``additionalProperties: false`` and lists all its
    properties as required (optional fields stay nullable through their
    ``anyOf``); ``default`` values are dropped, as strict mode rejects them.
    """
    schema = copy.deepcopy(model.model_json_schema())

    def fix(node: object) -> None:
        if not isinstance(node, dict):
            return
        node.pop("default", None)
        props = node.get("properties")
        if node.get("type") == "object" or isinstance(props, dict):
            props = props if isinstance(props, dict) else {}
            node["additionalProperties"] = False
            node["required"] = list(props)
            for sub in props.values():
                fix(sub)
        for key in ("$defs", "definitions"):
            for sub in (node.get(key) or {}).values():
                fix(sub)
        for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
            for sub in node.get(key) or []:
                fix(sub)
        fix(node.get("items"))

    fix(schema)
    return schema


@functools.lru_cache(maxsize=256)
def request_schema(
    model: type[BaseModel], lengths: tuple[tuple[str, int], ...] = ()
) -> dict[str, Any]:
    """`strict_schema` with pinned lengths, once per output model and lengths (the SDK copies
    what it sends; never mutated)."""
    return pin_lengths(strict_schema(model), dict(lengths))


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


def chat_body(
    prompt: Prompt[OutT],
    messages: list[dict[str, str]],
    *,
    model: str,
    form: Form,
    cap: int,
    n: int = 1,
    temperature: float | None = None,
) -> dict[str, Any]:
    """The body of a chat request for ``prompt`` in ``form``; ``messages`` rendered for it."""
    body: dict[str, Any] = {"model": model, "messages": messages}
    if form.response_mode == "json_schema":
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {
                "name": prompt.step,
                "schema": request_schema(prompt.output, tuple(prompt.lengths.items())),
                "strict": True,
            },
        }
    else:
        body["response_format"] = {"type": "json_object"}
    if n > 1:
        body["n"] = n
    if temperature is not None:
        body["temperature"] = temperature
    body[form.cap_param] = cap
    return body
