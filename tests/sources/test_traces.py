"""OTLP span messages through the real broker and the real sidecar (`serve`).

Spans are made with the OpenTelemetry SDK and encoded with its OTLP protobuf encoder
(the bytes the Collector's Kafka exporter writes); each partition gets whole traces,
as with the Collector's ``partition_traces_by_id``.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from typing import Any

import pytest
from prometheus_client import generate_latest

from monitor.app import build, serve
from monitor.demo.spans import MS, SpanRecorder, encode, openinference_trace
from monitor.kafka.dead_letter import HEADER_REASON
from monitor.kafka.topics import committed_offsets, produce
from monitor.sources.traces import TraceSource
from tests.fixtures.kafka import Topic, monitor_settings
from tests.support.embedded import Broker
from tests.support.judge_server import JudgeServer
from tests.support.kafka import read_topic
from tests.support.monitor import serving
from tests.support.records import interaction, openmetrics_families, samples
from tests.support.sinks import SinkBase
from tests.support.spans import T0, otlp_json, partial_trace
from tests.support.waits import wait_until

pytestmark = pytest.mark.kafka

GARBAGE = [b"\x0a\xff\xff\xff garbage", b'{"id": "not-a-span-message"}']


def build_traffic(fmt: str) -> tuple[dict[int, list[bytes]], set[str], dict[str, int]]:
    """Per partition, the messages; the trace ids that can be scored; incomplete counts."""
    recorder = SpanRecorder(service="search-api", environment="test")
    chunks: dict[str, list[list[Any]]] = {}
    complete: set[str] = set()
    for i in range(12):
        trace_id = openinference_trace(recorder, interaction(i, supported=i % 3 != 0),
                                       start_ns=T0 + i * 1000 * MS, route="search",
                                       extra_spans=2)  # fmt: skip
        spans = recorder.take()  # children first, the root last
        parts = [spans[:2], spans[2:4], spans[4:]]
        if i % 2:
            parts.reverse()  # out of order: the root span arrives first
        chunks[trace_id] = parts
        complete.add(trace_id)
    incomplete = {"no_retrieval": 0, "no_llm": 0}
    for reason, kinds in (("no_retrieval", ("llm",)), ("no_llm", ("retriever",))):
        partial_trace(recorder, kinds)
        spans = recorder.take()
        chunks[format(spans[0].context.trace_id, "032x")] = [spans]
        incomplete[reason] += 1
    encoder = encode if fmt == "otlp_proto" else otlp_json
    # two traces of one partition share each message (the Collector batches across traces)
    by_partition: dict[int, list[bytes]] = {p: [] for p in range(4)}
    ids = sorted(chunks)
    for n in range(0, len(ids), 2):
        pair = ids[n : n + 2]
        partition = (n // 2) % 4
        rounds = max(len(chunks[t]) for t in pair)
        for k in range(rounds):
            spans = [s for t in pair if k < len(chunks[t]) for s in chunks[t][k]]
            by_partition[partition].append(encoder(spans))
    by_partition[0].insert(1, GARBAGE[0])
    by_partition[1].append(GARBAGE[1] if fmt == "otlp_proto" else b"not json at all")
    recorder.shutdown()
    return by_partition, complete, incomplete


def scrape_openmetrics(port: int) -> str:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/metrics",
        headers={"Accept": "application/openmetrics-text;version=1.0.0;q=0.9,text/plain;q=0.5"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.headers["Content-Type"].startswith("application/openmetrics-text")
        return str(response.read().decode())


def exemplar_traces(text: str) -> dict[str, set[str]]:
    """Sample name → the trace ids of its exemplars."""
    out: dict[str, set[str]] = {}
    for family in openmetrics_families(text):
        for sample in family.samples:
            if sample.exemplar is not None:
                out.setdefault(sample.name, set()).add(sample.exemplar.labels["trace_id"])
    return out


@pytest.mark.parametrize("fmt", ["otlp_proto", "otlp_json"])
async def test_traces_split_over_messages_are_scored_once_each(
    broker: Broker, topic: Topic, judge_server: JudgeServer, fmt: str
) -> None:
    by_partition, complete, incomplete = build_traffic(fmt)
    for partition, messages in by_partition.items():
        await produce(topic.bootstrap, topic.name, [(None, m) for m in messages],
                      partition=partition)  # fmt: skip
    settings = monitor_settings(broker, topic, judge_server, input_format=fmt,
                                trace_grace_seconds=0.3, trace_timeout_seconds=5.0)  # fmt: skip
    async with serving(settings) as parts:
        scored = parts.exporter.records_scored
        counts = parts.exporter.traces

        def settled() -> bool:
            whole = scored._value.get() >= len(complete)
            return whole and all(counts.labels(outcome=reason)._value.get() >= n
                                 for reason, n in incomplete.items())  # fmt: skip

        await wait_until(settled, 60, "the complete traces scored, the incomplete ones counted")
        await asyncio.sleep(1.0)  # proving a negative: no trace is scored twice, nothing marks it
        exposition = await asyncio.to_thread(scrape_openmetrics, parts.server.port)
    text = generate_latest(parts.exporter.registry).decode()
    assert scored._value.get() == len(complete)
    traces = samples(text, "rag_monitor_traces_total")
    assert traces[(("outcome", "assembled"),)] == len(complete)
    for reason, n in incomplete.items():
        assert traces[(("outcome", reason),)] == n
    assert (("outcome", "split"),) not in traces
    # the judge saw one scored record per trace: hallucinations are the unsupported ones
    hallucinated = samples(text, "rag_monitor_hallucinations_total")
    assert sum(hallucinated.values()) == 4  # i = 0, 3, 6, 9
    # exemplars link the score samples to the produced traces
    exemplars = exemplar_traces(exposition)
    score_traces = exemplars["rag_monitor_metric_score_bucket"]
    assert score_traces and score_traces <= complete
    hallucination_traces = exemplars["rag_monitor_hallucination_weight_total"]
    assert hallucination_traces and hallucination_traces <= complete
    assert len(hallucination_traces) <= 1  # one series (route search, judge llm): its latest
    dead = await read_topic(topic.bootstrap, topic.dlq, expected=2)
    assert sorted(dict(d.headers)[HEADER_REASON] for d in dead) == [b"not_otlp", b"not_otlp"]
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert positions == {p: len(m) for p, m in by_partition.items()}


async def test_a_trace_on_two_partitions_is_counted_split_and_not_scored(
    broker: Broker, topic: Topic, judge_server: JudgeServer
) -> None:
    recorder = SpanRecorder()
    openinference_trace(recorder, interaction(1), start_ns=T0)
    spans = recorder.take()
    # without partition_traces_by_id the Collector may put a trace's spans anywhere
    await produce(topic.bootstrap, topic.name, [(None, encode(spans[:2]))], partition=0)
    await produce(topic.bootstrap, topic.name, [(None, encode(spans[2:]))], partition=1)
    settings = monitor_settings(broker, topic, judge_server, input_format="otlp_proto",
                                trace_grace_seconds=2.0, trace_timeout_seconds=3.0)  # fmt: skip
    async with serving(settings) as parts:
        traces = parts.exporter.traces
        await wait_until(lambda: traces.labels(outcome="split")._value.get() >= 1, 60, "a split")
    assert traces.labels(outcome="split")._value.get() == 1
    assert parts.exporter.records_scored._value.get() == 0
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert positions[0] == 1 and positions[1] == 1


async def test_a_revoke_does_not_wait_for_messages_buffered_traces_hold() -> None:
    from monitor.config import Settings
    from monitor.sources.kafka import KafkaSource
    from monitor.telemetry import Exporter

    holding = {"spans": 3}
    tp = ("otlp_spans", 0)

    def held(partition: tuple[str, int]) -> int:
        return holding["spans"] if partition == tp else 0

    source = KafkaSource(Settings(), Exporter(), revoke_timeout_seconds=1.5, held=held)
    generation = source.tracker.assign(tp)
    for offset in range(3):
        source.tracker.start(tp, offset, generation)
    # three spans' messages held
    started = time.monotonic()
    await source._on_revoked([tp])
    assert time.monotonic() - started < 1.0
    source.tracker.assign(tp)
    generation = source.tracker.generation(tp) or 0
    source.tracker.start(tp, 0, generation)
    holding["spans"] = 0  # unfinished work that is not held: the revoke waits
    started = time.monotonic()
    await source._on_revoked([tp])
    assert time.monotonic() - started >= 1.5


class Recorded(SinkBase):
    """A sink that keeps the ids it was given (the pipeline's last sink)."""

    name = "recorded"

    def __init__(self) -> None:
        self.ids: list[str] = []

    async def write(self, batch: Any) -> None:
        self.ids.extend(r.interaction.id for r in batch)


async def test_a_rebalance_mid_trace_hands_buffered_traces_to_the_new_owner(
    broker: Broker, topic: Topic, judge_server: JudgeServer
) -> None:
    if broker.kind == "noida":
        # seen with noida-db 0.2.3: when the second member joins while the first holds
        # uncommitted messages (its commits refused during the rebalance), the revoke
        # completes and the group then never assigns again (150 s); Tansu runs this
        pytest.skip(
            "noida-db 0.2.3 never settles this rebalance; it runs on Tansu: "
            "RAGMON_TEST_BROKER=tansu python3 -m pytest -m kafka (scripts/check does)"
        )
    recorder = SpanRecorder()
    halves: list[tuple[int, bytes, bytes]] = []
    for i in range(8):
        trace_id = openinference_trace(recorder, interaction(i), start_ns=T0 + i * 1000 * MS)
        spans = recorder.take()
        halves.append((i % 4, encode(spans[:1]), encode(spans[1:])))  # the root comes last
        assert trace_id
    for partition in range(4):
        await produce(topic.bootstrap, topic.name,
                      [(None, a) for p, a, _ in halves if p == partition],
                      partition=partition)  # fmt: skip
    settings = monitor_settings(broker, topic, judge_server, input_format="otlp_proto",
                                trace_grace_seconds=0.3)  # fmt: skip
    first, second = build(settings), build(settings)
    seen = [Recorded(), Recorded()]
    first.sinks.append(seen[0])
    second.sinks.append(seen[1])
    stop = asyncio.Event()
    tasks = [asyncio.create_task(serve(settings, stop, first))]
    try:
        consumed = first.exporter.records_consumed.labels(topic=topic.name)
        await wait_until(lambda: consumed._value.get() >= 8, 60, "8 messages consumed")
        assert isinstance(first.source, TraceSource) and len(first.source.buffer) == 8
        tasks.append(asyncio.create_task(serve(settings, stop, second)))
        await wait_until(lambda: bool(second.source.assignment) and
                         len(first.source.assignment) + len(second.source.assignment) == 4,
                         60, "the partitions shared by both monitors")  # fmt: skip
        for partition in range(4):
            await produce(topic.bootstrap, topic.name,
                          [(None, b) for p, _, b in halves if p == partition],
                          partition=partition)  # fmt: skip
        await wait_until(lambda: len(set(seen[0].ids) | set(seen[1].ids)) >= 8, 60, "8 records")

        async def all_committed() -> bool:
            positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
            return positions == {p: 4 for p in range(4)}

        # committed by the checkpoints while both run (each stop's leave rebalances the group)
        await wait_until(all_committed, 30, "every message committed", interval=0.3)
    finally:
        stop.set()
        for task in tasks:
            assert await asyncio.wait_for(task, 30) == 0
    scored = set(seen[0].ids) | set(seen[1].ids)
    assert len(scored) == 8
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert positions == {p: 4 for p in range(4)}


async def produce_roots_last(topic: Topic, n: int) -> None:
    """``n`` traces on partition 0, one message of children and one of the root each:
    every trace's children first, the roots after, so that all ``n`` are open at once."""
    recorder = SpanRecorder()
    children, roots = [], []
    for i in range(n):
        openinference_trace(recorder, interaction(i), start_ns=T0 + i * 1000 * MS)
        spans = recorder.take()
        children.append(encode(spans[:-1]))
        roots.append(encode(spans[-1:]))
    await produce(topic.bootstrap, topic.name, [(None, m) for m in children + roots],
                  partition=0)  # fmt: skip


@pytest.mark.parametrize("overflow", ["assemble", "drop"])
async def test_a_full_trace_buffer_closes_the_oldest_trace_and_counts_it(
    broker: Broker, topic: Topic, judge_server: JudgeServer, overflow: str
) -> None:
    await produce_roots_last(topic, 4)  # four traces open at once, two fit
    settings = monitor_settings(broker, topic, judge_server, input_format="otlp_proto",
                                trace_grace_seconds=0.2, trace_buffer_max_traces=2,
                                trace_buffer_overflow=overflow)  # fmt: skip
    async with serving(settings) as parts:
        traces = parts.exporter.traces
        await wait_until(lambda: traces.labels(outcome="assembled")._value.get() >= 2, 60,
                         "two traces assembled")  # fmt: skip
        early = "overflow_assembled" if overflow == "assemble" else "overflow_dropped"
        expected = 4 if overflow == "assemble" else 2

        def settled() -> bool:
            pushed_out = traces.labels(outcome=early)._value.get() >= 2
            late = traces.labels(outcome="late_span")._value.get() >= 2
            scored = parts.exporter.records_scored._value.get() >= expected
            return bool(pushed_out and late and scored)

        await wait_until(settled, 30, "two traces pushed out, their roots late, all scored")
    text = generate_latest(parts.exporter.registry).decode()
    counted = samples(text, "rag_monitor_traces_total")
    assert counted[(("outcome", early),)] == 2  # the two oldest, pushed out
    assert counted[(("outcome", "assembled"),)] == 2
    assert counted[(("outcome", "late_span"),)] == 2  # their roots came after they closed
    # closed early but whole enough: scored as they stood (the root only held the question)
    assert parts.exporter.records_scored._value.get() == expected
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert positions[0] == 8


async def test_a_window_full_of_held_messages_closes_old_traces_instead_of_stalling(
    broker: Broker, topic: Topic, judge_server: JudgeServer
) -> None:
    await produce_roots_last(topic, 6)
    # 4 messages in flight at most: the children of 4 traces fill the window, their roots
    # are behind it; the timeout is far beyond the wait below
    settings = monitor_settings(broker, topic, judge_server, input_format="otlp_proto",
                                max_in_flight=4, trace_grace_seconds=0.2,
                                trace_timeout_seconds=120.0)  # fmt: skip
    async with serving(settings) as parts:
        scored = parts.exporter.records_scored
        await wait_until(lambda: scored._value.get() >= 6, 20, "all 6 traces scored")
    assert scored._value.get() == 6
    assert parts.exporter.traces.labels(outcome="overflow_assembled")._value.get() >= 2
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert positions[0] == 12


async def test_traces_the_sampler_drops_are_not_assembled_and_the_rest_are_scored(
    broker: Broker, topic: Topic, judge_server: JudgeServer
) -> None:
    from monitor.sampling import unit_hash

    recorder = SpanRecorder()
    ids = []
    messages: dict[int, list[bytes]] = {p: [] for p in range(4)}
    for i in range(24):
        trace_id = openinference_trace(recorder, interaction(i), start_ns=T0 + i * 1000 * MS)
        spans = recorder.take()
        ids.append(trace_id)
        messages[i % 4] += [encode(spans[:2]), encode(spans[2:])]
    for partition, values in messages.items():
        await produce(topic.bootstrap, topic.name, [(None, v) for v in values],
                      partition=partition)  # fmt: skip
    rate = 0.4
    kept = {t for t in ids if unit_hash(t.encode()) < rate}
    assert 0 < len(kept) < len(ids)
    settings = monitor_settings(broker, topic, judge_server, input_format="otlp_proto",
                                sample_rate=rate, trace_grace_seconds=0.2)  # fmt: skip
    parts = build(settings)
    seen = Recorded()
    parts.sinks.append(seen)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop, parts))
    traces = parts.exporter.traces
    try:
        await wait_until(lambda: traces.labels(outcome="assembled")._value.get()
                         + traces.labels(outcome="sampled_out")._value.get() >= 24, 60,
                         "every trace assembled or sampled out")  # fmt: skip
        await wait_until(lambda: kept <= set(seen.ids), 30, "every kept trace at the last sink")
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    assert set(seen.ids) == kept
    assert traces.labels(outcome="assembled")._value.get() == len(kept)
    assert traces.labels(outcome="sampled_out")._value.get() == len(ids) - len(kept)
    invalid = samples(generate_latest(parts.exporter.registry).decode(),
                      "rag_monitor_records_invalid_total")  # fmt: skip
    assert set(invalid.values()) == {0.0}  # every reason's series is there from the start, at 0
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert positions == {p: 12 for p in range(4)}
