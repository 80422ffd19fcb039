"""The wiring (`monitor.app.build`): what it builds is also what it closes."""

from __future__ import annotations

import asyncio
import socket

import pytest
from prometheus_client import generate_latest
from pydantic import SecretStr

from monitor.app import Service, build
from monitor.config import Settings
from monitor.judges.local.judge import MODEL_NAME as LOCAL_MODEL
from monitor.kafka.client import KafkaUnreachable
from monitor.scoring import Scorer
from tests.support.monitor import stop_services
from tests.support.records import samples


async def test_the_budget_fallback_judge_is_closed_with_the_sidecar() -> None:
    settings = Settings(
        kafka_bootstrap_servers="127.0.0.1:9",  # never contacted: build opens nothing
        judge_base_url="http://127.0.0.1:9/v1",
        judge_api_key=SecretStr("test-key"),
        budget_fallback="local",
        metrics_port=0,
    )
    parts = build(settings)
    assert isinstance(parts.fallback, Scorer) and parts.fallback.judge.kind == "local"
    assert parts.judge.kind == "llm"
    info = samples(generate_latest(parts.exporter.registry).decode(), "rag_monitor_judge_info")
    assert info == {
        (("kind", "llm"), ("model", "gpt-4o-mini"), ("role", "primary")): 1.0,
        (("kind", "local"), ("model", LOCAL_MODEL), ("role", "fallback")): 1.0,
    }
    stops = [service.stop for service in parts.services]
    assert parts.judge.aclose in stops and parts.fallback.judge.aclose in stops
    await stop_services(parts)


async def test_what_started_stops_in_reverse_even_when_a_later_start_fails() -> None:
    settings = Settings(kafka_bootstrap_servers="127.0.0.1:9", metrics_port=0)
    parts = build(settings)
    events: list[str] = []

    def service(name: str) -> Service:
        async def start() -> None:
            events.append(f"start {name}")

        async def stop() -> None:
            events.append(f"stop {name}")

        return Service(name, start, stop)

    parts.services[:] = [service("judge"), service("sink")]
    with pytest.raises(KafkaUnreachable):  # the source, started last, finds no broker
        async with parts.running():
            events.append("pipeline")  # never reached
    assert events == ["start judge", "start sink", "stop sink", "stop judge"]
    assert parts.server.port != 0  # the server had started (first) ...
    assert await asyncio.to_thread(_refused, parts.server.port)  # ... and is stopped again


def _refused(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=2).close()
    except ConnectionRefusedError:
        return True
    return False


async def test_the_budget_gauges_are_read_from_the_budget_at_each_scrape() -> None:
    settings = Settings(
        kafka_bootstrap_servers="127.0.0.1:9", token_budget="1000/h", sample_rate=0.5
    )
    parts = build(settings)

    def gauge(name: str) -> float:
        text = generate_latest(parts.exporter.registry).decode()
        return samples(text, name)[()]

    assert gauge("rag_monitor_token_budget_remaining") == 1000
    parts.budget.reserve(400)  # nothing but the scrape in between: no pipeline, no checkpoint
    assert gauge("rag_monitor_token_budget_remaining") == 600
    assert gauge("rag_monitor_sample_rate") == 0.5
    assert gauge("rag_monitor_token_budget_share") == 0  # no partition held yet
    assert parts.sampler.throttle is parts.budgeted.adaptive  # one scale, taught and read
    await stop_services(parts)
