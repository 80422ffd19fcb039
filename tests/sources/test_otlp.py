"""Trace assembly (monitor.sources.otlp): SDK-made spans, encoded as the Collector writes them."""

from __future__ import annotations

import json

import pytest

from monitor.demo.spans import MS, SpanRecorder, encode, openinference_trace
from monitor.records import InvalidRecord
from monitor.sources.otlp.assembly import IncompleteTrace, assemble
from monitor.sources.otlp.buffer import TraceBuffer
from monitor.sources.otlp.spans import Span, decode_spans
from tests.support.records import validate_record
from tests.support.spans import T0, TraceMaker, chain, docs, llm, otlp_json, partial_trace


def spans_of(recorder: SpanRecorder, route: str = "http.route") -> list[Span]:
    return decode_spans(encode(recorder.take()), "otlp_proto", route_attribute=route)


@pytest.fixture
def recorder() -> SpanRecorder:
    return SpanRecorder(service="search-api", environment="prod")


def test_an_openinference_trace_becomes_one_valid_interaction(recorder: SpanRecorder) -> None:
    record = {
        "user_input": "When is a receipt needed?",
        "retrieved_contexts": [
            {"text": "Receipts over $100.", "id": "a", "score": 0.8},
            {"text": "Lodging always.", "id": "b", "score": 0.5},
        ],
        "response": "Over $100.",
        "metadata": {"label": "good", "route": "/from-metadata"},  # OpenInference `metadata`
    }
    trace_id = openinference_trace(recorder, record, start_ns=T0, route="/ask", extra_spans=2,
                                   trace_id=0xABC)  # fmt: skip
    assert trace_id == f"{0xABC:032x}"
    spans = spans_of(recorder)
    assert len(spans) == 5 and {s.trace_id for s in spans} == {trace_id}
    out = assemble(spans, route_attribute="http.route")
    assert out["id"] == out["trace_id"] == trace_id
    root = next(s for s in spans if s.is_root)
    assert out["span_id"] == root.span_id
    assert out["user_input"] == "When is a receipt needed?"
    assert out["response"] == "Over $100."
    assert out["retrieved_contexts"] == [
        {"text": "Receipts over $100.", "id": "a", "score": 0.8},
        {"text": "Lodging always.", "id": "b", "score": 0.5},
    ]
    # the route attribute wins over the application's metadata
    assert out["metadata"] == {"service": "search-api", "environment": "prod", "route": "/ask",
                               "model": "demo-llm", "label": "good"}  # fmt: skip
    interaction = validate_record(out)
    assert interaction.trace_id == trace_id and interaction.span_id == root.span_id


def test_documents_keep_rank_order_beyond_ten(recorder: SpanRecorder) -> None:
    t = TraceMaker(recorder)
    t.span("root", chain("q", "a"), 0, 100, root=True)
    t.span("retrieve", docs(*(f"doc {i}" for i in range(12))), 1, 10)
    t.span("llm", llm("a"), 20, 90)
    out = assemble(spans_of(recorder))
    assert [c["text"] for c in out["retrieved_contexts"]] == [f"doc {i}" for i in range(12)]


def test_question_falls_back_to_the_llm_span_and_its_messages(recorder: SpanRecorder) -> None:
    t = TraceMaker(recorder)
    t.span("root", {"openinference.span.kind": "CHAIN"}, 0, 100, root=True)  # no text at the root
    t.span("retrieve", docs("ctx"), 1, 10)
    attributes = llm("", question="What is the refund window?")
    del attributes["output.value"]
    attributes["llm.output_messages.0.message.role"] = "assistant"
    attributes["llm.output_messages.0.message.content"] = "Thirty days."
    attributes["input.value"] = '{"messages": []}'
    attributes["input.mime_type"] = "application/json"  # a serialised call, not the question
    t.span("llm", attributes, 20, 90)
    out = assemble(spans_of(recorder))
    assert out["user_input"] == "What is the refund window?"
    assert out["response"] == "Thirty days."


def test_genai_conventions(recorder: SpanRecorder) -> None:
    t = TraceMaker(recorder)
    t.span("invoke_agent", {"gen_ai.operation.name": "invoke_agent", "http.route": "/chat"}, 0,
           100, root=True)  # fmt: skip
    documents = [{"id": "k1", "score": 0.7, "content": "Refunds within 30 days."},
                 {"id": "k2", "score": 0.6, "content": "Shipping is free."}]  # fmt: skip
    t.span("retrieval", {"gen_ai.operation.name": "retrieval",
                         "gen_ai.retrieval.documents": json.dumps(documents)}, 1, 10)  # fmt: skip
    messages_in = [
        {"role": "system", "parts": [{"type": "text", "content": "Use the context."}]},
        {"role": "user", "parts": [{"type": "text", "content": "How long do refunds take?"}]},
    ]
    messages_out = [{"role": "assistant", "parts": [{"type": "text", "content": "30 days."}],
                     "finish_reason": "stop"}]  # fmt: skip
    t.span("chat m2", {"gen_ai.operation.name": "chat", "gen_ai.request.model": "m2",
                       "gen_ai.input.messages": json.dumps(messages_in),
                       "gen_ai.output.messages": json.dumps(messages_out)}, 20, 90)  # fmt: skip
    out = assemble(spans_of(recorder), route_attribute="http.route")
    assert out["user_input"] == "How long do refunds take?"
    assert out["response"] == "30 days."
    assert out["retrieved_contexts"] == [
        {"text": "Refunds within 30 days.", "id": "k1", "score": 0.7},
        {"text": "Shipping is free.", "id": "k2", "score": 0.6},
    ]
    assert out["metadata"]["route"] == "/chat" and out["metadata"]["model"] == "m2"


# --- several retrievals or LLM calls: the contexts that reached the final answering call


def test_two_parallel_retrievers_both_reach_the_answer(recorder: SpanRecorder) -> None:
    t = TraceMaker(recorder)
    t.span("root", chain("q", "a"), 0, 100, root=True)
    t.span("dense", docs("dense 0", "shared", prefix="x"), 1, 12)
    t.span("sparse", docs("sparse 0", prefix="y") | {
        "retrieval.documents.1.document.content": "shared",
        "retrieval.documents.1.document.id": "x1"}, 2, 10)  # fmt: skip
    t.span("llm", llm("a"), 20, 90)
    out = assemble(spans_of(recorder))
    # sparse ended first; the document both found (id x1) is kept once
    assert [c["text"] for c in out["retrieved_contexts"]] == ["sparse 0", "shared", "dense 0"]


def test_only_the_last_round_of_retrieval_reaches_the_answer(recorder: SpanRecorder) -> None:
    t = TraceMaker(recorder)
    t.span("root", chain("q", "final"), 0, 200, root=True)
    t.span("retrieve 1", docs("first round"), 1, 10)
    t.span("rewrite", llm("better query"), 11, 30)
    t.span("retrieve 2", docs("second round"), 31, 40)
    t.span("answer", llm("final"), 41, 190)
    out = assemble(spans_of(recorder))
    assert [c["text"] for c in out["retrieved_contexts"]] == ["second round"]
    assert out["response"] == "final"


def test_a_retrieval_after_the_answering_call_started_is_ignored(recorder: SpanRecorder) -> None:
    t = TraceMaker(recorder)
    t.span("root", chain("q", "a"), 0, 200, root=True)
    t.span("retrieve", docs("used"), 1, 10)
    t.span("answer", llm("a"), 20, 150)
    t.span("citations", docs("looked up later"), 100, 160)
    out = assemble(spans_of(recorder))
    assert [c["text"] for c in out["retrieved_contexts"]] == ["used"]


def test_the_llm_call_that_ended_last_answers(recorder: SpanRecorder) -> None:
    t = TraceMaker(recorder)
    t.span("root", {"openinference.span.kind": "CHAIN", "input.value": "q"}, 0, 200, root=True)
    t.span("retrieve", docs("ctx"), 1, 10)
    t.span("draft", llm("draft answer"), 20, 60)
    t.span("polish", llm("polished answer"), 61, 120)  # no retrieval in between: same contexts
    out = assemble(spans_of(recorder))
    assert out["response"] == "polished answer"
    assert [c["text"] for c in out["retrieved_contexts"]] == ["ctx"]


@pytest.mark.parametrize(
    ("kinds", "reason"),
    [(("retriever",), "no_llm"), (("llm",), "no_retrieval"), ((), "no_llm")],
)
def test_a_trace_without_its_retrieval_or_llm_span_is_incomplete(
    recorder: SpanRecorder, kinds: tuple[str, ...], reason: str
) -> None:
    partial_trace(recorder, kinds)
    with pytest.raises(IncompleteTrace) as info:
        assemble(spans_of(recorder))
    assert info.value.reason == reason


# --- decoding


def test_otlp_json_with_hex_ids_decodes_to_the_same_spans(recorder: SpanRecorder) -> None:
    openinference_trace(recorder, {"user_input": "q", "retrieved_contexts": ["c"],
                                   "response": "a"}, start_ns=T0)  # fmt: skip
    finished = recorder.take()
    from_proto = decode_spans(encode(finished), "otlp_proto")
    from_json = decode_spans(otlp_json(finished), "otlp_json")
    assert from_json == from_proto
    assert assemble(from_json) == assemble(from_proto)


@pytest.mark.parametrize(
    ("value", "fmt"),
    [
        (b"\xff\xfe not protobuf", "otlp_proto"),
        (b'{"id": "an interaction record"}', "otlp_proto"),
        (None, "otlp_proto"),
        (b"not json", "otlp_json"),
        (b'["a list"]', "otlp_json"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', "otlp_json"),
        (b'{"resourceSpans": 3}', "otlp_json"),
    ],
)
def test_garbage_is_not_otlp(value: bytes | None, fmt: str) -> None:
    with pytest.raises(InvalidRecord) as info:
        decode_spans(value, fmt)  # type: ignore[arg-type]
    assert info.value.reason == "not_otlp"


def test_only_the_attributes_assembly_reads_are_kept(recorder: SpanRecorder) -> None:
    t = TraceMaker(recorder)
    t.span("root", chain("q", "a", **{"user.email": "x@example.com", "http.route": "/r"}), 0, 9,
           root=True)  # fmt: skip
    (span,) = spans_of(recorder)
    assert "user.email" not in span.attributes and span.attributes["http.route"] == "/r"


# --- the buffer


def _trace(recorder: SpanRecorder, n: int) -> list[Span]:
    openinference_trace(recorder, {"user_input": f"q{n}", "retrieved_contexts": ["c"],
                                   "response": "a"}, start_ns=T0 + n * 1000 * MS)  # fmt: skip
    return spans_of(recorder)


def test_a_trace_is_due_a_grace_period_after_its_root(recorder: SpanRecorder) -> None:
    buffer: TraceBuffer[str, int] = TraceBuffer(grace=2, timeout=30, max_traces=10,
                                                max_bytes=10**9)  # fmt: skip
    spans = _trace(recorder, 0)
    root = next(s for s in spans if s.is_root)
    children = [s for s in spans if not s.is_root]
    assert buffer.add([root], "m1", 0, now=0.0).unused is False  # the root first (out of order)
    buffer.add(children[:1], "m2", 0, now=1.0)
    assert buffer.due(1.9) == []
    buffer.add(children[1:], "m3", 0, now=1.95)
    (closed,) = buffer.due(2.0)
    assert closed.closing == "complete" and len(closed.spans) == len(spans)
    assert closed.handles == {"m1", "m2", "m3"}
    assert sorted(buffer.release(closed)) == ["m1", "m2", "m3"]
    # a span of a closed trace arriving later is left out and counted
    assert buffer.add(children[:1], "m4", 0, now=3.0).late_spans == 1


def test_a_message_is_free_only_when_every_trace_in_it_is(recorder: SpanRecorder) -> None:
    buffer: TraceBuffer[str, int] = TraceBuffer(grace=0, timeout=30, max_traces=10,
                                                max_bytes=10**9)  # fmt: skip
    a, b = _trace(recorder, 1), _trace(recorder, 2)
    buffer.add(a + [s for s in b if not s.is_root], "shared", 0, now=0.0)
    (done_a,) = buffer.due(0.0)
    assert buffer.release(done_a) == []  # b still needs "shared"
    assert buffer.held(0) == 1
    buffer.add([s for s in b if s.is_root], "last", 0, now=1.0)
    (done_b,) = buffer.due(1.0)
    assert sorted(buffer.release(done_b)) == ["last", "shared"]


def test_without_a_root_the_trace_times_out(recorder: SpanRecorder) -> None:
    buffer: TraceBuffer[str, int] = TraceBuffer(grace=1, timeout=5, max_traces=10,
                                                max_bytes=10**9)  # fmt: skip
    buffer.add([s for s in _trace(recorder, 3) if not s.is_root], "m", 0, now=0.0)
    assert buffer.due(4.9) == []
    (closed,) = buffer.due(5.0)
    assert closed.closing == "timeout"


def test_overflow_closes_the_oldest_trace_first(recorder: SpanRecorder) -> None:
    buffer: TraceBuffer[str, int] = TraceBuffer(grace=1, timeout=30, max_traces=2,
                                                max_bytes=10**9)  # fmt: skip
    ids = []
    for n in range(3):
        spans = [s for s in _trace(recorder, 10 + n) if not s.is_root]
        ids.append(spans[0].trace_id)
        added = buffer.add(spans, f"m{n}", 0, now=float(n))
    assert [c.trace_id for c in added.evicted] == [ids[0]]
    assert added.evicted[0].closing == "overflow" and len(buffer) == 2
    small: TraceBuffer[str, int] = TraceBuffer(grace=1, timeout=30, max_traces=100, max_bytes=1)
    assert len(small.add(_trace(recorder, 20), "m", 0, now=0.0).evicted) == 1
    assert small.bytes == 0


def test_a_trace_seen_on_two_partitions_is_split(recorder: SpanRecorder) -> None:
    buffer: TraceBuffer[str, int] = TraceBuffer(grace=0, timeout=30, max_traces=10,
                                                max_bytes=10**9)  # fmt: skip
    spans = _trace(recorder, 30)
    buffer.add([s for s in spans if not s.is_root], "p0", 0, now=0.0)
    buffer.add([s for s in spans if s.is_root], "p1", 1, now=0.0)
    (closed,) = buffer.due(0.0)
    assert closed.closing == "split"


def test_discarding_a_partition_forgets_its_traces_without_freeing(recorder: SpanRecorder) -> None:
    buffer: TraceBuffer[str, int] = TraceBuffer(grace=5, timeout=30, max_traces=10,
                                                max_bytes=10**9)  # fmt: skip
    buffer.add(_trace(recorder, 40), "m", 3, now=0.0)
    assert buffer.held(3) == 1
    assert buffer.discard(3) == 1
    assert len(buffer) == 0 and buffer.bytes == 0 and buffer.held(3) == 0
    assert buffer.due(100.0) == []


def test_spans_of_a_skipped_trace_keep_no_attributes(recorder: SpanRecorder) -> None:
    record = {"user_input": "q", "retrieved_contexts": ["c"], "response": "a"}
    kept = openinference_trace(recorder, record, start_ns=T0)
    dropped = openinference_trace(recorder, record, start_ns=T0 + 1000 * MS)
    asked: list[str] = []

    def skip(trace_id: str) -> bool:
        asked.append(trace_id)
        return trace_id == dropped

    spans = decode_spans(encode(recorder.take()), "otlp_proto", skip=skip)  # one message
    assert sorted(asked) == sorted([kept, dropped])  # once per trace, not per span
    assert len([s for s in spans if s.trace_id == dropped]) == 3
    assert all(not s.attributes for s in spans if s.trace_id == dropped)
    assert any(s.is_root for s in spans if s.trace_id == dropped)  # still closes on its root
    assert all(s.attributes for s in spans if s.trace_id == kept)
