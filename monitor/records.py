"""The shared vocabulary: interactions as they arrive, and scores as they leave.

Pure types, no I/O. Everything else in the package speaks in these.
"""

from __future__ import annotations

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
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

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
    def _fill_in(cls, data: Any, info: ValidationInfo) -> Any:
        """The transport's id and time where the record has none (`parse_record`), and the
        trace from ``metadata.trace_id``/``span_id``."""
        if not isinstance(data, dict):
            return data
        arrival = info.context
        if arrival is not None:
            if "id" not in data and arrival.key:
                try:
                    data["id"] = arrival.key.decode("utf-8")
                except UnicodeDecodeError:
                    raise PydanticCustomError(_KEY_NOT_UTF8, "record key is not UTF-8") from None
            if data.get("timestamp") is None and arrival.timestamp is not None:
                data["timestamp"] = arrival.timestamp
        if data.get("trace_id") is not None:
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


def too_large(size: int, limit: int) -> InvalidRecord | None:
    """The InvalidRecord of a record of ``size`` bytes over ``limit``; None within it.

    Checked once, where records come in (the Kafka source, the file `score` reads), before
    anything parses them.
    """
    if size <= limit:
        return None
    return InvalidRecord("too_large", f"{size} bytes > limit {limit}")


def parse_record(
    value: bytes | None,
    key: bytes | None = None,
    *,
    default_timestamp: datetime | None = None,
) -> Interaction:
    """Bytes from Kafka (or a file line) to an Interaction, or InvalidRecord.

    One pass of pydantic's JSON validation (`Interaction.model_validate_json`): the
    Kafka key stands in for a missing ``id``, ``default_timestamp`` for a missing
    ``timestamp``. Reasons: ``not_utf8``, ``not_json``, ``not_object``, ``schema``,
    ``empty_response`` (a response that is empty or blank: the RAG service answered
    nothing, so there is nothing to score). The detail names the field but never quotes
    the record's text.
    """
    if value is None:
        raise InvalidRecord("not_json", "empty value (tombstone)")
    context = _Arrival(key, default_timestamp) if key or default_timestamp else None
    try:
        interaction = Interaction.model_validate_json(value, context=context)
    except ValidationError as exc:
        raise _invalid(value, exc) from None
    if not interaction.response.strip():
        raise InvalidRecord("empty_response", "response: empty or blank")
    return interaction


class _Arrival(NamedTuple):
    """What the transport knows of a record (`parse_record`'s validation context)."""

    key: bytes | None
    timestamp: datetime | None


def _invalid(value: bytes, exc: ValidationError) -> InvalidRecord:
    """The InvalidRecord a failed `Interaction.model_validate_json` stands for."""
    errors = exc.errors(include_input=False, include_url=False)
    kind = errors[0]["type"] if len(errors) == 1 else ""
    if kind == "json_invalid":
        try:
            value.decode("utf-8")
        except UnicodeDecodeError as bad:
            return InvalidRecord("not_utf8", f"invalid UTF-8 at byte {bad.start}")
        return InvalidRecord("not_json", _json_position(errors[0]["msg"], value))
    if kind == "model_type" and not errors[0]["loc"]:
        first = value.lstrip()[:1]
        found = _JSON_KINDS.get(first, "number")
        return InvalidRecord("not_object", f"top level is {found}, not an object")
    if kind == _KEY_NOT_UTF8:
        return InvalidRecord("not_utf8", "record key is not UTF-8 and no id field")
    return InvalidRecord("schema", describe_validation_error(exc))


def _json_position(message: str, value: bytes) -> str:
    """The JSON parser's message, its position said of the record: ``at column C`` for a
    record on one line (a file's line numbers are the reader's; "line 1" would be a second
    one), ``at line L, column C of the record`` for one that spans lines."""
    message = message.removeprefix("Invalid JSON: ")
    found = _JSON_POSITION.search(message)
    if found is None:
        return message
    line, column = found.groups()
    where = (
        f"at column {column}"
        if b"\n" not in value.rstrip(b"\r\n")
        else (f"at line {line}, column {column} of the record")
    )
    return message[: found.start()] + where


#: where serde_json (pydantic's JSON parser) says an error is
_JSON_POSITION = re.compile(r"at line (\d+) column (\d+)$")
_KEY_NOT_UTF8 = "key_not_utf8"
#: a JSON value's kind by its first byte (the rest are numbers)
_JSON_KINDS = {b"[": "an array", b'"': "a string", b"t": "true", b"f": "false", b"n": "null"}


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


#: reference-free metrics, scored in production
ONLINE_METRICS: tuple[str, ...] = ("faithfulness", "response_relevancy", "context_utility")
#: reference-based metrics, scored on annotated backlog rows
OFFLINE_METRICS: tuple[str, ...] = (
    "context_precision",
    "precision_at_k",
    "context_recall",
    "factual_correctness",
    "noise_sensitivity",
    "semantic_similarity",
)
#: every `MetricResult.metric` (the settings check metric names against it)
ALL_METRICS: tuple[str, ...] = ONLINE_METRICS + OFFLINE_METRICS


class MetricResult(BaseModel):
    """One metric's outcome for one record. ``score`` is NaN when unscoreable."""

    metric: str
    score: float
    details: dict[str, Any] = Field(default_factory=dict)
    #: the kind of judge that produced it (``llm`` or ``local``: a bounded metric label)
    judge: str = "llm"
    #: that judge's model, as ``rag_monitor_judge_info`` names it (None: not recorded)
    judge_model: str | None = None
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

    @property
    def weight(self) -> float:
        """How many records of all traffic this one stands for: 1/p (0 when p is 0)."""
        p = self.inclusion_probability
        return 1.0 / p if p > 0 else 0.0

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
