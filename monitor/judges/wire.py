"""A prompt in the chat-completions wire form: messages, the output's JSON schema, and back.

Shared by the LLM judge (`monitor.judges.llm`), which sends prompts in this
form, and the deterministic test judge server, which reads them back
(`parse_user_message`) to answer each step.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from monitor.judges import OutT, Prompt


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
