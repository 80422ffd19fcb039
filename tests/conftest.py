"""Shared fixtures: a real Kafka-protocol broker (session), topics, the judge server, settings.

The broker is noida-db, or Tansu with ``RAG_MONITOR_TEST_BROKER=tansu``; one per
test session, a fresh topic (4 partitions) and DLQ topic per test.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor.config import Settings, load_settings
from monitor.embedded.broker import Broker
from tests.support.judge_server import JudgeServer

PARTITIONS = 4
_counter = itertools.count()


@pytest.fixture(scope="session")
def broker() -> Iterator[Broker]:
    with Broker() as running:
        yield running


@dataclass(frozen=True)
class Topic:
    bootstrap: str
    name: str
    dlq: str
    group: str
    partitions: int


@pytest.fixture
def topic(broker: Broker) -> Topic:
    n = next(_counter)
    t = Topic(broker.bootstrap_servers, f"in-{os.getpid()}-{n}", f"dlq-{os.getpid()}-{n}",
              f"group-{os.getpid()}-{n}", PARTITIONS)  # fmt: skip
    broker.create_topics({t.name: PARTITIONS, t.dlq: 1}, max_message_bytes=16 * 1024 * 1024)
    return t


@pytest.fixture
def judge_http() -> Iterator[JudgeServer]:
    """The real OpenAI-compatible judge server on 127.0.0.1 (tests.support.judge_server)."""
    with JudgeServer() as server:
        yield server


def monitor_settings(
    broker: Broker, topic: Topic, judge: JudgeServer | None, **overrides: Any
) -> Settings:
    values: dict[str, Any] = {
        "kafka_bootstrap_servers": topic.bootstrap,
        "kafka_topic": topic.name,
        "kafka_dlq_topic": topic.dlq,
        "kafka_group_id": topic.group,
        "kafka_session_timeout_ms": broker.session_timeout_ms,
        "kafka_heartbeat_interval_ms": broker.heartbeat_interval_ms,
        "judge_api_key": "test-key",
        "judge_max_retries": 3,
        "judge_timeout_seconds": 5.0,
        "metrics_host": "127.0.0.1",
        "metrics_port": 0,
        "routes": ["search", "chat"],
        "token_budget": "0",
        "sample_rate": 1.0,
        "shutdown_grace_seconds": 10.0,
    }
    if judge is not None:
        values["judge_base_url"] = judge.base_url
    values.update(overrides)
    return load_settings(**values)


def interaction(i: int, *, supported: bool = True, **metadata: str) -> dict[str, Any]:
    """A record the deterministic judge scores 1.0 (supported) or 0.0 on faithfulness."""
    context = f"Receipts are required for travel expenses over {100 + i} dollars."
    response = context if supported else f"Receipts are never required for item {i} lodging."
    return {
        "id": f"rec-{i}",
        "user_input": "When do I need to attach a receipt for travel expenses?",
        "retrieved_contexts": [context],
        "response": response,
        "metadata": metadata,
    }


def encode(record: dict[str, Any]) -> bytes:
    return json.dumps(record).encode("utf-8")


def samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Values of the sample ``name`` in Prometheus text, keyed by sorted labels."""
    out: dict[tuple[tuple[str, str], ...], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out
