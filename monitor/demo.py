"""`rag-monitor demo`: the whole product on one machine, nothing to set up.

The demo is an orchestration of the real parts, in this order:

1. a fresh work directory; the traffic set (``monitor/data/demo_traffic.jsonl``
   unless ``--traffic``), cut to ``--records``;
2. an embedded Kafka-protocol broker (`monitor.embedded.broker.Broker`) and an
   embedded Postgres (`monitor.embedded.postgres.EmbeddedPostgres`), started
   in worker threads;
3. the exporter's ``/metrics`` (every labelled series at 0), before any traffic;
   the topics, the backlog migrations (the code of ``rag-monitor migrate``), and
   the traffic produced to the topic, keyed by interaction id (with
   ``traffic_format="otlp"``: each interaction as an OpenInference trace made
   with the OpenTelemetry SDK, two OTLP messages keyed by its trace id, as the
   Collector's Kafka exporter writes them; `otlp_traffic`): all at once, or
   with ``pace`` at that many messages per second while the sidecar consumes
   (a Prometheus scraping meanwhile sees real rates);
4. the sidecar, wired exactly as ``rag-monitor run`` wires it
   (`monitor.commands.run.build`), plus one extra sink, `Tally`, that keeps each
   record's outcome for the label report; it runs in-process until every
   produced record is consumed and finished (sampled out, skipped, or in every
   sink), with a live progress line on stderr;
5. the backlog annotated from the traffic set's reference answers (written to
   ``references.jsonl`` and read back with the code of ``rag-monitor backlog
   import``), the reviewer played from the labels (a verdict on every answer's
   every reason, saved as the review page saves them) and the calibration read
   back, then the offline runner (the code of ``rag-monitor offline``);
6. the report (`DemoReport`): built from what the exporter's registry, the
   broker's committed offsets and Postgres hold, plus the known labels.

The judge is the configured LLM endpoint when ``RAG_MONITOR_JUDGE_BASE_URL``
is set, else the zero-token local judge; the report names it. A stop event
(SIGINT/SIGTERM, installed by the command) interrupts any phase; everything
that was started is stopped, and the work directory removed (unless
``keep_dir``), whatever happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.resources
import json
import math
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO, TypeVar

from prometheus_client import CollectorRegistry
from tqdm import tqdm

from monitor.config import Settings, TokenBudgetSpec, load_settings
from monitor.flags import flag_reasons, is_hallucination
from monitor.records import InvalidRecord, ScoredRecord, parse_record

T = TypeVar("T")

TRAFFIC_PACKAGE = "monitor"
TRAFFIC_FILE = "data/demo_traffic.jsonl"
TOPIC = "rag-interactions"
DLQ_TOPIC = "rag-interactions-dlq"
GROUP_ID = "rag-monitor-demo"
PARTITIONS = 2
DASHBOARD = "dashboards/rag-monitor.json"
ALERTS = "dashboards/alerts.yaml"
#: two-sided 95% normal quantile
Z95 = 1.959963984540054
#: labels of the traffic set that are not a good answer
PROBLEM_LABELS = frozenset({"hallucinated", "off_topic", "evasive"})
MAX_ROUTES = 20
PROGRESS_EVERY_TTY = 0.25
PROGRESS_EVERY_PIPE = 5.0
#: the longest any single setup or bookkeeping step may take
PHASE_TIMEOUT = 120.0
#: share of unflagged records the demo's sidecar also queues (reason control), so the
#: played reviewer's verdicts on them measure the judge's misses (production: 0.01)
DEMO_CONTROL_SHARE = 0.5


class DemoError(Exception):
    """The demo cannot go on; the message says why and what to do."""


class Interrupted(Exception):
    """SIGINT/SIGTERM arrived while a phase was running."""


# ---------------------------------------------------------------------------- options


@dataclass(frozen=True)
class DemoOptions:
    records: int | None = None
    sample_rate: float = 1.0
    traffic: Path | None = None
    workdir: Path | None = None
    keep_dir: bool = False
    metrics_port: int = 0
    hold_seconds: float = 0.0
    #: after the report, serve the review page on this port of 127.0.0.1 until Ctrl-C
    review_port: int | None = None
    report_json: Path | None = None
    config: str | None = None
    #: ``interaction`` records, or ``otlp`` span messages (needs the ``demo`` extra)
    traffic_format: str = "interaction"
    #: produce the traffic at this many records per second (None: all at once)
    pace: float | None = None
    #: give up (and say so) when the sidecar has not finished the traffic by then
    timeout_seconds: float = 600.0
    #: ... or has not consumed a single record by then (no partitions assigned?)
    first_record_seconds: float = 60.0


# ---------------------------------------------------------------------------- traffic


@dataclass(frozen=True)
class TrafficRecord:
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
            raise DemoError(f"cannot read traffic file {path}: {exc.strerror}") from None
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
            raise DemoError(f"{where} line {number}: {exc}") from None
        if interaction.id in seen:
            raise DemoError(f"{where} line {number}: duplicate id {interaction.id}")
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
        raise DemoError(f"{where} holds no records")
    return out


def otlp_traffic(
    traffic: Sequence[TrafficRecord],
) -> tuple[list[TrafficRecord], list[tuple[bytes, bytes]]]:
    """The traffic as OpenInference traces: records renamed to their trace ids, and the
    OTLP messages (children, then the root span), keyed by trace id.

    Each trace id is derived from the record's id, so a run is reproducible.
    """
    import hashlib

    from monitor.embedded.spans import MS, SpanRecorder, encode, openinference_trace

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


# ---------------------------------------------------------------------- the label sink


@dataclass(frozen=True)
class Outcome:
    """What the sidecar decided about one scored record."""

    label: str | None
    reasons: tuple[str, ...]
    hallucinated: bool | None
    weight: float
    tokens: int


class Tally:
    """A `monitor.sinks.Sink` that remembers each scored record's outcome (idempotent per id).

    It sits last in the sink list, so a record it holds is in every other sink.
    """

    name = "demo-tally"

    def __init__(self, thresholds: dict[str, float]) -> None:
        self.thresholds = thresholds
        self.outcomes: dict[str, Outcome] = {}

    async def write(self, batch: Sequence[ScoredRecord]) -> None:
        for record in batch:
            label = record.interaction.metadata.get("label")
            p = record.inclusion_probability
            self.outcomes[record.interaction.id] = Outcome(
                label=label if isinstance(label, str) else None,
                reasons=tuple(flag_reasons(record, self.thresholds)),
                hallucinated=is_hallucination(record, self.thresholds),
                weight=1.0 / p if p > 0 else 0.0,
                tokens=record.usage.total_tokens,
            )

    async def flush(self) -> None:
        return None

    async def aclose(self) -> None:
        return None

    @property
    def flagged(self) -> int:
        return sum(1 for o in self.outcomes.values() if o.reasons)


# ----------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class RateEstimate:
    """A proportion with a 95% Wilson score interval (on Kish's effective n when weighted)."""

    rate: float | None
    low: float | None
    high: float | None
    #: records, and how many of them had the event (unweighted)
    n: int
    events: int
    effective_n: float
    weighted_events: float
    weighted_total: float
    method: str


def wilson_interval(rate: float, n: float, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval of a proportion ``rate`` observed on ``n`` (> 0) trials."""
    if n <= 0:
        raise ValueError("n must be positive")
    z2 = z * z
    denominator = 1.0 + z2 / n
    centre = (rate + z2 / (2 * n)) / denominator
    half = z * math.sqrt(rate * (1 - rate) / n + z2 / (4 * n * n)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def estimate_rate(
    events: Iterable[tuple[bool, float]],
    *,
    weighted_events: float | None = None,
    weighted_total: float | None = None,
) -> RateEstimate:
    """Rate of True among ``(event, weight)`` pairs, weight = 1/p.

    The point estimate is Σw·event / Σw (given explicitly when it comes from
    the exporter's counters); the interval is Wilson's with n = (Σw)² / Σw²,
    which is the plain count when every weight is 1.
    """
    pairs = list(events)
    n = len(pairs)
    count = sum(1 for e, _ in pairs if e)
    total = sum(w for _, w in pairs)
    squares = sum(w * w for _, w in pairs)
    hits = sum(w for e, w in pairs if e)
    if weighted_events is not None:
        hits = weighted_events
    if weighted_total is not None:
        total = weighted_total
    uniform = all(math.isclose(w, pairs[0][1]) for _, w in pairs)
    method = (
        "Wilson score interval, 95%"
        if uniform  # equal weights: the effective n is the count
        else "Wilson score interval, 95%, on Kish's effective sample size (weights 1/p)"
    )
    if n == 0 or total <= 0:
        return RateEstimate(None, None, None, n, count, 0.0, hits, total, method)
    effective = (sum(w for _, w in pairs) ** 2) / squares if squares > 0 else 0.0
    rate = hits / total
    low, high = wilson_interval(min(1.0, max(0.0, rate)), effective)
    return RateEstimate(rate, low, high, n, count, effective, hits, total, method)


@dataclass(frozen=True)
class Confusion:
    """Flags (predicted) against labels (actual)."""

    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    @property
    def precision(self) -> float | None:
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else None

    @property
    def recall(self) -> float | None:
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else None

    def as_json(self) -> dict[str, Any]:
        return {**asdict(self), "precision": self.precision, "recall": self.recall}


def confusion(pairs: Iterable[tuple[bool, bool]]) -> Confusion:
    """From ``(flagged, actually_bad)`` pairs."""
    counts = Counter(pairs)
    return Confusion(
        tp=counts[(True, True)],
        fp=counts[(True, False)],
        fn=counts[(False, True)],
        tn=counts[(False, False)],
    )


# ----------------------------------------------------------------------- the report


@dataclass
class DemoReport:
    judge: str
    judge_kind: str
    records: int = 0
    consumed: int = 0
    sampled: int = 0
    scored: int = 0
    flagged: int = 0
    invalid: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    committed_offsets: int = 0
    #: partition -> committed position of the demo's group, and end offset after producing
    committed: dict[str, int] = field(default_factory=dict)
    end_offsets: dict[str, int] = field(default_factory=dict)
    sample_rate: float = 1.0
    hallucination: RateEstimate | None = None
    flags_any: Confusion = field(default_factory=Confusion)
    flags_hallucination: Confusion = field(default_factory=Confusion)
    flagged_by_label: dict[str, dict[str, int]] = field(default_factory=dict)
    flag_reasons: dict[str, int] = field(default_factory=dict)
    backlog_enqueued: dict[str, int] = field(default_factory=dict)
    backlog_rows: int = 0
    backlog_interactions: int = 0
    backlog_status: dict[str, int] = field(default_factory=dict)
    redacted_rows: int = 0
    annotated: int = 0
    backlog_controls: int = 0
    #: the played reviewer: verdicts saved, answers reviewed, and the calibration
    review_verdicts: int = 0
    review_answers: int = 0
    flag_precision: dict[str, float | None] = field(default_factory=dict)
    flag_reviewed: dict[str, int] = field(default_factory=dict)
    calibrated_rate: float | None = None
    calibrated_low: float | None = None
    calibrated_high: float | None = None
    raw_rate_backlog: float | None = None
    #: share of scored records labelled hallucinated (the truth the demo knows)
    true_rate: float | None = None
    review_url: str = ""
    offline_evaluated: int = 0
    offline_means: dict[str, float | None] = field(default_factory=dict)
    offline_findings: list[str] = field(default_factory=list)
    offline_tokens: int = 0
    #: judge tokens from ``rag_monitor_judge_tokens_total`` (chat and embeddings; what the
    #: dashboards show)
    tokens_prompt: int = 0
    tokens_completion: int = 0
    #: every judge token the scored records cost, embeddings included (the scorer's usage)
    tokens_records: int = 0
    token_budget: str = ""
    token_budget_tokens: int = 0
    metrics_url: str = ""
    #: how long /metrics stays up after the report (0: it stops with the demo)
    hold_seconds: float = 0.0
    bootstrap_servers: str = ""
    pg_dsn: str = ""
    workdir: str = ""
    elapsed_seconds: float = 0.0
    exporter: dict[str, float] = field(default_factory=dict)

    @property
    def tokens(self) -> int:
        return self.tokens_prompt + self.tokens_completion

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["flags_any"] = self.flags_any.as_json()
        data["flags_hallucination"] = self.flags_hallucination.as_json()
        data["tokens"] = self.tokens
        return data

    def render(self) -> str:
        lines: list[str] = []
        add = lines.append
        add("")
        add("rag-monitor demo — report")
        add("=" * 25)
        add(f"judge:        {self.judge}")
        add(
            f"traffic:      {self.records} interactions produced; sample rate {self.sample_rate:g}"
        )
        skipped = sum(self.skipped.values())
        skipped_text = (
            ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items())) if skipped else "none"
        )
        add(
            f"sidecar:      consumed {self.consumed}, sampled {self.sampled}, "
            f"scored {self.scored}, flagged {self.flagged}"
        )
        add(f"              skipped: {skipped_text}; invalid (dead-lettered): {self.invalid}")
        add(
            f"              committed offsets (from the broker): {self.committed_offsets} of "
            f"{sum(self.end_offsets.values())} "
            f"({', '.join(f'p{p} {o}' for p, o in self.committed.items()) or 'none'})"
        )
        h = self.hallucination
        if h is not None and h.rate is not None and h.low is not None and h.high is not None:
            weighted = (
                ""
                if math.isclose(h.weighted_total, h.n)
                else f"; weighted by 1/p: {h.weighted_events:.1f} of {h.weighted_total:.1f}"
            )
            add(
                f"hallucination rate: {h.rate:.1%} (95% CI {h.low:.1%} – {h.high:.1%}; "
                f"{h.events} of {h.n} records with a faithfulness score{weighted})"
            )
            add(f"              interval: {h.method}, n = {h.effective_n:.1f}")
        else:
            add("hallucination rate: n/a (no record with a faithfulness score)")
        if self.review_verdicts:
            add(
                f"review:       the labels played the reviewer: {self.review_verdicts} verdicts"
                f" on {self.review_answers} answers ({self.backlog_controls} control)"
            )
            for reason, value in sorted(self.flag_precision.items()):
                shown = "n/a" if value is None else f"{value:.0%}"
                add(
                    f"  flag precision {reason:<14} {shown:>4} of "
                    f"{self.flag_reviewed.get(reason, 0)} reviewed flags confirmed"
                )
            calibrated = (
                "n/a"
                if self.calibrated_rate is None
                else f"{self.calibrated_rate:.1%} (95% interval {self.calibrated_low or 0:.1%}"
                f" – {self.calibrated_high or 0:.1%})"
            )
            raw = "n/a" if h is None or h.rate is None else f"{h.rate:.1%}"
            true = "n/a" if self.true_rate is None else f"{self.true_rate:.1%}"
            add(f"  hallucination rate: raw {raw} · calibrated {calibrated} · labels {true}")
        add("flags against the known labels (bad = hallucinated, off_topic or evasive):")
        add(f"  any flag      → bad answer:   {_pr(self.flags_any)}")
        add(f"  hallucination → hallucinated: {_pr(self.flags_hallucination)}")
        if self.flagged_by_label:
            add("  flagged share per label:")
            for label, c in sorted(self.flagged_by_label.items()):
                share = c["flagged"] / c["scored"] if c["scored"] else 0.0
                add(f"    {label:<13} {c['flagged']:>4} of {c['scored']:<4} ({share:.0%})")
        if self.flag_reasons:
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.flag_reasons.items()))
            add(f"  flag reasons (a record can have several): {reasons}")
        budget = (
            "unlimited"
            if self.token_budget_tokens <= 0
            else f"{self.token_budget} ({self.tokens / self.token_budget_tokens:.1%} used)"
        )
        add(
            f"judge tokens: {self.tokens} ({self.tokens_prompt} prompt + "
            f"{self.tokens_completion} completion) of a budget of {budget}"
        )
        if self.tokens_records != self.tokens:
            add(f"              {self.tokens_records} with embeddings, over the scored records")
        statuses = ", ".join(f"{k} {v}" for k, v in self.backlog_status.items() if v)
        add(
            f"backlog:      {self.backlog_rows} row(s) for {self.backlog_interactions} "
            f"interaction(s), {self.backlog_controls} of them control (one row per distinct "
            f"question); {self.redacted_rows} with PII redacted"
        )
        add(f"              annotated from the references: {self.annotated}; now: {statuses}")
        add(
            f"offline:      {self.offline_evaluated} row(s) evaluated "
            f"({self.offline_tokens} judge tokens); metric means:"
        )
        for name, mean in self.offline_means.items():
            add(f"    {name:<30} {'-' if mean is None else f'{mean:.3f}'}")
        if self.offline_findings:
            add("  reading the means (docs/design.md, \"Metrics\"):")
            lines.extend(f"    - {finding}" for finding in self.offline_findings)
        add("")
        if self.hold_seconds > 0:
            held = f"{self.hold_seconds:g} s"
            add(f"/metrics:     {self.metrics_url} (up for {held} after this report)")
            add("  Prometheus:  scrape it with:")
            target = self.metrics_url.removeprefix("http://").removesuffix("/metrics")
            add("                scrape_configs:")
            add("                  - job_name: rag-monitor-demo")
            add("                    scrape_interval: 5s")
            add(f"                    static_configs: [{{targets: ['{target}']}}]")
            add(f"                and load the alert rules from {ALERTS}")
            add(
                "  Grafana:     add that Prometheus as a data source, then import "
                f"{DASHBOARD}"
            )
        else:
            add(f"/metrics:     {self.metrics_url} was up during the run and stopped with it")
            add(
                "  dashboard:   rerun with --metrics-port PORT --pace N --hold SECONDS and "
                f"point a Prometheus at it, then import {DASHBOARD} (README: Dashboards)"
            )
        add(f"elapsed:      {self.elapsed_seconds:.1f} s")
        return "\n".join(lines) + "\n"


def _pr(c: Confusion) -> str:
    def f(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.2f}"

    return (
        f"precision {f(c.precision)}, recall {f(c.recall)} "
        f"(tp {c.tp}, fp {c.fp}, fn {c.fn}, tn {c.tn})"
    )


# ------------------------------------------------------------------ registry reading


def metric_sum(registry: CollectorRegistry, sample: str, **labels: str) -> float:
    """Sum of every sample named ``sample`` whose labels include ``labels``."""
    total = 0.0
    for family in registry.collect():
        for s in family.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


def metric_by_label(registry: CollectorRegistry, sample: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for family in registry.collect():
        for s in family.samples:
            if s.name == sample and label in s.labels:
                out[s.labels[label]] = out.get(s.labels[label], 0.0) + s.value
    return out


P = "rag_monitor_"
#: exporter series copied into the report (sums over labels), for checking against /metrics
EXPORTED = (
    "records_consumed_total",
    "records_sampled_total",
    "records_scored_total",
    "records_invalid_total",
    "records_skipped_total",
    "hallucinations_total",
    "hallucination_weight_total",
    "scored_weight_total",
    "backlog_enqueued_total",
    "judge_tokens_total",
)


# ------------------------------------------------------------------------- progress


class _StatusBar(tqdm):  # type: ignore[type-arg]
    """tqdm with the pipeline's counters as format fields (tqdm's documented extension point)."""

    monitor_interval = 0  # no tqdm monitor thread: the demo refreshes the line itself

    def __init__(self, counts: dict[str, float], **kwargs: Any) -> None:
        self.counts = counts  # before tqdm's first draw reads it
        super().__init__(**kwargs)

    @property
    def format_dict(self) -> dict[str, Any]:
        return {**super().format_dict, **self.counts}


class Progress:
    """The demo's steps on stderr, and one tqdm status line while the sidecar consumes:
    rewritten in place on a terminal, every few seconds in a pipe."""

    FORMAT = (
        "consumed {n}/{total}  sampled {sampled}  scored {scored}  "
        "flagged {flagged}  skipped {skipped}  [{since:5.1f}s]"
    )

    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream = stream
        self.total = total
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.every = PROGRESS_EVERY_TTY if self.tty else PROGRESS_EVERY_PIPE
        self.started = time.monotonic()
        self._bar: _StatusBar | None = None

    def step(self, message: str) -> None:
        with tqdm.external_write_mode(file=self.stream):  # lifts the status line, if any
            print(f"demo: {message}", file=self.stream, flush=True)

    def update(self, consumed: int, sampled: int, scored: int, flagged: int, skipped: int) -> None:
        counts: dict[str, float] = {"sampled": sampled, "scored": scored, "flagged": flagged,
                                    "skipped": skipped, "since": time.monotonic() - self.started}
        if self._bar is None:
            self._bar = _StatusBar(
                counts, total=self.total, file=self.stream, bar_format=self.FORMAT,
                mininterval=self.every, miniters=0, delay=0, leave=True, disable=False,
            )  # fmt: skip
        self._bar.counts = counts
        self._bar.update(consumed - self._bar.n)  # redraws at most every `every` seconds

    def done(self) -> None:
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.counts["since"] = time.monotonic() - self.started
            bar.close()  # the final line, always drawn, left on screen


# -------------------------------------------------------------------------- the demo


class Demo:
    """One demo run. Constructing it starts nothing; `run` starts and always stops everything."""

    def __init__(
        self, options: DemoOptions, *, out: TextIO | None = None, err: TextIO | None = None
    ) -> None:
        self.options = options
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.workdir: Path | None = None
        self.interrupted = False

    async def run(self, stop: asyncio.Event) -> DemoReport | None:
        """The whole demo; returns the report, or None when ``stop`` interrupted it."""
        from monitor.embedded.broker import Broker
        from monitor.embedded.postgres import EmbeddedPostgres

        started = time.monotonic()
        traffic = read_traffic(self.options.traffic, self.options.records)
        messages: list[tuple[bytes, bytes]] | None = None
        if self.options.traffic_format == "otlp":
            traffic, messages = otlp_traffic(traffic)
        progress = Progress(self.err, len(traffic) if messages is None else len(messages))
        broker = Broker()  # constructors start nothing (an unknown broker kind raises here)
        postgres = EmbeddedPostgres()
        self.workdir = self._make_workdir()
        cleanup: list[tuple[str, Any]] = []
        try:
            progress.step(f"{len(traffic)} interactions; work directory {self.workdir}")
            progress.step(f"starting the Kafka-protocol broker ({broker.kind})")
            await self._thread(broker.start, stop)
            progress.step(f"broker listening on {broker.bootstrap_servers}")
            progress.step("starting Postgres")
            dsn = await self._thread(postgres.start, stop)
            progress.step(f"Postgres listening on 127.0.0.1:{postgres.port} ({dsn})")
            settings = self._settings(broker, dsn, traffic)
            report = DemoReport(judge=describe_judge(settings), judge_kind=_judge_kind(settings))
            report.records = len(traffic)
            report.sample_rate = settings.sample_rate
            report.bootstrap_servers = broker.bootstrap_servers
            report.pg_dsn = dsn
            report.workdir = str(self.workdir)
            progress.step(f"judge: {report.judge}")
            parts = await self._exporter(settings, report, cleanup)
            progress.step(f"serving {report.metrics_url}")
            await self._prepare(settings, dsn, stop)
            values = [(r.key, r.value) for r in traffic] if messages is None else list(messages)
            feeding = asyncio.ensure_future(self._produce(settings, values, stop))
            try:
                if self.options.pace is None:
                    await asyncio.shield(feeding)  # all of it before the sidecar starts
                else:
                    progress.step(f"producing {self.options.pace:g} records/s meanwhile")
                progress.step(f"running the sidecar on topic {TOPIC} (group {GROUP_ID})")
                await self._sidecar(parts, settings, len(values), progress, report, stop, feeding)
                ends = await feeding
            finally:
                if not feeding.done():
                    feeding.cancel()
                    with contextlib.suppress(BaseException):
                        await feeding
            report.end_offsets = {str(p): o for p, o in sorted(ends.items())}
            progress.step("annotating the backlog from the traffic set's references")
            await self._annotate(settings, dsn, traffic, report, stop)
            progress.step("playing the reviewer from the traffic set's labels")
            await self._review(settings, dsn, traffic, report, stop)
            progress.step("running the offline metrics on the annotated rows")
            await self._offline(settings, report, stop)
            await self._backlog_summary(settings, dsn, report)
            report.elapsed_seconds = time.monotonic() - started
            report.hold_seconds = self.options.hold_seconds
            self.out.write(report.render())
            self.out.flush()
            if self.options.report_json is not None:
                self._write_json(self.options.report_json, report)
            if self.options.hold_seconds > 0:
                print(
                    f"demo: serving {report.metrics_url} for {self.options.hold_seconds:g} s "
                    "(Ctrl-C to stop)",
                    file=self.err,
                    flush=True,
                )
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), self.options.hold_seconds)
            if self.options.review_port is not None and not stop.is_set():
                await self._serve_review(settings, dsn, report, stop)
            return report
        except Interrupted:
            self.interrupted = True
            progress.done()
            print("demo: interrupted; stopping everything", file=self.err, flush=True)
            return None
        finally:
            progress.done()
            await self._cleanup(cleanup, broker, postgres)

    # --- phases

    def _make_workdir(self) -> Path:
        parent = self.options.workdir
        if parent is not None:
            parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="rag-monitor-demo-", dir=parent))

    def _settings(self, broker: Any, dsn: str, traffic: Sequence[TrafficRecord]) -> Settings:
        routes = sorted({r.route for r in traffic if r.route is not None})[:MAX_ROUTES]
        # explicit values win over the environment and --config; the judge settings do not
        # appear here, so RAG_MONITOR_JUDGE_* (and the file) choose the judge
        return load_settings(
            self.options.config,
            kafka_bootstrap_servers=broker.bootstrap_servers,
            kafka_topic=TOPIC,
            kafka_dlq_topic=DLQ_TOPIC,
            kafka_group_id=GROUP_ID,
            kafka_security_protocol="PLAINTEXT",
            kafka_session_timeout_ms=broker.session_timeout_ms,
            kafka_heartbeat_interval_ms=broker.heartbeat_interval_ms,
            pg_dsn=dsn,
            migrate_on_start=False,
            control_share=DEMO_CONTROL_SHARE,
            sample_rate=self.options.sample_rate,
            routes=routes,
            metrics_host="127.0.0.1",
            metrics_port=self.options.metrics_port,
            shutdown_grace_seconds=10.0,
            **self._format_settings(),
        )

    def _format_settings(self) -> dict[str, Any]:
        if self.options.traffic_format != "otlp":
            return {}
        # each trace comes whole (two messages, one after the other): a short grace will do
        return {"input_format": "otlp_proto", "trace_grace_seconds": 0.2}

    async def _exporter(
        self, settings: Settings, report: DemoReport, cleanup: list[tuple[str, Any]]
    ) -> Any:
        """The sidecar's parts (`run.build`), its /metrics served from now to the very end."""
        from monitor.commands.run import build

        parts = build(settings)
        await parts.server.start()
        cleanup.append(("server", parts.server))
        report.metrics_url = f"http://127.0.0.1:{parts.server.port}/metrics"
        return parts

    async def _prepare(self, settings: Settings, dsn: str, stop: asyncio.Event) -> None:
        """Topics and migrations."""
        from monitor.backlog.store import BacklogStore
        from monitor.sources.kafka import create_topics

        servers = settings.kafka_bootstrap_servers
        await self._until(
            create_topics(servers, {TOPIC: PARTITIONS, DLQ_TOPIC: 1}), stop, what="creating topics"
        )
        store = BacklogStore(dsn, settings)
        try:
            await self._until(store.start(), stop, what="connecting to Postgres")
            await self._until(store.migrate(), stop, what="migrating")
        finally:
            await store.close()

    async def _produce(
        self, settings: Settings, values: Sequence[tuple[bytes, bytes]], stop: asyncio.Event
    ) -> dict[int, int]:
        """The traffic (at ``pace`` messages/s, if set); the end offset of each partition."""
        from monitor.sources.kafka import produce

        pace = self.options.pace
        acks = await self._until(
            produce(settings.kafka_bootstrap_servers, TOPIC, list(values), per_second=pace),
            stop,
            what="producing",
            within=PHASE_TIMEOUT + (len(values) / pace if pace else 0.0),
        )
        if len(acks) != len(values):
            raise DemoError(f"produced {len(acks)} of {len(values)} records")
        ends: dict[int, int] = {}
        for partition, offset in acks:
            ends[partition] = max(ends.get(partition, 0), offset + 1)
        return ends

    async def _sidecar(
        self,
        parts: Any,
        settings: Settings,
        total: int,
        progress: Progress,
        report: DemoReport,
        stop: asyncio.Event,
        feeding: asyncio.Future[dict[int, int]],
    ) -> None:
        from monitor.sources.kafka import committed_offsets

        tally = Tally(dict(settings.thresholds))
        parts.sinks.append(tally)
        closers = list(parts.closers)
        try:
            for start in parts.starters:
                await self._until(start(), stop, what="starting the backlog sink")
            await self._until(parts.source.start(), stop, what="starting the Kafka source")
            try:
                pipeline = parts.pipeline(settings)
                await self._consume(pipeline, parts, tally, progress, total, stop, feeding)
            finally:
                await parts.source.stop()
        finally:
            for close in closers:
                with contextlib.suppress(Exception):
                    await close()
        registry = parts.exporter.registry
        report.consumed = int(metric_sum(registry, P + "records_consumed_total"))
        report.sampled = int(metric_sum(registry, P + "records_sampled_total"))
        report.scored = int(metric_sum(registry, P + "records_scored_total"))
        report.invalid = int(metric_sum(registry, P + "records_invalid_total"))
        skipped = metric_by_label(registry, P + "records_skipped_total", "reason")
        report.skipped = {k: int(v) for k, v in skipped.items() if v}  # series start at 0
        report.flagged = tally.flagged
        report.tokens_records = sum(o.tokens for o in tally.outcomes.values())
        report.exporter = {name: metric_sum(registry, P + name) for name in EXPORTED}
        tokens = metric_by_label(registry, P + "judge_tokens_total", "kind")
        report.tokens_prompt = int(tokens.get("prompt", 0))
        report.tokens_completion = int(tokens.get("completion", 0))
        report.token_budget = budget_text(settings.token_budget)
        report.token_budget_tokens = settings.token_budget.tokens
        report.backlog_enqueued = {
            k: int(v)
            for k, v in metric_by_label(registry, P + "backlog_enqueued_total", "reason").items()
        }
        self._label_report(report, tally, registry)
        committed = await self._until(
            committed_offsets(settings.kafka_bootstrap_servers, GROUP_ID, TOPIC, PARTITIONS),
            stop,
            what="reading the committed offsets",
        )
        report.committed = {str(p): o for p, o in sorted(committed.items()) if o is not None}
        report.committed_offsets = sum(report.committed.values())

    async def _consume(
        self,
        pipeline: Any,
        parts: Any,
        tally: Tally,
        progress: Progress,
        total: int,
        stop: asyncio.Event,
        feeding: asyncio.Future[dict[int, int]],
    ) -> None:
        """Run the pipeline until every produced record is consumed and finished."""
        registry: CollectorRegistry = parts.exporter.registry
        done = asyncio.Event()
        task = asyncio.create_task(pipeline.run(done), name="demo-pipeline")
        started = time.monotonic()
        deadline = started + self.options.timeout_seconds
        outcome = "finished"
        try:
            while True:
                consumed = int(metric_sum(registry, P + "records_consumed_total"))
                progress.update(
                    consumed,
                    int(metric_sum(registry, P + "records_sampled_total")),
                    int(metric_sum(registry, P + "records_scored_total")),
                    tally.flagged,
                    int(metric_sum(registry, P + "records_skipped_total")),
                )
                if task.done():
                    outcome = "pipeline stopped"
                    break
                if stop.is_set():
                    outcome = "interrupted"
                    break
                if feeding.done() and feeding.exception() is not None:
                    outcome = "producing failed"
                    break
                if consumed >= total and parts.source.in_flight == 0 and not pipeline.pending:
                    break
                now = time.monotonic()
                if now > deadline:
                    outcome = "timeout"
                    break
                if consumed == 0 and now - started > self.options.first_record_seconds:
                    outcome = "nothing consumed"
                    break
                await asyncio.wait({task}, timeout=0.2)
        finally:
            done.set()
            await task  # drains in-flight records, writes the sinks, commits offsets
            progress.done()
        if outcome == "interrupted":
            raise Interrupted
        if outcome == "timeout":
            raise DemoError(
                f"the sidecar did not finish {total} records in "
                f"{self.options.timeout_seconds:g} s (a slow judge? try --records)"
            )
        if outcome == "nothing consumed":
            raise DemoError(
                f"the sidecar consumed nothing in {self.options.first_record_seconds:g} s "
                f"(assigned partitions: {len(parts.source.assignment)}); the broker may be "
                "unhealthy"
            )
        if outcome == "producing failed":
            feeding.result()  # raises what stopped the producer
        if outcome == "pipeline stopped":
            raise DemoError("the pipeline stopped before the traffic was finished")

    def _label_report(self, report: DemoReport, tally: Tally, registry: CollectorRegistry) -> None:
        outcomes = list(tally.outcomes.values())
        labelled = [o for o in outcomes if o.label is not None]
        report.flags_any = confusion(
            (bool(o.reasons), o.label in PROBLEM_LABELS) for o in labelled
        )
        report.flags_hallucination = confusion(
            (o.hallucinated is True, o.label == "hallucinated") for o in labelled
        )
        by_label: dict[str, dict[str, int]] = {}
        for o in labelled:
            assert o.label is not None
            entry = by_label.setdefault(o.label, {"scored": 0, "flagged": 0})
            entry["scored"] += 1
            entry["flagged"] += bool(o.reasons)
        report.flagged_by_label = by_label
        truth = [o.label == "hallucinated" for o in labelled if o.hallucinated is not None]
        report.true_rate = sum(truth) / len(truth) if truth else None
        report.flag_reasons = dict(Counter(r for o in outcomes for r in o.reasons))
        report.hallucination = estimate_rate(
            [(o.hallucinated, o.weight) for o in outcomes if o.hallucinated is not None],
            weighted_events=metric_sum(registry, P + "hallucination_weight_total"),
            weighted_total=metric_sum(registry, P + "scored_weight_total"),
        )

    async def _annotate(
        self,
        settings: Settings,
        dsn: str,
        traffic: Sequence[TrafficRecord],
        report: DemoReport,
        stop: asyncio.Event,
    ) -> None:
        """Write references.jsonl for the pending rows, then import it like `backlog import`."""
        from monitor.backlog.annotations import read_annotations
        from monitor.backlog.rows import PENDING
        from monitor.backlog.store import BacklogStore

        assert self.workdir is not None
        references = {r.id: r.reference for r in traffic if r.reference}
        path = self.workdir / "references.jsonl"
        store = BacklogStore(dsn, settings)
        try:
            await self._until(store.start(), stop, what="connecting to Postgres")
            lines = [
                json.dumps({"id": row.id, "reference": references[row.id]}, ensure_ascii=False)
                async for row in store.rows(PENDING)
                if row.id in references
            ]
            path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
            imported = await self._until(
                store.import_references(read_annotations(path)), stop, what="importing references"
            )
        finally:
            await store.close()
        if imported.rejected:
            line, rid, reason = imported.rejected[0]
            raise DemoError(f"{path} line {line}: {rid}: {reason}")
        report.annotated = len(imported.changed)

    async def _review(
        self,
        settings: Settings,
        dsn: str,
        traffic: Sequence[TrafficRecord],
        report: DemoReport,
        stop: asyncio.Event,
    ) -> None:
        """Save a verdict on every reason of every answer, from the labels, then calibrate.

        ``hallucination`` and ``control``: confirmed when the answer is labelled
        hallucinated; any other reason: confirmed when the label is a bad answer.
        """
        from monitor.backlog.reviews import VerdictInput
        from monitor.backlog.store import BacklogStore
        from monitor.flags import CONTROL, HALLUCINATION

        labels = {r.id: r.label for r in traffic}
        store = BacklogStore(dsn, settings)
        try:
            await self._until(store.start(), stop, what="connecting to Postgres")
            rows = [row async for row in store.rows()]
            for row in rows:
                verdicts = []
                for answer in row.answers:
                    label = labels.get(answer.interaction_id)
                    if label is None:
                        continue
                    report.review_answers += 1
                    if answer.reasons == [CONTROL]:  # interactions, not answers
                        report.backlog_controls += answer.seen_count
                    for reason in answer.reasons:
                        bad = (
                            label == "hallucinated"
                            if reason in (HALLUCINATION, CONTROL)
                            else label in PROBLEM_LABELS
                        )
                        verdict = "confirmed" if bad else "false_alarm"
                        verdicts.append(VerdictInput(reason, verdict, answer.interaction_id))
                if verdicts:
                    await self._until(
                        store.review(row.id, version=row.version, reviewer="demo",
                                    verdicts=verdicts),
                        stop, what="saving verdicts",
                    )
                    report.review_verdicts += len(verdicts)
            calibration = await self._until(store.calibration(), stop, what="calibrating")
        finally:
            await store.close()
        report.flag_precision = dict(calibration.flag_precision)
        report.flag_reviewed = {
            r: n for r, n in calibration.reviewed.items() if r in calibration.flag_precision
        }
        report.calibrated_rate = calibration.calibrated_rate
        report.calibrated_low = calibration.lower
        report.calibrated_high = calibration.upper
        report.raw_rate_backlog = calibration.raw_rate

    async def _serve_review(
        self, settings: Settings, dsn: str, report: DemoReport, stop: asyncio.Event
    ) -> None:
        """The review page on the demo's Postgres until Ctrl-C (like --hold, without an end)."""
        from monitor.backlog.store import BacklogStore
        from monitor.review.app import ReviewApp

        store = BacklogStore(dsn, settings)
        app = ReviewApp(store)
        try:
            await self._until(store.start(), stop, what="connecting to Postgres")
            try:
                await app.start("127.0.0.1", self.options.review_port or 0)
            except OSError as exc:
                raise DemoError(
                    f"cannot serve the review page on port {self.options.review_port}: "
                    f"{exc.strerror or exc}; try --review-port 0"
                ) from exc
            report.review_url = f"http://127.0.0.1:{app.port}/"
            print(
                f"demo: the review page is at {report.review_url} (Ctrl-C to stop)",
                file=self.err,
                flush=True,
            )
            await stop.wait()
        finally:
            await app.stop()
            await store.close()

    async def _offline(self, settings: Settings, report: DemoReport, stop: asyncio.Event) -> None:
        from monitor.offline import run_offline

        result = await self._until(
            run_offline(settings, progress=False),
            stop,
            what="the offline run",
            within=self.options.timeout_seconds,
        )
        report.offline_evaluated = result.evaluated
        report.offline_means = result.means()
        report.offline_findings = result.diagnoses()
        report.offline_tokens = result.usage.total_tokens

    async def _backlog_summary(self, settings: Settings, dsn: str, report: DemoReport) -> None:
        from monitor.backlog.store import BacklogStore

        store = BacklogStore(dsn, settings)
        try:
            await store.start()
            stats = await store.stats()
            report.backlog_rows = stats.rows
            report.backlog_interactions = stats.interactions
            report.backlog_status = dict(stats.counts)
            report.redacted_rows = sum([1 async for row in store.rows() if row.redactions])
        finally:
            await store.close()

    def _write_json(self, path: Path, report: DemoReport) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(report.as_json(), indent=2, default=str) + "\n", encoding="utf-8")
        tmp.replace(path)  # readers never see half a report

    # --- plumbing

    async def _until(
        self,
        awaitable: Awaitable[T],
        stop: asyncio.Event,
        *,
        what: str = "a step",
        within: float = PHASE_TIMEOUT,
    ) -> T:
        """Await ``awaitable`` unless ``stop`` is set first (then raise Interrupted) or it
        takes longer than ``within`` seconds (DemoError); either way it is cancelled."""
        if stop.is_set():
            if asyncio.iscoroutine(awaitable):
                awaitable.close()
            raise Interrupted
        task = asyncio.ensure_future(awaitable)
        stopper = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait(
                {task, stopper}, timeout=within, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            stopper.cancel()
        if task.done():
            return task.result()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        if stop.is_set():
            raise Interrupted
        raise DemoError(f"{what} did not finish in {within:g} s")

    async def _thread(self, function: Any, stop: asyncio.Event) -> Any:
        """Run a blocking start in a thread; a stop waits for it (a thread cannot be cancelled)."""
        task = asyncio.ensure_future(asyncio.to_thread(function))
        stopper = asyncio.create_task(stop.wait())
        try:
            await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if not task.done():
            with contextlib.suppress(Exception):
                await task  # let it finish so that cleanup can stop what it started
            raise Interrupted
        result = task.result()
        if stop.is_set():
            raise Interrupted
        return result

    async def _cleanup(self, cleanup: list[tuple[str, Any]], broker: Any, postgres: Any) -> None:
        """Upstream first: the metrics server, the broker, Postgres, then the files."""
        for _name, thing in reversed(cleanup):
            with contextlib.suppress(Exception):
                await thing.stop()
        with contextlib.suppress(Exception):
            await asyncio.shield(asyncio.to_thread(broker.stop))
        with contextlib.suppress(Exception):
            await asyncio.shield(asyncio.to_thread(postgres.close))
        if self.workdir is not None:
            if self.options.keep_dir:
                print(f"demo: kept {self.workdir}", file=self.err, flush=True)
            else:
                shutil.rmtree(self.workdir, ignore_errors=True)


def budget_text(spec: TokenBudgetSpec) -> str:
    """``200000/h`` rather than ``200000/3600s``."""
    if spec.unlimited:
        return "unlimited"
    for seconds, unit in ((86400, "d"), (3600, "h"), (60, "m"), (1, "s")):
        if spec.window_seconds == seconds:
            return f"{spec.tokens}/{unit}"
    return str(spec)


def _judge_kind(settings: Settings) -> str:
    return "llm" if settings.judge_base_url else "local"


def describe_judge(settings: Settings) -> str:
    """Which judge produces the numbers, in words (no secrets)."""
    if settings.judge_base_url:
        return (
            f"LLM judge {settings.judge_model} at {settings.judge_base_url} "
            f"(embeddings: {settings.embedding_model})"
        )
    return (
        "local judge (zero tokens: lexical checks and MiniLM embeddings in-process; "
        "set RAG_MONITOR_JUDGE_BASE_URL for an LLM judge)"
    )
