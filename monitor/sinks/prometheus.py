"""Scored records → the Prometheus metrics of `monitor.telemetry`, with trace exemplars.

A sink like any other (`monitor.sinks.Sink`): it observes each record's scores,
verdicts and hallucination weight on the `Exporter` it is given.
"""

from __future__ import annotations

from collections.abc import Sequence

from monitor.config import Settings
from monitor.flags import is_hallucination, is_no_context, threshold
from monitor.records import ScoredRecord, Verdict
from monitor.telemetry import Exporter


class PrometheusSink:
    """Scored records → score histograms, verdicts and hallucination counters (a `Sink`).

    A metric's verdict is ``pass`` at or above its threshold, ``fail`` below,
    ``unscoreable`` when its score is NaN (never exported as a score).
    Hallucinations are counted with their weight ``1/p`` (p = the record's
    inclusion probability) so ``hallucination_weight_total /
    scored_weight_total`` estimates the hallucination rate of all traffic.
    A record whose faithfulness was scored against no context
    (`monitor.flags.is_no_context`) is counted in ``no_context_total`` and
    ``no_context_weight_total`` instead, and in neither term of that rate.
    Judge tokens are counted per call by `monitor.telemetry.JudgeMetrics` (the
    judge's observer), which also sees the spend of records that were later skipped,
    so this sink does not count them again.
    """

    name = "prometheus"

    def __init__(self, exporter: Exporter, settings: Settings) -> None:
        self.exporter = exporter
        self.settings = settings

    async def write(self, batch: Sequence[ScoredRecord]) -> None:
        for record in batch:
            self.observe(record)

    async def flush(self) -> None:
        return None

    async def aclose(self) -> None:
        """Nothing to release: the exporter outlives the sink."""

    def observe(self, record: ScoredRecord) -> None:
        e = self.exporter
        route = self.settings.route_label(record.interaction.route)
        exemplar = trace_exemplar(record)
        for name, result in record.results.items():
            if result.scoreable:
                e.metric_score.labels(metric=name, route=route, judge=result.judge).observe(
                    result.score, exemplar
                )
                passed = result.score >= threshold(self.settings.thresholds, name)
                verdict = Verdict.PASS if passed else Verdict.FAIL
            else:
                verdict = Verdict.UNSCOREABLE
            e.verdicts.labels(metric=name, verdict=verdict.value, judge=result.judge).inc()
        p = record.inclusion_probability
        weight = 1.0 / p if p > 0 else 0.0
        if is_no_context(record):
            judge = record.results["faithfulness"].judge
            e.no_context.labels(route=route, judge=judge).inc()
            e.no_context_weight.labels(route=route, judge=judge).inc(weight, exemplar)
            return
        hallucinated = is_hallucination(record, self.settings.thresholds)
        if hallucinated is None:
            return
        judge = record.results["faithfulness"].judge
        e.scored_weight.labels(route=route, judge=judge).inc(weight)
        if hallucinated:
            e.hallucinations.labels(route=route, judge=judge).inc()
            e.hallucination_weight.labels(route=route, judge=judge).inc(weight, exemplar)


#: what an exemplar's labels may hold at most (OpenMetrics), in characters
EXEMPLAR_MAX_CHARS = 128


def trace_exemplar(record: ScoredRecord) -> dict[str, str] | None:
    """``{trace_id, span_id}`` of the record's trace, for an OpenMetrics exemplar (or None).

    Exemplars are how a Grafana panel links a sample to its trace; they are only in
    the OpenMetrics exposition, never labels (ids would make series unbounded).
    """
    interaction = record.interaction
    if interaction.trace_id is None:
        return None
    labels = {"trace_id": interaction.trace_id}
    if interaction.span_id is not None:
        size = sum(len(k) + len(v) for k, v in labels.items()) + len("span_id")
        if size + len(interaction.span_id) <= EXEMPLAR_MAX_CHARS:
            labels["span_id"] = interaction.span_id
    return labels
