"""Reading an OpenAI-compatible endpoint's answers: choices, embeddings, token usage, validation.

Pure functions over the JSON bodies the LLM judge (`monitor.judges.llm`)
receives: a body that is not what was asked for raises `JudgeError`
(``invalid_output``); an answer that does not validate against the step's
output model comes back as `Invalid`, which says why without the answer text,
or as `Truncated` when the endpoint cut it off at the request's cap; `reask` is what
goes back to the model about such an answer.
"""

from __future__ import annotations

import array
import base64
import binascii
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from monitor.judges import JudgeError, OutT
from monitor.judges.steps import Statements
from monitor.text.sentences import sentences
from monitor.tokens import count_tokens


class Invalid(Exception):
    """An answer that does not validate: why (no answer text), and the answer for the re-ask."""

    def __init__(self, summary: str, content: str | None) -> None:
        super().__init__(summary)
        self.summary = summary
        self.content = content


class Truncated(Invalid):
    """An answer the endpoint cut off at the request's cap (``finish_reason`` ``length``)
    before it was valid: a model that ran on (looping, restating its input)."""

    def __init__(self, cap: int, content: str | None) -> None:
        super().__init__(f"cut off at its cap of {cap} tokens", content)
        self.cap = cap


#: appended (as a user message, after the start of the bad answer) when an answer fails
#: validation
CORRECTION = (
    "Your previous answer was not valid: {error}. Answer again with only one JSON object "
    "that matches the required schema exactly, and nothing else."
)
#: appended the same way when an answer was cut off at its cap
CUT_OFF = (
    "Your previous answer was cut off after {cap} tokens, before its JSON object was "
    "complete. Answer again, shorter: one complete JSON object that matches the required "
    "schema, each item once, short reasons, and nothing else."
)
#: how much of a bad answer goes back with the correction (its start, in characters): the
#: model sees what it answered, and a runaway answer cannot make the re-ask longer than
#: the endpoint's context
EXCERPT_CHARS = 300


def reask(answer: Invalid) -> list[dict[str, str]]:
    """The messages that follow a prompt to re-ask it once after ``answer``: the answer's
    start (`EXCERPT_CHARS`) and a short correction."""
    text = answer.content or ""
    excerpt = text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"
    correction = (
        CUT_OFF.format(cap=answer.cap)
        if isinstance(answer, Truncated)
        else CORRECTION.format(error=answer.summary)
    )
    return [
        {"role": "assistant", "content": excerpt},
        {"role": "user", "content": correction},
    ]


def failure_reason(answer: Invalid) -> str:
    """The `JudgeError` reason of a step whose answer stayed ``answer``."""
    return "truncated" if isinstance(answer, Truncated) else "invalid_output"


def request_outcome(answers: Sequence[object], reasks: bool) -> str:
    """The judge observer's outcome of a chat request whose choices read as ``answers``;
    ``reasks``: whether the step re-asks an invalid answer (else its metrics fall back to
    the basic steps)."""
    if any(isinstance(a, Truncated) for a in answers):
        return "truncated"
    if any(isinstance(a, Invalid) for a in answers):
        return "invalid_output" if reasks else "fallback_steps"
    return "ok"


def _parse(model: type[OutT], content: str | None, lengths: Mapping[str, int]) -> OutT:
    if content is None or not content.strip():
        raise Invalid("empty answer", content)
    text = _strip_fences(content)
    try:
        value = model.model_validate_json(text)
    except ValidationError as exc:
        errors = exc.errors(include_input=False, include_url=False)
        if errors and errors[0]["type"] == "json_invalid":
            raise Invalid("not a JSON object", content) from None
        fields = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'answer'}: {e['msg']}" for e in errors[:5]
        )
        raise Invalid(f"does not match the schema ({fields})", content) from None
    wrong = [
        f"{name}: {len(getattr(value, name))} items, expected exactly {count}"
        for name, count in lengths.items()
        if len(getattr(value, name)) != count
    ]
    if wrong:
        raise Invalid(f"does not match the schema ({'; '.join(wrong)})", content)
    return value


def one_claim_per_sentence(value: OutT) -> OutT:
    """A ``statements`` answer with each statement cut at its sentence boundaries.

    Small models often return a whole paragraph as one statement, so an added
    claim in its second sentence is verified together with the first and
    passes with it. The step asks for one claim per statement at either
    atomicity, so a statement of two sentences is two statements. Other
    answers come back unchanged.
    """
    if not isinstance(value, Statements):
        return value
    split = [part for statement in value.statements for part in sentences(statement)]
    if split == value.statements:
        return value
    return value.model_copy(update={"statements": split})


def try_parse(model: type[OutT], content: str | None, lengths: Mapping[str, int]) -> OutT | Invalid:
    """``content`` validated as ``model`` with ``lengths`` checked, or `Invalid` saying why."""
    try:
        return _parse(model, content, lengths)
    except Invalid as invalid:
        return invalid


def read_answer(
    model: type[OutT],
    content: str | None,
    lengths: Mapping[str, int],
    finish_reason: str | None,
    cap: int,
) -> OutT | Invalid:
    """One choice validated as `try_parse` does; an invalid one the endpoint stopped at
    ``cap`` (``finish_reason`` ``length``) is `Truncated`. A valid one stands, cut off or
    not: a model that pads a complete object with whitespace up to the cap still answered."""
    answer = try_parse(model, content, lengths)
    if isinstance(answer, Invalid) and finish_reason == "length":
        return Truncated(cap, content)
    return answer


def _index(item: dict[str, Any]) -> int:
    index = item.get("index")
    return index if isinstance(index, int) else 0


@dataclass(frozen=True)
class ChatReply:
    """A chat completion's body as read: per choice (in index order) its content and why
    it ended (``stop``, ``length`` at the cap, ...; None when not said), and ``usage``."""

    contents: list[str | None]
    finish_reasons: list[str | None]
    usage: Mapping[str, Any] | None


def chat_contents(data: object) -> ChatReply:
    """A chat completion's body → its `ChatReply`; `JudgeError` if it is not one."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        raise JudgeError("invalid_output", "the endpoint's answer is not a chat completion")
    ordered = sorted(choices, key=_index)
    contents: list[str | None] = []
    reasons: list[str | None] = []
    for choice in ordered:
        message = choice.get("message")
        content = message.get("content") if isinstance(message, dict) else None
        contents.append(content if isinstance(content, str) else None)
        reason = choice.get("finish_reason")
        reasons.append(reason if isinstance(reason, str) else None)
    usage = data.get("usage") if isinstance(data, dict) else None
    return ChatReply(contents, reasons, usage if isinstance(usage, dict) else None)


def _strip_fences(text: str) -> str:
    """Some json_object endpoints still wrap the object in a Markdown code fence."""
    stripped = text.strip()
    if stripped.startswith("```"):
        stripped = stripped.split("\n", 1)[1] if "\n" in stripped else ""
        if stripped.rstrip().endswith("```"):
            stripped = stripped.rstrip()[:-3]
    return stripped.strip()


def embedding_vectors(data: object, expected: int) -> tuple[list[list[float]], int | None]:
    """An embeddings body → (vectors in input order, reported prompt tokens); `JudgeError` if bad.

    Each ``embedding`` is base64 of little-endian float32 (as asked) or, from
    endpoints that ignore ``encoding_format``, a list of numbers.
    """
    items = data.get("data") if isinstance(data, dict) else None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise JudgeError("invalid_output", "the endpoint's answer is not a list of embeddings")
    if len(items) != expected:
        raise JudgeError("invalid_output", f"{len(items)} embeddings for {expected} texts")
    ordered = sorted(items, key=_index)
    vectors: list[list[float]] = []
    for item in ordered:
        raw = item.get("embedding")
        if isinstance(raw, str):
            try:
                packed = array.array("f", base64.b64decode(raw, validate=True))
            except (ValueError, binascii.Error):
                raise JudgeError("invalid_output", "an embedding is not base64 float32") from None
            if sys.byteorder != "little":
                packed.byteswap()
            vectors.append(packed.tolist())
        elif isinstance(raw, list) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) for x in raw
        ):
            vectors.append([float(x) for x in raw])
        else:
            raise JudgeError("invalid_output", "an embedding is neither base64 nor numbers")
    if not vectors or not vectors[0] or any(len(v) != len(vectors[0]) for v in vectors):
        raise JudgeError("invalid_output", "embeddings of different or zero dimensions")
    usage = data.get("usage") if isinstance(data, dict) else None
    tokens = usage.get("prompt_tokens") if isinstance(usage, dict) else None
    return vectors, tokens if isinstance(tokens, int) and not isinstance(tokens, bool) else None


def token_usage(
    reported: Mapping[str, Any] | None,
    estimate: int,
    contents: list[str | None],
    model: str,
    cap: int | None = None,
) -> tuple[int, int]:
    """(prompt, completion) tokens: the response's ``usage``, our own count where it is missing.

    llama.cpp's ``llama-server`` counts one choice only when ``n`` > 1; when
    several choices came back and the reported completion tokens are fewer
    than our own count of their text, our count wins. Our own count is made
    only when it can matter, and counts a choice at most ``cap`` (the request's cap per
    choice: the endpoint stopped there in its own tokens, which ours only estimate).
    """

    def counted() -> int:
        counts = (count_tokens(c, model) for c in contents if c)
        return sum(counts if cap is None else (min(n, cap) for n in counts))

    def number(key: str) -> int:
        value = reported.get(key) if reported is not None else None
        return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0

    if reported is None:
        return estimate, counted()
    prompt_tokens = number("prompt_tokens") or estimate
    completion = number("completion_tokens")
    if len(contents) > 1:
        completion = max(completion, counted())
    elif not completion:
        completion = counted()
    return prompt_tokens, completion
