"""The shared vocabulary: interactions as they arrive, and scores as they leave.

Pure types, no I/O. Everything else in the package speaks in these.
"""

from __future__ import annotations

import json
import math
import re
from datetime import datetime
from enum import StrEnum
from typing import Any, NamedTuple

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

#: Largest record value accepted from Kafka or a file, in bytes.
DEFAULT_MAX_RECORD_BYTES = 1_000_000
#: what a trace or span id may look like (hex from OpenTelemetry; a metadata id that does
#: not fit is ignored, so an exemplar label never carries text)
_TRACE_ID = r"^[0-9A-Za-z_.:-]{1,64}$"


class Context(BaseModel):
    """One retrieved chunk."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    text: str
    id: str | None = None
    score: float | None = None


class Interaction(BaseModel):
    """One question/contexts/answer triple from the RAG service (docs/design.md, "The record")."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    id: str = Field(min_length=1)
    user_input: str = Field(validation_alias=AliasChoices("user_input", "question", "query"))
    retrieved_contexts: tuple[Context, ...] = Field(
        validation_alias=AliasChoices("retrieved_contexts", "contexts", "documents")
    )
    response: str = Field(validation_alias=AliasChoices("response", "answer"))
    reference: str | None = Field(
        default=None, validation_alias=AliasChoices("reference", "ground_truth")
    )
    timestamp: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    #: the trace the interaction came from (hex; ``metadata.trace_id``/``span_id`` otherwise)
    trace_id: str | None = Field(default=None, pattern=_TRACE_ID)
    span_id: str | None = Field(default=None, pattern=_TRACE_ID)

    @model_validator(mode="before")
    @classmethod
    def _trace_from_metadata(cls, data: Any) -> Any:
        if not isinstance(data, dict) or data.get("trace_id") is not None:
            return data
        metadata = data.get("metadata")
        if not isinstance(metadata, dict):
            return data
        trace_id, span_id = metadata.get("trace_id"), metadata.get("span_id")
        if isinstance(trace_id, str) and re.fullmatch(_TRACE_ID, trace_id):
            data = {**data, "trace_id": trace_id}
            if isinstance(span_id, str) and re.fullmatch(_TRACE_ID, span_id):
                data.setdefault("span_id", span_id)
        return data

    @field_validator("retrieved_contexts", mode="before")
    @classmethod
    def _contexts(cls, value: object) -> object:
        if not isinstance(value, list | tuple):
            raise ValueError("must be a list of strings or of {text, id?, score?} objects")
        return tuple(Context(text=item) if isinstance(item, str) else item for item in value)

    @property
    def context_texts(self) -> list[str]:
        return [c.text for c in self.retrieved_contexts]

    @property
    def route(self) -> str | None:
        route = self.metadata.get("route")
        return route if isinstance(route, str) else None


#: every `InvalidRecord.reason`
INVALID_REASONS = ("too_large", "not_utf8", "not_json", "not_object", "schema", "empty_response")


class InvalidRecord(Exception):
    """A record that cannot become an Interaction. `reason` is a short, bounded label."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def parse_record(
    value: bytes | None,
    key: bytes | None = None,
    *,
    max_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    default_timestamp: datetime | None = None,
) -> Interaction:
    """Bytes from Kafka (or a file line) to an Interaction, or InvalidRecord.

    Reasons: ``too_large``, ``not_utf8``, ``not_json``, ``not_object``, ``schema``,
    ``empty_response`` (a response that is empty or blank: the RAG service answered
    nothing, so there is nothing to score). The detail names the field but never
    quotes the record's text.
    """
    if value is None:
        raise InvalidRecord("not_json", "empty value (tombstone)")
    if len(value) > max_bytes:
        raise InvalidRecord("too_large", f"{len(value)} bytes > limit {max_bytes}")
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidRecord("not_utf8", f"invalid UTF-8 at byte {exc.start}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        # the message may end in "at" ("Unterminated string starting at"): the position
        # follows a colon, as in json's own message
        raise InvalidRecord(
            "not_json", f"{exc.msg}: line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise InvalidRecord("not_json", "nested too deeply") from None
    if not isinstance(data, dict):
        raise InvalidRecord("not_object", f"top level is {type(data).__name__}, not an object")
    if "id" not in data and key:
        try:
            data["id"] = key.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidRecord("not_utf8", "record key is not UTF-8 and no id field") from None
    if data.get("timestamp") is None and default_timestamp is not None:
        data["timestamp"] = default_timestamp
    return validate_record(data)


class CheckedRecord(NamedTuple):
    """A record `check_record` found valid without building its Interaction (`interaction`)."""

    data: dict[str, Any]
    id: str
    metadata: dict[str, Any]

    def interaction(self, default_timestamp: datetime | None = None) -> Interaction:
        if self.data.get("timestamp") is None and default_timestamp is not None:
            self.data["timestamp"] = default_timestamp
        return validate_record(self.data)


_CONTEXTS = ("retrieved_contexts", "contexts", "documents")
_RESPONSE = ("response", "answer")
_FIELDS = (("user_input", "question", "query"), _CONTEXTS, _RESPONSE)
#: a ``\uD800``-``\uDFFF`` escape: a surrogate, which a string field refuses unless paired
_SURROGATE = re.compile(rb"\\u[dD][89a-fA-F]")


def check_record(
    value: bytes | None, key: bytes | None = None, *, max_bytes: int = DEFAULT_MAX_RECORD_BYTES
) -> CheckedRecord | Interaction:
    """Validate a record as `parse_record` does, at a third of its cost for the usual shapes.

    The common shape (string fields, contexts as strings or ``{text, id?, score?}``, an
    object or no ``metadata``, no ``timestamp``) is checked by hand and returned as a
    CheckedRecord, whose Interaction is built only if it is needed. Anything else goes
    through `parse_record`: its Interaction, or its InvalidRecord. The hand check accepts
    nothing `parse_record` refuses (it declines whatever it is unsure of).
    """
    checked = _check_common(value, key, max_bytes)
    if checked is not None:
        return checked
    return parse_record(value, key, max_bytes=max_bytes)


def _check_common(value: bytes | None, key: bytes | None, max_bytes: int) -> CheckedRecord | None:
    if value is None or len(value) > max_bytes:
        return None
    if b"\\" in value and _SURROGATE.search(value):  # one byte: memchr, unlike b"\\u"
        return None
    try:
        data = json.loads(value.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(data, dict) or data.get("timestamp") is not None:
        return None
    rid = data.get("id")
    if rid is None and "id" not in data and key:
        try:
            rid = data["id"] = key.decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not isinstance(rid, str) or not rid:
        return None
    for aliases in _FIELDS:
        for alias in aliases:  # the first alias present is the one validated
            if alias in data:
                present = data[alias]
                break
        else:
            return None
        if aliases is _CONTEXTS:
            if not isinstance(present, list) or not all(map(_plain_context, present)):
                return None
        elif not isinstance(present, str) or (aliases is _RESPONSE and not present.strip()):
            return None  # a blank response: `validate_record` says why it is invalid
    reference = data["reference"] if "reference" in data else data.get("ground_truth")
    metadata = data["metadata"] if "metadata" in data else {}
    if reference is not None and not isinstance(reference, str):
        return None
    if not isinstance(metadata, dict):
        return None
    return CheckedRecord(data, rid, metadata)


def _plain_context(item: object) -> bool:
    if isinstance(item, str):
        return True
    if not isinstance(item, dict) or not isinstance(item.get("text"), str):
        return False
    cid, score = item.get("id"), item.get("score")
    return (cid is None or isinstance(cid, str)) and (
        score is None
        or (type(score) is float and math.isfinite(score))
        or (type(score) is int and abs(score) <= _EXACT_INT)
    )


_EXACT_INT = 2**53


def validate_record(data: dict[str, Any]) -> Interaction:
    """A record's fields to an Interaction, or InvalidRecord (``schema``, ``empty_response``).

    The model itself accepts a blank response (a stored backlog row may hold one); a
    record arriving for scoring does not: an answer of nothing is a failure of the RAG
    service, not an answer whose relevancy or utility is 0.
    """
    try:
        interaction = Interaction.model_validate(data)
    except ValidationError as exc:
        raise InvalidRecord("schema", describe_validation_error(exc)) from None
    if not interaction.response.strip():
        raise InvalidRecord("empty_response", "response: empty or blank")
    return interaction


def describe_validation_error(exc: ValidationError) -> str:
    """Field names and messages only: input values can carry user text."""
    parts = []
    for err in exc.errors(include_input=False, include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "record"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


class Verdict(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    UNSCOREABLE = "unscoreable"


class Usage(BaseModel):
    """Judge spend for one record (or one metric)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0

    def add(self, other: Usage) -> None:
        self.calls += other.calls
        self.prompt_tokens += other.prompt_tokens
        self.completion_tokens += other.completion_tokens

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class MetricResult(BaseModel):
    """One metric's outcome for one record. ``score`` is NaN when unscoreable."""

    metric: str
    score: float
    details: dict[str, Any] = Field(default_factory=dict)
    judge: str = "llm"
    error: str | None = None

    @property
    def scoreable(self) -> bool:
        return not math.isnan(self.score)

    def json_score(self) -> float | None:
        return self.score if self.scoreable else None


class ScoredRecord(BaseModel):
    """Every metric's result for one interaction, plus what it cost."""

    interaction: Interaction
    results: dict[str, MetricResult] = Field(default_factory=dict)
    usage: Usage = Field(default_factory=Usage)
    #: the record's judge spend per metric (for ``judge_tokens_total{metric,kind}``);
    #: a call shared between metrics is billed to the metric that made it
    usage_by_metric: dict[str, Usage] = Field(default_factory=dict)
    inclusion_probability: float = 1.0
    error: str | None = None

    def output_line(self) -> dict[str, Any]:
        """The JSON line of `rag-monitor score` (docs/design.md, "Contracts")."""
        line: dict[str, Any] = {
            "id": self.interaction.id,
            "scores": {name: r.json_score() for name, r in self.results.items()},
            "details": {name: r.details for name, r in self.results.items()},
            "usage": self.usage.model_dump(),
        }
        if self.error is not None:
            line["error"] = self.error
        return line
