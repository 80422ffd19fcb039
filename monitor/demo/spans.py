"""Interactions as OpenInference traces, made with the OpenTelemetry SDK (demo, tests, bench).

See docs/opentelemetry.md.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator
from opentelemetry.trace import set_span_in_context

MS = 1_000_000  # nanoseconds


class _TraceIds(RandomIdGenerator):
    """Random ids, except a trace id the caller chose for the next trace."""

    def __init__(self) -> None:
        self.next_trace_id: int | None = None

    def generate_trace_id(self) -> int:
        chosen, self.next_trace_id = self.next_trace_id, None
        return chosen if chosen is not None else super().generate_trace_id()


class SpanRecorder:
    """A tracer provider of its own (never the global one) whose spans are kept in memory."""

    def __init__(self, service: str = "rag-service", environment: str = "demo") -> None:
        self.exporter = InMemorySpanExporter()
        resource = Resource.create({"service.name": service, "deployment.environment": environment})
        self.ids = _TraceIds()
        self.provider = TracerProvider(resource=resource, id_generator=self.ids)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("rag-monitor.demo")

    def take(self) -> list[ReadableSpan]:
        """The spans finished since the last call, in the order they ended."""
        spans = list(self.exporter.get_finished_spans())
        self.exporter.clear()
        return spans

    def shutdown(self) -> None:
        self.provider.shutdown()


def openinference_trace(
    recorder: SpanRecorder,
    record: Mapping[str, Any],
    *,
    start_ns: int,
    route: str | None = None,
    extra_spans: int = 0,
    model: str = "demo-llm",
    trace_id: int | None = None,
) -> str:
    """Record ``record`` (the interaction schema) as one trace; returns its trace id (hex).

    Spans end children first, the root last, as a service exports them.
    """
    tracer = recorder.tracer
    recorder.ids.next_trace_id = trace_id
    question = str(record.get("user_input", ""))
    answer = str(record.get("response", ""))
    contexts = [
        c if isinstance(c, Mapping) else {"text": str(c)}
        for c in record.get("retrieved_contexts", [])
    ]
    root_attributes: dict[str, Any] = {
        "openinference.span.kind": "CHAIN",
        "input.value": question,
        "output.value": answer,
    }
    if route is not None:
        root_attributes["http.route"] = route
    metadata = record.get("metadata")
    if isinstance(metadata, Mapping) and metadata:
        root_attributes["metadata"] = json.dumps(dict(metadata), ensure_ascii=False)
    root = tracer.start_span("rag.query", start_time=start_ns, attributes=root_attributes)
    parent = set_span_in_context(root)
    at = start_ns + MS
    for n in range(max(0, extra_spans)):  # e.g. query embedding, guardrails, formatting
        kind = "EMBEDDING" if n == 0 else "TOOL"
        step = tracer.start_span(f"step.{n}", context=parent, start_time=at,
                                 attributes={"openinference.span.kind": kind})  # fmt: skip
        step.end(end_time=at + MS)
        at += 2 * MS
    documents: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": question}
    for i, context in enumerate(contexts):
        prefix = f"retrieval.documents.{i}.document."
        documents[prefix + "content"] = str(context.get("text", ""))
        if context.get("id") is not None:
            documents[prefix + "id"] = str(context["id"])
        if context.get("score") is not None:
            documents[prefix + "score"] = float(context["score"])
    retriever = tracer.start_span("retrieve", context=parent, start_time=at, attributes=documents)
    retriever.end(end_time=at + 10 * MS)
    at += 11 * MS
    prompt = "Answer from the context.\n\n" + "\n\n".join(str(c.get("text", "")) for c in contexts)
    llm_attributes: dict[str, Any] = {
        "openinference.span.kind": "LLM",
        "llm.model_name": model,
        "input.value": json.dumps({"messages": [{"role": "user", "content": question}]}),
        "input.mime_type": "application/json",
        "llm.input_messages.0.message.role": "system",
        "llm.input_messages.0.message.content": prompt,
        "llm.input_messages.1.message.role": "user",
        "llm.input_messages.1.message.content": question,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": answer,
        "output.value": answer,
    }
    llm = tracer.start_span("llm", context=parent, start_time=at, attributes=llm_attributes)
    llm.end(end_time=at + 40 * MS)
    root.end(end_time=at + 41 * MS)
    return format(root.get_span_context().trace_id, "032x")


def encode(spans: Sequence[ReadableSpan]) -> bytes:
    """One OTLP/protobuf ``ExportTraceServiceRequest`` holding ``spans``."""
    return bytes(encode_spans(spans).SerializeToString())
