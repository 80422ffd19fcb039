"""OpenTelemetry traces → interactions: decoding, trace assembly and the trace buffer. No Kafka.

The OpenTelemetry Collector's Kafka exporter writes one ``ExportTraceServiceRequest``
per message (``otlp_proto``, or ``otlp_json``). `decode_spans` turns a message into
`Span` values that keep only the attributes assembly reads (so a buffered trace
costs what it will be scored on, not what the service logged). `assemble` turns one
trace's spans into the record schema of an interaction, following the OpenInference
conventions or the OTel GenAI ones (README.md, "Already using OpenTelemetry?", holds
the mapping table). `TraceBuffer` holds each trace's spans until its root span has
arrived and a grace period has passed, or until a timeout, within a bound on traces
and bytes, and counts per message how many open traces still need it, so the
caller can finish (commit) a message only once every trace it holds a span of is done.

Which calls count when a trace holds several retrievals or LLM calls:

- the *answering call* is the LLM span that ended last;
- the contexts are those of the last *round* of retrievals before it: the retrieval
  that ended last before the answering call started, together with every other
  retrieval that ended before the answering call started and after the LLM call
  preceding that retrieval ended (parallel retrievers feeding the same call);
  documents keep their rank within a retrieval, retrievals their end order, and a
  document met twice (same id, else same text) is kept once;
- a retrieval that ended after the answering call started did not reach it and is ignored.
"""

from __future__ import annotations

import base64
import json
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Generic, Literal, NamedTuple, TypeVar

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
#: GenAI operations that are a model call
_GENAI_LLM = frozenset({"chat", "text_completion", "generate_content"})
_ROOT_KINDS = frozenset({"CHAIN", "AGENT"})
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


class IncompleteTrace(Exception):
    """A trace that cannot become an interaction. `reason` is a short, bounded label."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class _Retrieval:
    span: Span
    documents: list[dict[str, Any]]


def _kind(span: Span) -> str | None:
    """``retriever``, ``llm``, or None; OpenInference's kind first, then GenAI's operation."""
    kind = span.attributes.get(SPAN_KIND)
    if isinstance(kind, str):
        upper = kind.upper()
        if upper == "RETRIEVER":
            return "retriever"
        if upper == "LLM":
            return "llm"
        return None
    operation = span.attributes.get(GENAI_OPERATION)
    if operation == "retrieval":
        return "retriever"
    if operation in _GENAI_LLM:
        return "llm"
    return None


def assemble(spans: Iterable[Span], *, route_attribute: str | None = None) -> dict[str, Any]:
    """One trace's spans → a record of the interaction schema (``id`` = the trace id).

    Raises `IncompleteTrace` with ``no_llm`` (no model call), ``no_retrieval`` (no
    retrieval before the answering call), ``no_question`` or ``no_answer``.
    """
    spans = sorted(spans, key=lambda s: (s.end_ns, s.start_ns, s.span_id))
    if not spans:
        raise IncompleteTrace("no_llm")
    llms = [s for s in spans if _kind(s) == "llm"]
    if not llms:
        raise IncompleteTrace("no_llm")
    answering = llms[-1]  # ended last (ties: started last)
    rounds = _last_round(spans, llms, answering)
    if not rounds:
        raise IncompleteTrace("no_retrieval")
    root = next((s for s in spans if s.is_root), None)
    chain = _top_chain(spans)
    question = _question(chain, root, answering)
    if question is None:
        raise IncompleteTrace("no_question")
    answer = _answer(chain, answering)
    if answer is None:
        raise IncompleteTrace("no_answer")
    contexts = _merge(r.documents for r in rounds)
    anchor = root or chain or answering  # the span a score links to
    record: dict[str, Any] = {
        "id": anchor.trace_id,
        "trace_id": anchor.trace_id,
        "span_id": anchor.span_id,
        "user_input": question,
        "retrieved_contexts": contexts,
        "response": answer,
        "timestamp": _iso(min(s.start_ns for s in spans)),
        "metadata": _metadata(spans, chain or anchor, anchor, answering, route_attribute),
    }
    return record


def _last_round(spans: list[Span], llms: list[Span], answering: Span) -> list[_Retrieval]:
    before = [s for s in spans if _kind(s) == "retriever" and s.end_ns <= answering.start_ns]
    if not before:
        return []
    last = before[-1]
    earlier_llm_end = max(
        (s.end_ns for s in llms if s is not answering and s.end_ns <= last.start_ns), default=None
    )
    chosen = [s for s in before if earlier_llm_end is None or s.end_ns > earlier_llm_end]
    out = [_Retrieval(s, _documents(s)) for s in chosen]
    return [r for r in out if r.documents] or out[-1:]


def _documents(span: Span) -> list[dict[str, Any]]:
    """OpenInference's flattened ``retrieval.documents.N.document.*``, or GenAI's list."""
    found: dict[int, dict[str, Any]] = {}
    for key, value in span.attributes.items():
        if not key.startswith(DOCUMENTS):
            continue
        index, _, name = key[len(DOCUMENTS) :].partition(".document.")
        if not index.isdigit():
            continue
        doc = found.setdefault(int(index), {})
        if name == "content" and isinstance(value, str):
            doc["text"] = value
        elif name == "id" and isinstance(value, str | int):
            doc["id"] = str(value)
        elif name == "score" and isinstance(value, int | float) and not isinstance(value, bool):
            doc["score"] = float(value)
    if found:
        return [found[i] for i in sorted(found) if "text" in found[i]]
    raw = _structured(span.attributes.get(GENAI_DOCUMENTS))
    docs: list[dict[str, Any]] = []
    if isinstance(raw, list | tuple):
        for item in raw:
            if not isinstance(item, dict):
                continue
            text = item.get("content", item.get("text"))
            if not isinstance(text, str):
                continue
            entry: dict[str, Any] = {"text": text}
            if isinstance(item.get("id"), str | int):
                entry["id"] = str(item["id"])
            score = item.get("score")
            if isinstance(score, int | float) and not isinstance(score, bool):
                entry["score"] = float(score)
            docs.append(entry)
    return docs


def _merge(groups: Iterable[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    seen: set[tuple[str, str]] = set()
    out: list[dict[str, Any]] = []
    for docs in groups:
        for doc in docs:
            key = ("id", doc["id"]) if "id" in doc else ("text", doc["text"])
            if key not in seen:
                seen.add(key)
                out.append(doc)
    return out


def _top_chain(spans: list[Span]) -> Span | None:
    """The outermost CHAIN or AGENT span (the earliest to start; the longest on a tie)."""
    chains = [s for s in spans if str(s.attributes.get(SPAN_KIND, "")).upper() in _ROOT_KINDS]
    return min(chains, key=lambda s: (s.start_ns, -s.end_ns), default=None)


def _question(chain: Span | None, root: Span | None, answering: Span) -> str | None:
    if chain is not None:
        text = _plain(chain, INPUT_VALUE, INPUT_MIME)
        if text:
            return text
    if root is not None and root is not answering and SPAN_KIND not in root.attributes:
        text = _last_message(_genai_messages(root.attributes.get(GENAI_INPUT)), "user")
        if text:
            return text
    text = _plain(answering, INPUT_VALUE, INPUT_MIME)
    if text:
        return text
    text = _last_message(_flat_messages(answering, LLM_INPUT), "user")
    if text:
        return text
    return _last_message(_genai_messages(answering.attributes.get(GENAI_INPUT)), "user")


def _answer(chain: Span | None, answering: Span) -> str | None:
    if chain is not None:
        text = _plain(chain, OUTPUT_VALUE, OUTPUT_MIME)
        if text:
            return text
    text = _plain(answering, OUTPUT_VALUE, OUTPUT_MIME)
    if text:
        return text
    text = _last_message(_flat_messages(answering, LLM_OUTPUT), "assistant")
    if text:
        return text
    return _last_message(_genai_messages(answering.attributes.get(GENAI_OUTPUT)), "assistant")


def _plain(span: Span, key: str, mime_key: str) -> str | None:
    """A text attribute, unless its mime type says it is JSON (a serialised invocation)."""
    value = span.attributes.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    if span.attributes.get(mime_key) == "application/json":
        return None
    return value


def _flat_messages(span: Span, prefix: str) -> list[tuple[str, str]]:
    """OpenInference's ``llm.input_messages.N.message.role/content`` → [(role, text)]."""
    found: dict[int, dict[str, str]] = {}
    for key, value in span.attributes.items():
        if not key.startswith(prefix) or not isinstance(value, str):
            continue
        index, _, name = key[len(prefix) :].partition(".message.")
        if index.isdigit() and name in ("role", "content"):
            found.setdefault(int(index), {})[name] = value
    return [(m.get("role", ""), m["content"]) for _, m in sorted(found.items()) if "content" in m]


def _genai_messages(value: AttrValue | None) -> list[tuple[str, str]]:
    """GenAI's ``[{"role", "parts": [{"type": "text", "content"}]}]`` → [(role, text)]."""
    raw = _structured(value)
    out: list[tuple[str, str]] = []
    if not isinstance(raw, list | tuple):
        return out
    for message in raw:
        if not isinstance(message, dict):
            continue
        parts = message.get("parts")
        texts: list[str] = []
        if isinstance(parts, list | tuple):
            texts = [
                p["content"]
                for p in parts
                if isinstance(p, dict)
                and p.get("type") == "text"
                and isinstance(p.get("content"), str)
            ]
        elif isinstance(message.get("content"), str):
            texts = [message["content"]]
        if texts:
            out.append((str(message.get("role", "")), "\n".join(texts)))
    return out


def _structured(value: AttrValue | None) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return None
    return value


def _last_message(messages: list[tuple[str, str]], role: str) -> str | None:
    for who, text in reversed(messages):
        if who == role and text.strip():
            return text
    return None


def _metadata(
    spans: list[Span], chain: Span, anchor: Span, answering: Span, route_attribute: str | None
) -> dict[str, Any]:
    own = _structured(chain.attributes.get(METADATA))
    meta: dict[str, Any] = dict(own) if isinstance(own, dict) else {}
    service = anchor.resource.get(SERVICE)
    if isinstance(service, str):
        meta["service"] = service
    for name in ENVIRONMENT:
        environment = anchor.resource.get(name)
        if isinstance(environment, str):
            meta["environment"] = environment
            break
    if route_attribute:
        ordered = [anchor, *(s for s in spans if s is not anchor)]
        for span in ordered:
            route = span.attributes.get(route_attribute, span.resource.get(route_attribute))
            if isinstance(route, str):
                meta["route"] = route
                break
    model = answering.attributes.get(LLM_MODEL, answering.attributes.get(GENAI_MODEL))
    if isinstance(model, str):
        meta["model"] = model
    return meta


def _iso(unix_ns: int) -> str | None:
    if unix_ns <= 0:
        return None
    return datetime.fromtimestamp(unix_ns / 1e9, UTC).isoformat()


# --- the trace buffer

H = TypeVar("H", bound=Hashable)
P = TypeVar("P", bound=Hashable)

#: why a trace left the buffer
Closing = Literal["complete", "timeout", "overflow", "split"]


@dataclass
class _Open(Generic[H, P]):
    spans: list[Span] = field(default_factory=list)
    handles: set[H] = field(default_factory=set)
    partitions: set[P] = field(default_factory=set)
    size: int = 0
    first_seen: float = 0.0
    root_seen: float | None = None


@dataclass(frozen=True)
class ClosedTrace(Generic[H]):
    """A trace out of the buffer; hand it back to `TraceBuffer.release` once it is done."""

    trace_id: str
    spans: tuple[Span, ...]
    handles: frozenset[H]
    closing: Closing


@dataclass(frozen=True)
class Added(Generic[H]):
    """What `TraceBuffer.add` did with a message."""

    #: traces pushed out to make room (the oldest first)
    evicted: list[ClosedTrace[H]]
    #: spans of traces closed a moment ago (left out, counted)
    late_spans: int
    #: the message holds no span of an open trace: it can be finished at once
    unused: bool


class TraceBuffer(Generic[H, P]):
    """Spans held per trace until the trace is due; which messages each trace needs.

    ``H`` names a message (hashable: the caller's key for it), ``P`` the partition
    it came from. A trace is *due* ``grace`` seconds after its root span arrived, or
    ``timeout`` seconds after its first span did. Beyond ``max_traces`` traces or
    ``max_bytes`` of kept spans the oldest trace is closed with ``overflow``. A trace
    whose spans came from more than one partition closes with ``split`` (when due).
    A message stays *held* while an open or unreleased trace has a span in it.
    Time is passed in (``now``, seconds on a monotonic clock): the buffer reads no clock.
    """

    def __init__(
        self,
        *,
        grace: float,
        timeout: float,
        max_traces: int,
        max_bytes: int,
        remember: int | None = None,
    ) -> None:
        self.grace = grace
        self.timeout = timeout
        self.max_traces = max_traces
        self.max_bytes = max_bytes
        self._open: OrderedDict[str, _Open[H, P]] = OrderedDict()
        #: root arrivals in arrival order (grace is constant: deadlines come in order)
        self._roots: deque[tuple[float, str]] = deque()
        #: per message, how many traces (open or out but unreleased) need it
        self._refs: dict[H, int] = {}
        self._partition_of: dict[H, P] = {}
        #: trace ids closed lately: a span arriving after its trace closed is late
        self._closed: OrderedDict[str, None] = OrderedDict()
        self._remember = remember if remember is not None else 4 * max_traces
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._open)

    def add(self, spans: Iterable[Span], handle: H, partition: P, now: float) -> Added[H]:
        late = 0
        touched: set[str] = set()
        for span in spans:
            trace_id = span.trace_id
            if trace_id in self._closed:
                late += 1
                continue
            state = self._open.get(trace_id)
            if state is None:
                state = self._open[trace_id] = _Open(first_seen=now)
            state.spans.append(span)
            state.size += span.size
            self.bytes += span.size
            state.partitions.add(partition)
            if trace_id not in touched:
                touched.add(trace_id)
                if handle not in state.handles:
                    state.handles.add(handle)
                    self._refs[handle] = self._refs.get(handle, 0) + 1
            if span.is_root and state.root_seen is None:
                state.root_seen = now
                self._roots.append((now + self.grace, trace_id))
        if handle in self._refs:
            self._partition_of[handle] = partition
        evicted: list[ClosedTrace[H]] = []
        while self._open and (len(self._open) > self.max_traces or self.bytes > self.max_bytes):
            oldest = next(iter(self._open))
            evicted.append(self._close(oldest, "overflow"))
        return Added(evicted, late, unused=handle not in self._refs)

    def due(self, now: float) -> list[ClosedTrace[H]]:
        """Traces whose root arrived ``grace`` ago, then those open for ``timeout``."""
        out: list[ClosedTrace[H]] = []
        while self._roots and self._roots[0][0] <= now:
            _, trace_id = self._roots.popleft()
            state = self._open.get(trace_id)
            if state is not None:
                split = len(state.partitions) > 1
                out.append(self._close(trace_id, "split" if split else "complete"))
        while self._open:
            trace_id, state = next(iter(self._open.items()))
            if state.first_seen + self.timeout > now:
                break
            out.append(self._close(trace_id, "split" if len(state.partitions) > 1 else "timeout"))
        return out

    def release(self, trace: ClosedTrace[H]) -> list[H]:
        """``trace`` is done: the messages no trace needs any more."""
        free: list[H] = []
        for handle in trace.handles:
            count = self._refs.get(handle)
            if count is None:
                continue  # discarded with its partition
            if count <= 1:
                del self._refs[handle]
                self._partition_of.pop(handle, None)
                free.append(handle)
            else:
                self._refs[handle] = count - 1
        return free

    def discard(self, partition: P) -> int:
        """Forget every open trace and message of ``partition`` (revoked: it will be re-read)."""
        gone = [t for t, s in self._open.items() if partition in s.partitions]
        for trace_id in gone:
            state = self._open.pop(trace_id)
            self.bytes -= state.size
        for handle in [h for h, p in self._partition_of.items() if p == partition]:
            self._refs.pop(handle, None)
            del self._partition_of[handle]
        self._closed.clear()  # a re-read of the partition brings these traces again
        return len(gone)

    def close_oldest(self) -> ClosedTrace[H] | None:
        """Close the oldest open trace early (``overflow``); None when none is open."""
        if not self._open:
            return None
        return self._close(next(iter(self._open)), "overflow")

    def held_total(self) -> int:
        """Messages needed by a trace that is still open, over every partition."""
        needed: set[H] = set()
        for state in self._open.values():
            needed.update(state.handles)
        return len(needed)

    def held(self, partition: P) -> int:
        """Messages of ``partition`` needed by a trace that is still open."""
        needed: set[H] = set()
        for state in self._open.values():
            if partition in state.partitions:
                needed.update(h for h in state.handles if self._partition_of.get(h) == partition)
        return len(needed)

    def _close(self, trace_id: str, closing: Closing) -> ClosedTrace[H]:
        state = self._open.pop(trace_id)
        self.bytes -= state.size
        self._closed[trace_id] = None
        while len(self._closed) > self._remember:
            self._closed.popitem(last=False)
        return ClosedTrace(trace_id, tuple(state.spans), frozenset(state.handles), closing)
