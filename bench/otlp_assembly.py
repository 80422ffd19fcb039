"""OTLP span messages through trace assembly, next to interaction records of the same content.

    python -m bench.otlp_assembly [--traces 5000] [--broker noida|tansu] [--rounds 2]

``--traces`` interactions (a question, 5 documents of ≈ 300 characters, an answer)
are made twice: as interaction records (JSON, the record schema), and as
OpenInference traces made with the OpenTelemetry SDK, 8 spans each (a CHAIN root,
an EMBEDDING span, 4 TOOL spans, the RETRIEVER with the 5 documents, the LLM),
encoded with the SDK's OTLP protobuf encoder into 2 messages per trace (the
children, then the root), keyed by trace id: what the Collector's Kafka exporter
writes with ``partition_traces_by_id``.

1. **Assembly alone** (no Kafka, one thread): every message decoded
   (`decode_spans`), buffered (`TraceBuffer`), each trace assembled (`assemble`) and
   turned into the JSON record the pipeline parses (`parse_record`), against
   `parse_record` of the interaction records. Best of ``--rounds``.
   Also with every trace sampled out (what `TraceSource` does for a trace the rate
   drops when there are no sample rules: spans decoded without attributes, never
   assembled).
2. **Through the sidecar** (`build` + ``serve`` exactly as ``rag-monitor run``, at
   sample rate 0: nothing scored, so this is the ingest path's own cost; with OTLP
   input every trace is a sampled-out one): one topic
   of each kind, 4 partitions, a fresh consumer group per run; the rate counts from
   the partition assignment to the moment every record (interaction input) or every
   trace (OTLP input, ``traces_total``) is through. Trace grace 0: a trace is due as
   soon as its root span is read. ``--rounds`` runs each, alternating.

CPU is this process's (``getrusage``), over the measured interval; the broker
runs in its own process.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import statistics
import sys
import time
from typing import Any

SPANS_PER_TRACE = 8
DOCUMENTS = 5
WORDS = ("receipt", "travel", "budget", "lodging", "invoice", "policy", "approval", "expense",
         "manager", "limit", "airfare", "meal", "mileage", "contract", "vendor")  # fmt: skip


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def interactions(count: int, seed: int = 7) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    return [
        {
            "id": f"rec-{i}",
            "user_input": f"Question {i}: " + _text(rng, 10),
            "retrieved_contexts": [
                {"text": _text(rng, 45), "id": f"doc-{i}-{k}", "score": round(0.9 - k / 10, 2)}
                for k in range(DOCUMENTS)
            ],
            "response": _text(rng, 30),
            "metadata": {"route": rng.choice(["search", "chat"])},
        }
        for i in range(count)
    ]


def as_messages(records: list[dict[str, Any]]) -> list[tuple[bytes, bytes]]:
    from monitor.demo.spans import MS, SpanRecorder, encode, openinference_trace

    recorder = SpanRecorder(service="bench-rag", environment="bench")
    out: list[tuple[bytes, bytes]] = []
    start = int(time.time() * 1000) * MS
    for n, record in enumerate(records):
        trace_id = openinference_trace(recorder, record, start_ns=start + n * MS,
                                       route=record["metadata"]["route"],
                                       extra_spans=SPANS_PER_TRACE - 3)  # fmt: skip
        spans = recorder.take()
        assert len(spans) == SPANS_PER_TRACE
        key = trace_id.encode()
        out += [(key, encode(spans[:-4])), (key, encode(spans[-4:]))]
    recorder.shutdown()
    return out


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- 1. assembly alone


def assembly_alone(
    messages: list[tuple[bytes, bytes]], *, sampled_out: bool = False
) -> tuple[float, int]:
    """CPU seconds to turn every message into parsed interactions; how many came out.

    ``sampled_out``: every trace is one the sampler drops (decoded without attributes,
    closed, not assembled), as `TraceSource` does without sample rules.
    """
    from monitor.records import parse_record
    from monitor.sources.otlp.assembly import assemble
    from monitor.sources.otlp.buffer import TraceBuffer
    from monitor.sources.otlp.spans import decode_spans

    buffer: TraceBuffer[int, int] = TraceBuffer(grace=0.0, timeout=30.0, max_traces=10_000,
                                                max_bytes=1 << 30)  # fmt: skip
    made = 0
    skip = (lambda trace_id: True) if sampled_out else None
    started = time.process_time()
    for offset, (key, value) in enumerate(messages):
        spans = decode_spans(value, "otlp_proto", route_attribute="http.route", skip=skip)
        buffer.add(spans, offset, 0, 0.0)
        for trace in buffer.due(0.0):
            if not sampled_out:
                record = json.dumps(assemble(trace.spans, route_attribute="http.route")).encode()
                parse_record(record, key)
            buffer.release(trace)
            made += 1
    return time.process_time() - started, made


def records_alone(records: list[tuple[bytes, bytes]]) -> tuple[float, int]:
    from monitor.records import parse_record

    started = time.process_time()
    for key, value in records:
        parse_record(value, key)
    return time.process_time() - started, len(records)


# --- 2. through the sidecar


async def through_sidecar(
    bootstrap: str, topic: str, group: str, fmt: str, expected: int, session_ms: int
) -> dict[str, float]:
    from monitor.app import build, serve
    from monitor.config import load_settings
    from monitor.logging import configure_logging

    settings = load_settings(
        kafka_bootstrap_servers=bootstrap, kafka_topic=topic, kafka_dlq_topic=topic + "-dlq",
        kafka_group_id=group, kafka_session_timeout_ms=session_ms,
        kafka_heartbeat_interval_ms=1000, metrics_host="127.0.0.1", metrics_port=0,
        sample_rate=0.0, token_budget="0", log_level="warning", input_format=fmt,
        trace_grace_seconds=0.0, routes=["search", "chat"],
    )  # fmt: skip
    configure_logging(settings.log_level)
    parts = build(settings)
    counter = parts.exporter.records_consumed if fmt == "interaction" else parts.exporter.traces
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop, parts))
    first = cpu = 0.0
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline and not task.done():
            await asyncio.sleep(0.002)
            if not first and parts.source.assignment:
                first, cpu = time.perf_counter(), _cpu()
            if _total(counter) >= expected:
                break
        seconds, cpu = time.perf_counter() - first, _cpu() - cpu
        done = _total(counter)
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
    consumed = _total(parts.exporter.records_consumed)
    return {"items": done, "consumed": consumed, "seconds": seconds, "cpu": cpu}


def _total(metric: Any) -> float:
    total: float = sum(
        s.value for family in metric.collect() for s in family.samples if s.name.endswith("_total")
    )
    return total


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=5000)
    parser.add_argument("--broker", choices=["noida", "tansu"], default="noida")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    from monitor.kafka.topics import create_topics, produce
    from tests.support.embedded import Broker

    made = interactions(args.traces)
    records = [(r["id"].encode(), json.dumps(r).encode()) for r in made]
    t = time.perf_counter()
    messages = as_messages(made)
    print(f"made {len(messages)} OTLP messages with the SDK in {time.perf_counter() - t:.1f} s; "
          f"mean {statistics.mean(len(v) for _, v in messages):.0f} B a message, "
          f"{statistics.mean(len(v) for _, v in records):.0f} B a record", flush=True)  # fmt: skip

    alone_otlp = min(assembly_alone(messages)[0] for _ in range(args.rounds))
    alone_out = min(assembly_alone(messages, sampled_out=True)[0] for _ in range(args.rounds))
    alone_records = min(records_alone(records)[0] for _ in range(args.rounds))
    n = args.traces
    print("\n| assembly alone, per CPU second of one thread | messages | spans | interactions "
          "| CPU µs per interaction |")  # fmt: skip
    print("|---|---:|---:|---:|---:|")
    print(f"| OTLP: decode, buffer, assemble, parse | {2 * n / alone_otlp:,.0f} | "
          f"{SPANS_PER_TRACE * n / alone_otlp:,.0f} | {n / alone_otlp:,.0f} | "
          f"{1e6 * alone_otlp / n:.0f} |")  # fmt: skip
    print(f"| OTLP, trace sampled out: decode (no attributes), buffer | {2 * n / alone_out:,.0f} | "
          f"{SPANS_PER_TRACE * n / alone_out:,.0f} | {n / alone_out:,.0f} | "
          f"{1e6 * alone_out / n:.0f} |")  # fmt: skip
    print(f"| interaction records: parse | {n / alone_records:,.0f} | | {n / alone_records:,.0f} | "
          f"{1e6 * alone_records / n:.0f} |", flush=True)  # fmt: skip

    broker = Broker(args.broker)
    with broker:
        asyncio.run(create_topics(broker.bootstrap_servers, {"bench-records": 4, "bench-otlp": 4,
                                  "bench-records-dlq": 1, "bench-otlp-dlq": 1}))  # fmt: skip
        asyncio.run(produce(broker.bootstrap_servers, "bench-records", records))
        asyncio.run(produce(broker.bootstrap_servers, "bench-otlp", messages))
        runs: dict[str, list[dict[str, float]]] = {"interaction": [], "otlp_proto": []}
        for r in range(args.rounds):
            for fmt, topic in (("interaction", "bench-records"), ("otlp_proto", "bench-otlp")):
                result = asyncio.run(through_sidecar(
                    broker.bootstrap_servers, topic, f"bench-{fmt}-{r}-{time.time_ns()}", fmt, n,
                    broker.session_timeout_ms))  # fmt: skip
                assert result["items"] >= n, result
                runs[fmt].append(result)
        print(f"\n| through the sidecar, rate 0 ({broker.kind}) | round | messages/s | "
              "interactions/s | CPU (cores) | CPU µs per interaction |")  # fmt: skip
        print("|---|---:|---:|---:|---:|---:|")
        for fmt, label in (("interaction", "interaction records"), ("otlp_proto", "OTLP spans")):
            for r, result in enumerate(runs[fmt], start=1):
                print(f"| {label} | {r} | {result['consumed'] / result['seconds']:,.0f} | "
                      f"{n / result['seconds']:,.0f} | "
                      f"{result['cpu'] / result['seconds']:.2f} | "
                      f"{1e6 * result['cpu'] / n:.0f} |")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
