"""Scores link back to their trace: exemplars over real HTTP, for plain interaction records too."""

from __future__ import annotations

import asyncio
import urllib.request

from monitor.config import Settings
from monitor.http import MetricsServer
from monitor.records import MetricResult, ScoredRecord
from monitor.sinks.prometheus import PrometheusSink, trace_exemplar
from monitor.telemetry import Exporter
from tests.support import ROOT
from tests.support.records import openmetrics_families, validate_record

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
SPAN = "00f067aa0ba902b7"


def scored(
    metadata: dict[str, str], faithfulness: float = 0.2, contexts: tuple[str, ...] = ("c",)
) -> ScoredRecord:
    interaction = validate_record({"id": "r1", "user_input": "q", "retrieved_contexts": contexts,
                                   "response": "a", "metadata": metadata})  # fmt: skip
    results = {"faithfulness": MetricResult(metric="faithfulness", score=faithfulness)}
    return ScoredRecord(interaction=interaction, results=results, inclusion_probability=0.5)


def get(port: int, accept: str | None) -> tuple[str, str]:
    headers = {"Accept": accept} if accept else {}
    request = urllib.request.Request(f"http://127.0.0.1:{port}/metrics", headers=headers)
    with urllib.request.urlopen(request, timeout=5) as response:
        return response.headers["Content-Type"], response.read().decode()


async def test_metadata_trace_id_of_a_plain_record_is_the_exemplar() -> None:
    exporter = Exporter()
    settings = Settings(routes=["search"])
    await PrometheusSink(exporter, settings).write(
        [scored({"trace_id": TRACE, "span_id": SPAN, "route": "search"})]
    )
    server = MetricsServer(exporter.registry, "127.0.0.1", 0)
    await server.start()
    try:
        kind, text = await asyncio.to_thread(get, server.port, "application/openmetrics-text")
        plain_kind, plain = await asyncio.to_thread(get, server.port, None)
    finally:
        await server.stop()
    assert kind.startswith("application/openmetrics-text")
    found = {}
    for family in openmetrics_families(text):
        for sample in family.samples:
            if sample.exemplar is not None:
                found[sample.name] = (sample.exemplar.labels, sample.exemplar.value)
    want = {"trace_id": TRACE, "span_id": SPAN}
    assert found["rag_monitor_metric_score_bucket"] == (want, 0.2)
    assert found["rag_monitor_hallucination_weight_total"] == (want, 2.0)
    # the classic text format has no exemplars, and ids never become labels
    assert plain_kind.startswith("text/plain") and TRACE not in plain


async def test_no_context_is_counted_apart_and_out_of_the_hallucination_rate() -> None:
    exporter = Exporter()
    sink = PrometheusSink(exporter, Settings(routes=["search"]))
    meta = {"route": "search", "trace_id": TRACE}
    await sink.write(
        [
            scored(meta, 0.0, contexts=()),  # no context
            scored(meta, 0.0, contexts=(" ",)),  # a blank chunk: no context either
            scored(meta, 0.0),  # a hallucination against a context
            scored(meta, 1.0),  # faithful
        ]
    )
    labels = {"route": "search", "judge": "llm"}

    def value(name: str) -> float | None:
        return exporter.registry.get_sample_value(name, labels)

    assert value("rag_monitor_no_context_total") == 2
    assert value("rag_monitor_no_context_weight_total") == 4.0  # 1/p, p = 0.5
    assert value("rag_monitor_hallucinations_total") == 1
    assert value("rag_monitor_hallucination_weight_total") == 2.0
    assert value("rag_monitor_scored_weight_total") == 4.0  # the two with a context
    # the metric keeps its definition: three faithfulness scores of 0, each a fail
    fails = {"metric": "faithfulness", "verdict": "fail", "judge": "llm"}
    assert exporter.registry.get_sample_value("rag_monitor_verdicts_total", fails) == 3


def test_no_trace_no_exemplar_and_long_ids_keep_within_the_exemplar_limit() -> None:
    assert trace_exemplar(scored({})) is None
    assert trace_exemplar(scored({"trace_id": "has spaces"})) is None  # not an id: ignored
    long_trace, long_span = "t" * 64, "s" * 64
    labels = trace_exemplar(scored({"trace_id": long_trace, "span_id": long_span}))
    assert labels == {"trace_id": long_trace}  # both would exceed 128 characters


def test_the_hallucination_panels_ask_for_exemplars() -> None:
    import json

    root = ROOT
    dashboard = json.loads((root / "dashboards" / "rag-monitor.json").read_text())
    with_exemplars = {
        target["expr"].split("{", 1)[0].rsplit("(", 1)[-1]
        for panel in dashboard["panels"]
        for target in panel.get("targets", [])
        if target.get("exemplar") is True
    }
    assert with_exemplars == {
        "rag_monitor_hallucination_weight_total",
        "rag_monitor_no_context_weight_total",
        "rag_monitor_metric_score_bucket",
    }
    helm = root / "helm" / "rag-monitor" / "files" / "rag-monitor.json"
    assert json.loads(helm.read_text()) == dashboard
