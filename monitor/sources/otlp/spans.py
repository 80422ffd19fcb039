"""OTLP span messages → `Span` values: decoding, keeping only what trace assembly reads.

See docs/opentelemetry.md, "Setting it up" (the messages) and "Buffering and delivery".
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal, NamedTuple

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from monitor.records import InvalidRecord

OtlpFormat = Literal["otlp_proto", "otlp_json"]
AttrValue = str | bool | int | float | tuple[Any, ...] | dict[str, Any]

# --- attribute names (OpenInference, then OTel GenAI, then resource)

SPAN_KIND = "openinference.span.kind"
INPUT_VALUE = "input.value"
INPUT_MIME = "input.mime_type"
OUTPUT_VALUE = "output.value"
OUTPUT_MIME = "output.mime_type"
DOCUMENTS = "retrieval.documents."
LLM_INPUT = "llm.input_messages."
LLM_OUTPUT = "llm.output_messages."
LLM_MODEL = "llm.model_name"
METADATA = "metadata"  # OpenInference: the application's metadata, a JSON object
GENAI_OPERATION = "gen_ai.operation.name"
GENAI_INPUT = "gen_ai.input.messages"
GENAI_OUTPUT = "gen_ai.output.messages"
GENAI_DOCUMENTS = "gen_ai.retrieval.documents"
GENAI_QUERY = "gen_ai.retrieval.query.text"
GENAI_MODEL = "gen_ai.request.model"
SERVICE = "service.name"
ENVIRONMENT = ("deployment.environment.name", "deployment.environment")

_KEEP = frozenset(
    {SPAN_KIND, INPUT_VALUE, INPUT_MIME, OUTPUT_VALUE, OUTPUT_MIME, LLM_MODEL, METADATA,
     GENAI_OPERATION,
     GENAI_INPUT, GENAI_OUTPUT, GENAI_DOCUMENTS, GENAI_QUERY, GENAI_MODEL, SERVICE, *ENVIRONMENT}
)  # fmt: skip
_KEEP_PREFIXES = (DOCUMENTS, LLM_INPUT, LLM_OUTPUT)
#: what a kept span costs beyond its text (bookkeeping estimate, bytes)
_SPAN_OVERHEAD = 400
_ATTRIBUTE_OVERHEAD = 64


class Span(NamedTuple):
    """One span, reduced to what assembly reads. Ids are lower-case hex.

    A named tuple: a message's spans are built in the fetch loop, where a frozen
    dataclass's slower construction showed (``bench/otlp_assembly.py``).
    """

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    start_ns: int
    end_ns: int
    attributes: Mapping[str, AttrValue]
    #: the resource's kept attributes (``service.name``, the environment, the route)
    resource: Mapping[str, AttrValue]
    size: int

    @property
    def is_root(self) -> bool:
        return self.parent_span_id is None


# --- decoding


def decode_spans(
    value: bytes | None,
    fmt: OtlpFormat,
    *,
    route_attribute: str | None = None,
    skip: Callable[[str], bool] | None = None,
) -> list[Span]:
    """One Kafka message (an ``ExportTraceServiceRequest``) → its spans.

    A span of a trace for which ``skip(trace_id)`` is true keeps no attributes (the
    trace will not be assembled: the sampler drops it whatever its content).
    Raises `InvalidRecord` with reason ``not_otlp`` when the bytes are not a request
    (the detail says what failed, never quotes the content).
    """
    if value is None:
        raise InvalidRecord("not_otlp", "empty value (tombstone)")
    request = ExportTraceServiceRequest()
    if fmt == "otlp_proto":
        try:
            request.ParseFromString(value)
        except DecodeError:
            raise InvalidRecord(
                "not_otlp", "not an OTLP protobuf ExportTraceServiceRequest"
            ) from None
    else:
        try:
            data = json.loads(value)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise InvalidRecord("not_otlp", f"not JSON: {type(exc).__name__}") from None
        if not isinstance(data, dict):
            raise InvalidRecord("not_otlp", "top level is not an object")
        try:
            _hex_ids_to_base64(data)
            json_format.ParseDict(data, request, ignore_unknown_fields=True)
        except (json_format.ParseError, ValueError, TypeError, AttributeError) as exc:
            raise InvalidRecord(
                "not_otlp", f"not an OTLP JSON ExportTraceServiceRequest: {type(exc).__name__}"
            ) from None
    if value and not request.resource_spans:
        raise InvalidRecord("not_otlp", "no resource spans in a non-empty message")
    keep = _KEEP | {route_attribute} if route_attribute else _KEEP
    skipped: dict[bytes, bool] = {}
    spans: list[Span] = []
    for resource_spans in request.resource_spans:
        resource, resource_size = _attributes(resource_spans.resource.attributes, keep, ())
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                if len(span.trace_id) != 16 or len(span.span_id) != 8:
                    raise InvalidRecord(
                        "not_otlp", "a span's trace or span id has the wrong length"
                    )
                raw_id = span.trace_id
                trace_id = raw_id.hex()
                drop = skipped.get(raw_id) if skip is not None else False
                if drop is None and skip is not None:
                    drop = skipped[raw_id] = skip(trace_id)
                if drop:
                    attributes: dict[str, AttrValue] = {}
                    size = _SPAN_OVERHEAD
                else:
                    attributes, size = _attributes(span.attributes, keep, _KEEP_PREFIXES)
                    size += _SPAN_OVERHEAD + resource_size + len(span.name)
                spans.append(
                    Span(
                        trace_id=trace_id,
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex() or None,
                        name=span.name,
                        start_ns=span.start_time_unix_nano,
                        end_ns=span.end_time_unix_nano,
                        attributes=attributes,
                        resource=resource,
                        size=size,
                    )
                )
    return spans


def _hex_ids_to_base64(data: dict[str, Any]) -> None:
    """OTLP JSON writes ids as hex; the protobuf JSON mapping reads bytes as base64."""
    for resource_spans in data.get("resourceSpans") or ():
        for scope_spans in resource_spans.get("scopeSpans") or ():
            for span in scope_spans.get("spans") or ():
                items = [span, *(span.get("links") or ())]
                for item in items:
                    for name in ("traceId", "spanId", "parentSpanId"):
                        text = item.get(name)
                        if isinstance(text, str) and text:
                            item[name] = base64.b64encode(bytes.fromhex(text)).decode("ascii")


def _attributes(
    pairs: Iterable[Any], keep: frozenset[str] | set[str], prefixes: tuple[str, ...]
) -> tuple[dict[str, AttrValue], int]:
    """The kept attributes, and what they cost (bytes, an estimate)."""
    out: dict[str, AttrValue] = {}
    size = 0
    for pair in pairs:
        key = pair.key
        if key in keep or key.startswith(prefixes):
            any_value = pair.value
            if any_value.WhichOneof("value") == "string_value":  # the common case, inline
                text = any_value.string_value
                out[key] = text
                size += len(key) + len(text) + _ATTRIBUTE_OVERHEAD
                continue
            value = _value(any_value)
            if value is not None:
                out[key] = value
                size += len(key) + _size(value) + _ATTRIBUTE_OVERHEAD
    return out, size


def _value(value: AnyValue) -> AttrValue | None:
    kind = value.WhichOneof("value")
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "array_value":
        return tuple(
            v for v in (_value(item) for item in value.array_value.values) if v is not None
        )
    if kind == "kvlist_value":
        return {
            kv.key: v for kv in value.kvlist_value.values if (v := _value(kv.value)) is not None
        }
    return None  # bytes, or no value


def _size(value: object) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, tuple):
        return sum(_size(v) + 8 for v in value)
    if isinstance(value, dict):
        return sum(len(k) + _size(v) + 16 for k, v in value.items())
    return 8


# --- assembly
