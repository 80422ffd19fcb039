"""The scores topic sink: JSON per scored record, written before offsets move (real broker)."""

from __future__ import annotations

import asyncio
import json
import math
from datetime import UTC, datetime

import pytest

from monitor.app import build, serve
from monitor.config import Settings
from monitor.kafka.publisher import KafkaPublisher
from monitor.kafka.topics import committed_offsets, create_topics, produce
from monitor.records import MetricResult, ScoredRecord
from monitor.sinks import SinkBackpressure
from monitor.sinks.scores_topic import ScoresTopicSink, score_message
from tests.fixtures.kafka import Topic, monitor_settings
from tests.support.embedded import Broker
from tests.support.judge_server import JudgeServer
from tests.support.kafka import read_topic
from tests.support.records import encode, interaction, validate_record
from tests.support.waits import wait_until

AT = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)


def test_the_message_carries_ids_scores_flags_and_judge() -> None:
    record = ScoredRecord(
        interaction=validate_record({**interaction(1), "metadata": {"trace_id": "ab12",
                                                                    "span_id": "cd34"}}),
        results={
            "faithfulness": MetricResult(metric="faithfulness", score=0.25),
            "context_utility": MetricResult(metric="context_utility", score=math.nan),
        },
    )  # fmt: skip
    message = score_message(record, Settings(), AT)
    assert message == {
        "id": "rec-1", "trace_id": "ab12", "span_id": "cd34",
        "scores": {"faithfulness": 0.25, "context_utility": None},
        "flags": ["hallucination"], "hallucination_probability": None, "judge": "llm",
        "scored_at": "2026-12-01T08:00:00+00:00",
    }  # fmt: skip
    json.dumps(message, allow_nan=False)  # unscoreable is null, never NaN


async def test_a_batch_kafka_does_not_take_asks_the_pipeline_to_wait() -> None:
    settings = Settings(scores_topic="scores", kafka_bootstrap_servers="127.0.0.1:9")
    sink = ScoresTopicSink(KafkaPublisher(settings), settings)  # never started: nothing sent
    record = ScoredRecord(interaction=validate_record(interaction(2)))
    with pytest.raises(SinkBackpressure) as info:
        await sink.write([record])
    assert info.value.retry_after > 0


@pytest.mark.kafka
async def test_every_scored_record_reaches_the_scores_topic_before_its_offset(
    broker: Broker, topic: Topic, judge_server: JudgeServer
) -> None:
    scores = topic.name + "-scores"
    await create_topics(topic.bootstrap, {scores: 1})
    n = 10
    records = []
    for i in range(n):
        value = interaction(i, supported=i % 2 == 0, route="search")
        value["metadata"]["trace_id"] = f"{i:032x}"
        records.append((f"rec-{i}".encode(), encode(value)))
    await produce(topic.bootstrap, topic.name, records)
    settings = monitor_settings(broker, topic, judge_server, scores_topic=scores)
    parts = build(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop, parts))
    try:
        await wait_until(lambda: parts.exporter.records_scored._value.get() >= n, 60, "scoring")
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    written = await read_topic(topic.bootstrap, scores, expected=n)
    by_id = {json.loads(m.value or b"")["id"]: json.loads(m.value or b"") for m in written}
    assert set(by_id) == {f"rec-{i}" for i in range(n)}
    for i in range(n):
        message = by_id[f"rec-{i}"]
        assert message["trace_id"] == f"{i:032x}" and message["span_id"] is None
        assert message["scores"]["faithfulness"] == (1.0 if i % 2 == 0 else 0.0)
        assert ("hallucination" in message["flags"]) is (i % 2 == 1)
        assert message["judge"] == "llm"
        assert datetime.fromisoformat(message["scored_at"]).tzinfo is not None
    assert {m.key for m in written} == {f"rec-{i}".encode() for i in range(n)}
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert sum(p or 0 for p in positions.values()) == n
