"""The demo's traffic: the labelled traffic set read into records, or turned into OTLP traces.

The bundled set is ``traffic.jsonl`` in this package (made by
``scripts/make_demo_traffic.py``); ``--traffic`` names another file in the same
record schema. `otlp_traffic` turns the records into the span messages the
OpenTelemetry Collector's Kafka exporter would write for them.
"""

from __future__ import annotations

import hashlib
import importlib.resources
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from monitor.demo import DemoInputError
from monitor.records import InvalidRecord, parse_record

TRAFFIC_PACKAGE = "monitor.demo"
TRAFFIC_FILE = "traffic.jsonl"
#: labels of the traffic set that are not a good answer
PROBLEM_LABELS = frozenset({"hallucinated", "off_topic", "evasive"})


def played_verdict(reason: str, label: str) -> str:
    """The verdict the labels give on one flag reason of an answer (the played reviewer):
    ``hallucination`` and ``control`` are confirmed when the answer is labelled
    hallucinated; any other reason when the label is a bad answer."""
    bad = (
        label == "hallucinated"
        if reason in ("hallucination", "control")
        else (label in PROBLEM_LABELS)
    )
    return "confirmed" if bad else "false_alarm"


@dataclass(frozen=True)
class TrafficRecord:
    """One interaction of the set: its id (the Kafka key), the raw line, and what the report
    compares against (route, label, reference answer)."""

    id: str
    value: bytes
    route: str | None
    label: str | None
    reference: str | None

    @property
    def key(self) -> bytes:
        return self.id.encode("utf-8")


def read_traffic(path: Path | None = None, limit: int | None = None) -> list[TrafficRecord]:
    """The first ``limit`` records of the traffic set; every line must be a valid record."""
    if path is None:
        resource = importlib.resources.files(TRAFFIC_PACKAGE).joinpath(TRAFFIC_FILE)
        raw = resource.read_bytes()
        where = f"bundled {TRAFFIC_FILE}"
    else:
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise DemoInputError(f"cannot read traffic file {path}: {exc.strerror}") from None
        where = str(path)
    out: list[TrafficRecord] = []
    seen: set[str] = set()
    for number, line in enumerate(raw.splitlines(), start=1):
        if not line.strip():
            continue
        if limit is not None and len(out) >= limit:
            break
        try:
            interaction = parse_record(line)
        except InvalidRecord as exc:
            raise DemoInputError(f"{where} line {number}: {exc}") from None
        if interaction.id in seen:
            raise DemoInputError(f"{where} line {number}: duplicate id {interaction.id}")
        seen.add(interaction.id)
        label = interaction.metadata.get("label")
        out.append(
            TrafficRecord(
                id=interaction.id,
                value=line,
                route=interaction.route,
                label=label if isinstance(label, str) else None,
                reference=interaction.reference,
            )
        )
    if not out:
        raise DemoInputError(f"{where} holds no records")
    return out


def otlp_traffic(
    traffic: Sequence[TrafficRecord],
) -> tuple[list[TrafficRecord], list[tuple[bytes, bytes]]]:
    """The traffic as OpenInference traces: records renamed to their trace ids, and the
    OTLP messages (children, then the root span), keyed by trace id.

    Each trace id is derived from the record's id, so a run is reproducible.
    """
    from monitor.demo.spans import MS, SpanRecorder, encode, openinference_trace

    recorder = SpanRecorder(service="demo-rag-service", environment="demo")
    renamed: list[TrafficRecord] = []
    messages: list[tuple[bytes, bytes]] = []
    start_ns = int(time.time() * 1000) * MS
    try:
        for n, record in enumerate(traffic):
            data = json.loads(record.value)
            chosen = int.from_bytes(hashlib.sha256(record.key).digest()[:16], "big") or 1
            trace_id = openinference_trace(recorder, data, start_ns=start_ns + n * 100 * MS,
                                           route=record.route, extra_spans=2,
                                           trace_id=chosen)  # fmt: skip
            spans = recorder.take()
            key = trace_id.encode("ascii")
            messages += [(key, encode(spans[:-1])), (key, encode(spans[-1:]))]
            renamed.append(TrafficRecord(trace_id, record.value, record.route, record.label,
                                         record.reference))  # fmt: skip
    finally:
        recorder.shutdown()
    return renamed, messages
