"""The wiring (`monitor.app.build`): what it builds is also what it closes."""

from __future__ import annotations

from prometheus_client import generate_latest
from pydantic import SecretStr

from monitor.app import build
from monitor.config import Settings
from monitor.scoring import Scorer
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
        (("kind", "local"), ("model", "builtin"), ("role", "fallback")): 1.0,
    }
    closers = list(parts.closers)
    assert parts.judge.aclose in closers and parts.fallback.judge.aclose in closers
    for close in closers:
        await close()
