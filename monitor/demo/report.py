"""The demo's report: `DemoReport`, filled from the exporter's registry and the `Tally`, and
its text.

`metric_sum` and `metric_by_label` read the registry the sidecar reports to, so the
report's counts are the ones ``/metrics`` serves.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry

from monitor.backlog.calibration import CALIBRATED_MEANING, RAW_MEANING, at_edge, judge_error
from monitor.config import Settings, TokenBudgetSpec
from monitor.demo.production import AtProduction
from monitor.demo.statistics import Confusion, RateEstimate, Tally, confusion, estimate_rate
from monitor.demo.traffic import PROBLEM_LABELS
from monitor.flags import HALLUCINATION, hallucination_rule

DASHBOARD = "dashboards/rag-monitor.json"
ALERTS = "dashboards/alerts.yaml"


@dataclass
class DemoReport:
    """Everything the demo found, from the registry, the broker, Postgres and the labels."""

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
    #: what counts as a hallucination, in one sentence (`flags.hallucination_rule`)
    hallucination_rule: str = ""
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
    #: backlog rows left pending, unreviewed, for a person on the review page
    left_pending: int = 0
    flag_precision: dict[str, float | None] = field(default_factory=dict)
    flag_reviewed: dict[str, int] = field(default_factory=dict)
    calibrated_rate: float | None = None
    calibrated_low: float | None = None
    calibrated_high: float | None = None
    #: why there is no calibrated rate, when there is none
    calibration_missing: list[str] = field(default_factory=list)
    #: among the reviewed control (unflagged) answers, the share that hallucinate
    control_hallucination_share: float | None = None
    control_reviewed: int = 0
    #: the share of unflagged records the demo's sidecar queued as controls (its setting)
    control_share: float = 0.0
    #: the calibrated rate the same reviewing would give at production's control share
    #: (`monitor.demo.production`), next to the played reviewer's
    production: AtProduction | None = None
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
    #: the review page is served after the report (`--review`): everything stays up until Ctrl-C
    review: bool = False
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

    def write_json(self, path: Path) -> None:
        """`as_json` to ``path``, replaced whole: readers never see half a report."""
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.as_json(), indent=2, default=str) + "\n", encoding="utf-8")
        tmp.replace(path)

    def _rates(self) -> list[str]:
        """The hallucination rate: the calibrated one first once verdicts exist, the raw one
        with what bounds the judge's error, each with what it means."""
        lines: list[str] = []
        add = lines.append
        h = self.hallucination
        raw = (
            "n/a (no record with a faithfulness score)"
            if h is None or h.rate is None or h.low is None or h.high is None
            else f"{h.rate:.1%} (95% CI {h.low:.1%} – {h.high:.1%}; {h.events} of {h.n} "
            "records with a faithfulness score)"
        )
        error = judge_error(
            self.flag_precision.get(HALLUCINATION),
            self.flag_reviewed.get(HALLUCINATION, 0),
            self.control_hallucination_share,
            self.control_reviewed,
        )
        interval = (
            f"interval: {h.method}, n = {_count(h.effective_n)}"
            if h is not None and h.rate is not None
            else ""
        )
        if self.calibrated_rate is not None:
            add(
                f"hallucination rate: {self.calibrated_rate:.1%} (95% interval "
                f"{_pct(self.calibrated_low)} – {_pct(self.calibrated_high)}), calibrated by "
                f"{self.review_verdicts} reviewer verdicts"
            )
            lines.extend(self._in_short())
            add(f"  calibrated:   {CALIBRATED_MEANING}")
            edge = at_edge(
                self.calibrated_rate,
                self.calibrated_low,
                self.calibrated_high,
                self.flag_precision.get(HALLUCINATION),
                self.control_hallucination_share,
                self.control_reviewed,
            )
            if edge is not None:
                add(f"                {edge}")
            lines.extend(self._counted())
            lines.extend(self._production())
            add(f"  raw (judge):  {raw}")
            add(f"                {RAW_MEANING}")
        else:
            add(f"hallucination rate: {raw}, raw (judge), not calibrated")
            lines.extend(self._counted())
            add(f"  raw (judge):  {RAW_MEANING}")
        if interval:
            add(f"                {interval}")
        add(f"  judge error:  {error}")
        if self.calibrated_rate is None:
            missing = "; ".join(self.calibration_missing) or "no reviewer verdicts"
            add(f"  calibrated:   n/a ({missing})")
            lines.extend(self._production())
        if self.true_rate is not None:
            add(f"  labels:       {self.true_rate:.1%} (the truth the demo knows, to compare)")
        if self.review_verdicts:
            add(
                f"review:       the labels played the reviewer: {self.review_verdicts} verdicts"
                f" on {self.review_answers} answers"
            )
            for reason, value in sorted(self.flag_precision.items()):
                add(
                    f"  flag precision {reason:<14} {_pct(value):>6} of "
                    f"{self.flag_reviewed.get(reason, 0)} reviewed flags confirmed"
                )
        if self.left_pending:
            add(
                f"  left for you: the {self.left_pending} newest backlog rows, pending and "
                "unreviewed (the review page's queue, status pending)"
            )
        return lines

    def _in_short(self) -> list[str]:
        """How far the raw rate is from the calibrated one and why, in one sentence, and where
        the control verdicts behind the correction come from; from the report's own figures."""
        h = self.hallucination
        precision = self.flag_precision.get(HALLUCINATION)
        control = self.control_hallucination_share
        calibrated = self.calibrated_rate
        if h is None or h.rate is None or calibrated is None or precision is None:
            return []
        if control is None:
            return []
        raw = h.rate
        false_alarms = 1 - precision
        gap = raw - calibrated
        if abs(gap) < 0.005:
            head = f"the judge's raw rate, {raw:.1%}, matches the calibrated {calibrated:.1%}"
            why = (
                f"its false alarms ({false_alarms:.0%} of its reviewed hallucination flags) "
                f"and its misses ({control:.1%} of the reviewed unflagged answers) cancel"
            )
        elif gap > 0:
            times = f" ({raw / calibrated:.1f} times)" if calibrated > 0 else ""
            head = (
                f"the judge's raw rate, {raw:.1%}, is {100 * gap:.1f} points{times} above the "
                f"calibrated {calibrated:.1%}"
            )
            why = (
                f"reviewers confirmed only {precision:.1%} of its hallucination flags "
                f"({false_alarms:.0%} were false alarms)"
            )
            if control > 0:
                why += (
                    f", which outweighs the {control:.1%} of reviewed unflagged answers that "
                    "did hallucinate"
                )
        else:
            head = (
                f"the judge's raw rate, {raw:.1%}, is {100 * -gap:.1f} points below the "
                f"calibrated {calibrated:.1%}"
            )
            why = (
                f"{control:.1%} of the reviewed unflagged answers hallucinated (misses its "
                f"flags do not count), which outweighs its false alarms ({false_alarms:.0%} of "
                "its reviewed hallucination flags)"
            )
        lines = [f"  in short:     {head} because {why}."]
        if self.control_reviewed:
            production = (
                f", where production's default of {self.production.control_share:.0%} would "
                "give far fewer (production below)"
                if self.production is not None
                else ""
            )
            lines.append(
                f"  controls:     the {self.control_reviewed} control verdicts are on unflagged "
                f"answers this run queued for review at a control share of "
                f"{self.control_share:.0%} and the labels judged{production}"
            )
        return lines

    def _counted(self) -> list[str]:
        """What the rate counts as a hallucination, in one sentence (when known)."""
        return [f"  counted:      {self.hallucination_rule}"] if self.hallucination_rule else []

    def _production(self) -> list[str]:
        """The calibrated rate at production's control share, simulated from this run."""
        p = self.production
        if p is None:
            return []
        head = (
            f"  production:   at the default control share ({p.control_share:.0%}) the same "
            f"{p.reviewed} reviewed answers hold {p.controls:.1f} control answers on average "
            f"({p.rounds} rounds simulated from this run):"
        )
        if p.calibrated == 0 or p.rate is None:
            return [head, "                no calibrated rate in any round (no control verdict)"]
        typical = f"typically {p.rate:.1%} (95% interval {_pct(p.low)} – {_pct(p.high)})"
        if p.calibrated == p.rounds:
            return [head, f"                {typical}"]
        missing = 1 - p.calibrated / p.rounds
        return [
            head,
            f"                no calibrated rate in {missing:.0%} of the rounds (no control "
            f"verdict); in the others {typical}",
        ]

    def render(self) -> str:
        lines: list[str] = []
        add = lines.append
        add("rag-monitor demo — report")
        add("=" * 25)
        add(f"judge:        {self.judge}")
        lines.extend(self._rates())
        add(f"traffic:      {self.records} interactions produced; sample rate {self.sample_rate:g}")
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
            add('  reading the means (docs/design.md, "Metrics"):')
            lines.extend(f"    - {finding}" for finding in self.offline_findings)
        add("")
        if self.hold_seconds > 0 or self.review:
            if self.review:
                add(f"/metrics:     {self.metrics_url} (up after this report until Ctrl-C)")
            else:
                held = f"{self.hold_seconds:g} s"
                add(f"/metrics:     {self.metrics_url} (up for {held} after this report)")
            add("  Prometheus:  scrape it with:")
            target = self.metrics_url.removeprefix("http://").removesuffix("/metrics")
            add("                scrape_configs:")
            add("                  - job_name: rag-monitor-demo")
            add("                    scrape_interval: 5s")
            add(f"                    static_configs: [{{targets: ['{target}']}}]")
            add(f"                and load the alert rules from {ALERTS}")
            add(f"  Grafana:     add that Prometheus as a data source, then import {DASHBOARD}")
        else:
            add(f"/metrics:     {self.metrics_url} was up during the run and stopped with it")
            add(
                "  dashboard:   rerun with --metrics-port PORT --pace N --hold SECONDS and "
                f"point a Prometheus at it, then import {DASHBOARD} "
                "(docs/operations.md, section The dashboard on the demo)"
            )
        add(f"elapsed:      {self.elapsed_seconds:.1f} s")
        return "\n".join(lines) + "\n"


def _count(n: float) -> str:
    """An effective sample size for people: a whole number when it is one."""
    return f"{n:.0f}" if math.isclose(n, round(n)) else f"{n:.1f}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1%}"


def _pr(c: Confusion) -> str:
    def f(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.2f}"

    return (
        f"precision {f(c.precision)}, recall {f(c.recall)} "
        f"(tp {c.tp}, fp {c.fp}, fn {c.fn}, tn {c.tn})"
    )


def metric_sum(registry: CollectorRegistry, sample: str, **labels: str) -> float:
    """Sum of every sample named ``sample`` whose labels include ``labels``."""
    total = 0.0
    for family in registry.collect():
        for s in family.samples:
            if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items()):
                total += s.value
    return total


def metric_by_label(registry: CollectorRegistry, sample: str, label: str) -> dict[str, float]:
    """Sum of every sample named ``sample``, per value of its label ``label``."""
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


def read_sidecar(
    report: DemoReport, registry: CollectorRegistry, tally: Tally, settings: Settings
) -> None:
    """The sidecar's counts and tokens from the registry, and its flags against the labels."""
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
    report.hallucination_rule = hallucination_rule(settings.thresholds)
    report.control_share = settings.control_share
    # the reasons interactions were queued for (every reason's series starts at 0)
    report.backlog_enqueued = {
        k: int(v)
        for k, v in metric_by_label(registry, P + "backlog_enqueued_total", "reason").items()
        if v
    }
    _label_report(report, tally, registry)


def _label_report(report: DemoReport, tally: Tally, registry: CollectorRegistry) -> None:
    """The flags against the known labels, and the hallucination rate with its interval."""
    outcomes = list(tally.outcomes.values())
    labelled = [o for o in outcomes if o.label is not None]
    report.flags_any = confusion((bool(o.reasons), o.label in PROBLEM_LABELS) for o in labelled)
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


def budget_text(spec: TokenBudgetSpec) -> str:
    """``200000/h`` rather than ``200000/3600s``."""
    if spec.unlimited:
        return "unlimited"
    for seconds, unit in ((86400, "d"), (3600, "h"), (60, "m"), (1, "s")):
        if spec.window_seconds == seconds:
            return f"{spec.tokens}/{unit}"
    return str(spec)


def judge_kind(settings: Settings) -> str:
    return "llm" if settings.judge_base_url else "local"


def describe_judge(settings: Settings, model: str) -> str:
    """Which judge produces the numbers, in words (no secrets): its kind, and ``model`` as
    the judge reports it (`monitor.judges.model_name`)."""
    if settings.judge_base_url:
        return (
            f"LLM judge {model} at {settings.judge_base_url} "
            f"(embeddings: {settings.embedding_model})"
        )
    return (
        f"local judge, model {model} (zero tokens, in-process: each claim read by the "
        "trained support model and checked for words, numbers and names no context states; "
        "set RAG_MONITOR_JUDGE_BASE_URL for an LLM judge)"
    )
