"""`Exporter`: every Prometheus metric of rag-monitor, declared once; labels are bounded.

See docs/metrics.md, "Prometheus series and endpoints".
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from monitor.records import Verdict

PREFIX = "rag_monitor_"

SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)

# Every series' help text, by its name after PREFIX.
HELP = {
    "records_consumed_total": "Records read from Kafka.",
    "records_sampled_total": "Records kept by the sampler.",
    "records_invalid_total": "Records that failed validation and went to the dead-letter topic.",
    "records_skipped_total": (
        "Records not scored for a reason: sampled but unaffordable (budget), kept by the "
        "configured rate but thinned by the budget (budget_thinned), judge failure, ..."
    ),
    "records_scored_total": "Records scored and handed to every sink.",
    "metric_score": "Scores per metric and route (LLM judge unless judge=local).",
    "verdicts_total": "Per-metric outcomes against the metric's threshold.",
    "hallucinations_total": (
        "Scored records whose faithfulness fell below its threshold (by default 1: "
        "an answer with any claim its context does not support)."
    ),
    "scored_weight_total": (
        "Sum of 1/p over records with a faithfulness score and a context (p = inclusion "
        "probability): the hallucination rate's denominator."
    ),
    "hallucination_weight_total": (
        "Sum of 1/p over hallucinated records; divide rates by scored_weight_total."
    ),
    "no_context_total": (
        "Records with a faithfulness score but no retrieved context (a retrieval "
        "failure, not a hallucination)."
    ),
    "no_context_weight_total": (
        "Sum of 1/p over no-context records; their share of the records with a "
        "faithfulness score is this / (this + scored_weight_total)."
    ),
    "judge_requests_total": (
        "Judge HTTP requests by outcome (ok, timeout, rate_limited, server_error, ...)."
    ),
    "judge_request_duration_seconds": "Judge request latency, retries included.",
    "judge_tokens_total": "Judge tokens spent, by metric and kind (prompt, completion).",
    "token_budget_remaining": "Tokens left in the current budget window.",
    "token_budget_share": (
        "This replica's share of the deployment's token budget: its assigned partitions "
        "/ the topic's partitions."
    ),
    "sample_rate": "Current base sample rate (after budget adaptation).",
    "risk_screened_share": (
        "Risk-based sampling: the recent share of the records within reach of the sample "
        "that the local judge's screen read (1: it keeps up; below 1, the rest were drawn "
        "at the base rate)."
    ),
    "consumer_lag": "Records behind the partition's high watermark.",
    "backlog_enqueued_total": "Interactions queued into the golden-set backlog, by flag reason.",
    "backlog_write_errors_total": "Failed backlog writes (retried).",
    "backlog_size": "Backlog rows by status.",
    "traces_total": (
        "OTLP traces out of the trace buffer, by outcome (assembled, split, no_llm, ...)."
    ),
    "trace_buffer_traces": "Traces held in the trace buffer.",
    "trace_buffer_bytes": "Estimated bytes of the spans held there.",
    "judge_info": (
        "The judge that scores (always 1): kind (llm or local), model, and role (primary, "
        "or fallback: the local judge for records the token budget cannot afford)."
    ),
}


class Exporter:
    """The metric objects, on a registry of their own (so tests can run several)."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        declare = _Declare(self.registry)
        self.records_consumed = declare.counter("records_consumed_total", "topic")
        self.records_sampled = declare.counter("records_sampled_total")
        self.records_invalid = declare.counter("records_invalid_total", "reason")
        self.records_skipped = declare.counter("records_skipped_total", "reason")
        self.records_scored = declare.counter("records_scored_total")
        self.metric_score = declare.histogram(
            "metric_score", SCORE_BUCKETS, "metric", "route", "judge"
        )
        self.verdicts = declare.counter("verdicts_total", "metric", "verdict", "judge")
        self.hallucinations = declare.counter("hallucinations_total", "route", "judge")
        self.scored_weight = declare.counter("scored_weight_total", "route", "judge")
        self.hallucination_weight = declare.counter("hallucination_weight_total", "route", "judge")
        self.no_context = declare.counter("no_context_total", "route", "judge")
        self.no_context_weight = declare.counter("no_context_weight_total", "route", "judge")
        self.judge_requests = declare.counter("judge_requests_total", "outcome")
        self.judge_request_duration = declare.histogram(
            "judge_request_duration_seconds", LATENCY_BUCKETS
        )
        self.judge_tokens = declare.counter("judge_tokens_total", "metric", "kind")
        self.token_budget_remaining = declare.gauge("token_budget_remaining")
        self.token_budget_share = declare.gauge("token_budget_share")
        self.sample_rate = declare.gauge("sample_rate")
        self.risk_screened_share = declare.gauge("risk_screened_share")
        self.consumer_lag = declare.gauge("consumer_lag", "partition")
        self.backlog_enqueued = declare.counter("backlog_enqueued_total", "reason")
        self.backlog_write_errors = declare.counter("backlog_write_errors_total")
        self.backlog_size = declare.gauge("backlog_size", "status")
        self.traces = declare.counter("traces_total", "outcome")
        self.trace_buffer_traces = declare.gauge("trace_buffer_traces")
        self.trace_buffer_bytes = declare.gauge("trace_buffer_bytes")
        self.judge_info = declare.gauge("judge_info", "kind", "model", "role")
        self.calibration = CalibrationCollector()
        self.registry.register(self.calibration)

    def initialise(
        self,
        *,
        topic: str,
        metrics: Sequence[str],
        routes: Sequence[str],
        judges: Sequence[str],
        invalid_reasons: Sequence[str] = (),
        skip_reasons: Sequence[str] = (),
        backlog_reasons: Sequence[str] = (),
        judge_requests: bool = False,
    ) -> None:
        """Create the series whose label values are known up front, at 0.

        A counter that first appears at its value after an event has no rate for
        that event (Prometheus sees no increase from nothing); at 0 from the
        start, ``rate()`` and the dashboard see every event, the first included.
        """
        self.records_consumed.labels(topic=topic)
        for reason in invalid_reasons:
            self.records_invalid.labels(reason=reason)
        for reason in skip_reasons:
            self.records_skipped.labels(reason=reason)
        for judge in judges:
            for route in routes:
                self.hallucinations.labels(route=route, judge=judge)
                self.scored_weight.labels(route=route, judge=judge)
                self.hallucination_weight.labels(route=route, judge=judge)
                self.no_context.labels(route=route, judge=judge)
                self.no_context_weight.labels(route=route, judge=judge)
                for metric in metrics:
                    self.metric_score.labels(metric=metric, route=route, judge=judge)
            for metric in metrics:
                for verdict in Verdict:
                    self.verdicts.labels(metric=metric, verdict=verdict.value, judge=judge)
        if judge_requests:
            self.judge_requests.labels(outcome="ok")
            for metric in metrics:
                for kind in ("prompt", "completion"):
                    self.judge_tokens.labels(metric=metric, kind=kind)
        for reason in backlog_reasons:
            self.backlog_enqueued.labels(reason=reason)


class _Declare:
    """Declares metrics on one registry: each name behind `PREFIX`, its help text from `HELP`."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def counter(self, name: str, *labels: str) -> Counter:
        return Counter(PREFIX + name, HELP[name], labels, registry=self.registry)

    def gauge(self, name: str, *labels: str) -> Gauge:
        return Gauge(PREFIX + name, HELP[name], labels, registry=self.registry)

    def histogram(self, name: str, buckets: Sequence[float], *labels: str) -> Histogram:
        return Histogram(PREFIX + name, HELP[name], labels, buckets=buckets, registry=self.registry)


class CalibrationCollector(Collector):
    """The judge's accuracy from reviewer verdicts, as last read from Postgres.

    Set by the backlog sink on a slow interval (never on the scoring path).
    A value that cannot be estimated yet (no verdicts) is left out, not 0.
    Every replica reads the same Postgres: aggregate with ``max``, not ``sum``.
    """

    def __init__(self) -> None:
        self.precision: dict[str, float | None] = {}
        self.control_share: float | None = None
        self.rate: tuple[float, float, float] | None = None
        self.verdicts: dict[tuple[str, str], int] = {}

    def update(
        self,
        precision: dict[str, float | None],
        control_share: float | None,
        rate: tuple[float, float, float] | None,
        verdicts: dict[tuple[str, str], int],
    ) -> None:
        self.precision, self.control_share, self.rate, self.verdicts = (
            dict(precision),
            control_share,
            rate,
            dict(verdicts),
        )

    def describe(self) -> Iterator[Metric]:
        return iter(self._families())

    def collect(self) -> Iterator[Metric]:
        return iter(self._families())

    def _families(self) -> list[Metric]:
        p = PREFIX
        precision = GaugeMetricFamily(
            p + "flag_precision",
            "Share of reviewed flagged answers whose flag reviewers confirmed, by reason.",
            labels=["reason"],
        )
        for reason, value in sorted(self.precision.items()):
            if value is not None:
                precision.add_metric([reason], value)
        control = GaugeMetricFamily(
            p + "control_hallucination_share",
            "Share of reviewed control (unflagged) answers that were hallucinations.",
        )
        rates = [
            GaugeMetricFamily(
                p + "hallucination_rate_calibrated" + suffix,
                f"Hallucination rate corrected by reviewer verdicts{what}.",
            )
            for suffix, what in (("", ""), ("_lower", ", 95% lower"), ("_upper", ", 95% upper"))
        ]
        if self.control_share is not None:
            control.add_metric([], self.control_share)
        if self.rate is not None:
            for family, value in zip(rates, self.rate, strict=True):
                family.add_metric([], value)
        verdicts = CounterMetricFamily(
            p + "review_verdicts",
            "Reviewer verdicts recorded in Postgres, by flag reason and verdict.",
            labels=["reason", "verdict"],
        )
        for (reason, verdict), n in sorted(self.verdicts.items()):
            verdicts.add_metric([reason, verdict], n)
        return [precision, control, *rates, verdicts]


class JudgeMetrics:
    """The judge's observer (`monitor.judges.metering.JudgeObserver`): requests, latency,
    tokens."""

    def __init__(self, exporter: Exporter) -> None:
        self.exporter = exporter

    def on_request(self, outcome: str, seconds: float) -> None:
        self.exporter.judge_requests.labels(outcome=outcome).inc()
        self.exporter.judge_request_duration.observe(seconds)

    def on_tokens(self, metric: str, prompt_tokens: int, completion_tokens: int) -> None:
        tokens = self.exporter.judge_tokens
        if prompt_tokens:
            tokens.labels(metric=metric, kind="prompt").inc(prompt_tokens)
        if completion_tokens:
            tokens.labels(metric=metric, kind="completion").inc(completion_tokens)
