"""Traces for the OTLP tests: spans made with the real OpenTelemetry SDK, span attributes
in OpenInference's names, and the Collector's JSON encoding."""

from __future__ import annotations

import base64
import json
from collections.abc import Sequence
from typing import Any

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import Span as SdkSpan
from opentelemetry.trace import set_span_in_context

from monitor.demo.spans import MS, SpanRecorder

T0 = 1_764_000_000_000 * MS


class TraceMaker:
    """Spans of one trace with the real SDK; times in ms after T0."""

    def __init__(self, recorder: SpanRecorder) -> None:
        self.recorder = recorder
        self.root: SdkSpan | None = None

    def span(
        self, name: str, attributes: dict[str, Any], start: int, end: int, *, root: bool = False
    ) -> SdkSpan:
        context = None if root or self.root is None else set_span_in_context(self.root)
        made = self.recorder.tracer.start_span(
            name, context=context, start_time=T0 + start * MS, attributes=attributes
        )
        if root:
            self.root = made
        made.end(end_time=T0 + end * MS)
        return made


def docs(*texts: str, prefix: str = "d") -> dict[str, Any]:
    out: dict[str, Any] = {"openinference.span.kind": "RETRIEVER"}
    for i, text in enumerate(texts):
        out[f"retrieval.documents.{i}.document.content"] = text
        out[f"retrieval.documents.{i}.document.id"] = f"{prefix}{i}"
        out[f"retrieval.documents.{i}.document.score"] = 0.9 - i / 10
    return out


def llm(answer: str, question: str = "the question") -> dict[str, Any]:
    return {
        "openinference.span.kind": "LLM",
        "llm.model_name": "m1",
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": question,
        "output.value": answer,
    }


def chain(question: str, answer: str, **extra: Any) -> dict[str, Any]:
    return {"openinference.span.kind": "CHAIN", "input.value": question, "output.value": answer,
            **extra}  # fmt: skip


def otlp_json(spans: Sequence[ReadableSpan]) -> bytes:
    """The Collector's ``otlp_json``: protobuf JSON with ids in hex."""
    data = json_format.MessageToDict(encode_spans(spans))
    for rs in data["resourceSpans"]:
        for ss in rs["scopeSpans"]:
            for span in ss["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(data).encode()


def partial_trace(recorder: SpanRecorder, kinds: Sequence[str]) -> None:
    """A root span, with a retrieval span and an answering LLM span only where ``kinds``
    names them (``"retriever"``, ``"llm"``): a trace missing either is incomplete."""
    t = TraceMaker(recorder)
    t.span("root", chain("q", "a"), 0, 100, root=True)
    if "retriever" in kinds:
        t.span("retrieve", docs("ctx"), 1, 10)
    if "llm" in kinds:
        t.span("llm", llm("a"), 20, 90)
