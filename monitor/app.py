"""The sidecar's wiring: `build` makes every component from the settings, `serve` runs them.

Started downstream first and stopped upstream first, on one exit stack (`Components.running`).
See docs/design.md, "Data flow" (start and stop).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import structlog

from monitor.backlog.migrations import (
    MIGRATE_COMMAND,
    AppliedMigrations,
    SchemaBehind,
    check_schema,
)
from monitor.budget import BUDGET, AdaptiveRate, BudgetedScorer, TokenBudget
from monitor.config import ConfigError, Settings, ambient_api_key
from monitor.flags import FLAG_REASONS
from monitor.http import (
    MetricsServer,
    ReadinessCheck,
    check_port,
    tcp_reachable,
    url_endpoint,
)
from monitor.judges import Judge, model_name
from monitor.judges.factory import JudgeConfigError, build_judge
from monitor.kafka.client import ssl_context
from monitor.kafka.ledger import LedgerListener
from monitor.kafka.publisher import KafkaPublisher
from monitor.pipeline import Pipeline
from monitor.records import INVALID_REASONS
from monitor.sampling import BUDGET_THINNED, Sampler
from monitor.scoring import RecordScorer, Scorer, UnknownMetric
from monitor.sinks import Sink
from monitor.sinks.prometheus import PrometheusSink
from monitor.sources import RevokeHook
from monitor.sources.kafka import KafkaSource
from monitor.sources.traces import TraceSource, trace_buffer
from monitor.telemetry import Exporter, JudgeMetrics
from monitor.tokens import count_tokens

if TYPE_CHECKING:  # asyncpg is imported only where a backlog is configured
    from monitor.backlog.store import BacklogStore
    from monitor.risk import RiskScreen

log = structlog.get_logger("monitor.app")

#: the readiness checks that decide /readyz: a consumer that reaches Kafka consumes and
#: exports, so it is ready. Partitions (an idle replica is healthy), the judge, Postgres
#: and the schema are reported in the body only: their failures show in metrics and
#: alerts, and an outage of one of them neither stalls a rollout nor hides the metrics
#: that say so (docs/operations.md, "Readiness").
READY_WHEN = frozenset({"kafka"})


@dataclass(frozen=True)
class Service:
    """Something the sidecar starts before the source and stops after it."""

    name: str
    start: Callable[[], Awaitable[object]] | None = None
    stop: Callable[[], Awaitable[object]] | None = None


#: wraps a service's start (`Components.running`): the start, and what is started
Starting = Callable[[Awaitable[object], str], Awaitable[object]]


def logged(name: str, stop: Callable[[], Awaitable[object]]) -> Callable[[], Awaitable[None]]:
    """``stop``, with a failure logged rather than keeping the others from stopping."""

    async def run() -> None:
        try:
            await stop()
        except Exception:
            log.exception("stop failed", part=name)

    return run


@dataclass
class Components:
    """Everything `serve` builds from the settings; constructing these opens nothing."""

    exporter: Exporter
    budget: TokenBudget
    #: `scorer` under the budget (and `fallback` for what it cannot pay): what the pipeline runs
    budgeted: BudgetedScorer
    judge: Judge
    scorer: Scorer
    fallback: RecordScorer | None
    sampler: Sampler
    sinks: list[Sink]
    source: KafkaSource | TraceSource
    server: MetricsServer
    #: what the source calls on a revoke, and the pipeline answers (`RevokeHook`)
    revoke: RevokeHook
    #: what runs beside the pipeline, in start order (downstream first); the metrics
    #: server starts before them and the source after them (`running`)
    services: list[Service] = field(default_factory=list)

    @contextlib.asynccontextmanager
    async def running(
        self, *, server: bool = True, starting: Starting | None = None
    ) -> AsyncIterator[None]:
        """The metrics server (unless ``server`` is False), the services, then the source
        started; on the way out each stopped in reverse, so the order holds by construction.

        ``starting`` wraps each start (the demo: interruptible, with what it waits for).
        """
        metrics = Service("the metrics server", self.server.start, self.server.stop)
        parts = [
            *([metrics] if server else []),
            *self.services,
            Service("the Kafka source", self.source.start, self.source.stop),
        ]
        async with contextlib.AsyncExitStack() as stack:
            for part in parts:
                if part.start is not None:
                    started = part.start()
                    await (starting(started, part.name) if starting is not None else started)
                if part.stop is not None:
                    stack.push_async_callback(logged(part.name, part.stop))
            yield

    def pipeline(self, settings: Settings) -> Pipeline:
        """The pipeline over these parts (after the source has started)."""
        return Pipeline(
            self.source,
            self.sampler,
            self.budgeted,
            self.sinks,
            self.exporter,
            settings,
            revoke=self.revoke,
        )


def build(settings: Settings) -> Components:
    """Wire the sidecar; invalid settings raise ConfigError naming the setting.

    Constructing the parts opens nothing; their services are listed in start order
    (downstream first, so each stops after what feeds it).
    """
    exporter = Exporter()
    budget = TokenBudget(settings.token_budget)
    judges = _judges(settings, budget, exporter)
    # the budget's scale on the sampler's rates, taught the cost of a record by the scorer
    adaptive = AdaptiveRate(budget)
    screen = _risk(settings, [judges.judge, judges.fallback_judge])
    sampler = Sampler(
        settings.sample_rate, settings.sample_rules, adjuster=screen, throttle=adaptive
    )
    ssl_context(settings)  # a bad TLS setting fails here, naming it (exit code 2)
    # made before the source and the pipeline, handed to both: on a revoke the source
    # asks the pipeline to checkpoint
    revoke = RevokeHook()
    kafka, source = _source(settings, exporter, budget, sampler, revoke)
    checks = _checks(settings, kafka, source)
    backlog = _backlog(settings, exporter, checks)
    scores = _scores_topic(settings)
    server = MetricsServer(
        exporter.registry, settings.metrics_host, settings.metrics_port, gating=READY_WHEN
    )
    server.checks.update(checks)
    _export(exporter, settings, judges, budget, sampler, screen, kafka)
    services = [
        *judges.services,  # the judges first: the sinks and the source stop before them
        *([Service("the risk screen", screen.start, screen.aclose)] if screen else []),
        *backlog.services,
        *scores.services,
    ]
    return Components(
        exporter,
        budget,
        BudgetedScorer(judges.scorer, budget, fallback=judges.fallback, adaptive=adaptive),
        judges.judge,
        judges.scorer,
        judges.fallback,
        sampler,
        [PrometheusSink(exporter, settings), *backlog.sinks, *scores.sinks],
        source,
        server,
        revoke,
        services,
    )


@dataclass
class _Judges:
    """The judge and its scorer; the local judge and scorer for what the budget cannot
    pay (``RAG_MONITOR_BUDGET_FALLBACK=local``); the services they run, in start order."""

    judge: Judge
    scorer: Scorer
    fallback_judge: Judge | None
    fallback: Scorer | None
    services: list[Service]


def _judges(settings: Settings, budget: TokenBudget, exporter: Exporter) -> _Judges:
    """The judges and their scorers (`_Judges`); a bad metric or judge setting is a
    `ConfigError`."""
    try:
        judge = build_judge(settings, gate=budget, observer=JudgeMetrics(exporter))
        scorer = Scorer(
            judge,
            settings.online_metrics,
            call_pattern=settings.call_pattern,
            relevancy_questions=settings.relevancy_questions,
            cache_size=settings.judge_cache_size,
        )
        fallback_judge: Judge | None = None
        fallback: Scorer | None = None
        if settings.budget_fallback == "local":
            # records the budget cannot afford are scored by the zero-token local judge
            fallback_judge = build_judge(settings, kind="local")
            fallback = Scorer(
                fallback_judge,
                settings.online_metrics,
                relevancy_questions=settings.relevancy_questions,
                cache_size=settings.judge_cache_size,
            )
    except UnknownMetric as exc:
        raise ConfigError(f"RAG_MONITOR_ONLINE_METRICS: {exc}") from None
    except JudgeConfigError as exc:
        raise ConfigError(str(exc)) from None
    services = [Service("the judge", _warm(judge), judge.aclose)]
    if fallback_judge is not None:  # its worker threads end with the sidecar
        services.append(Service("the fallback judge", _warm(fallback_judge), fallback_judge.aclose))
    if judge.kind == "llm":
        models = (settings.judge_model,)  # embeddings are estimated with the same encoding
        services.append(Service("the token counters", lambda: _load_tokenizers(models)))
    return _Judges(judge, scorer, fallback_judge, fallback, services)


def _warm(judge: Judge) -> Callable[[], Awaitable[object]] | None:
    """A local judge's models loaded at start, in a thread: the sidecar holds from its
    first minute the memory it holds once the judge scores (a fallback judge would
    otherwise load when the budget first runs short, hours in), and the first record
    waits for no model. An LLM judge has nothing to load."""
    warm_up: Callable[[], object] | None = getattr(judge, "warm_up", None)
    if warm_up is None:
        return None
    return lambda: asyncio.to_thread(warm_up)


def _source(
    settings: Settings,
    exporter: Exporter,
    budget: TokenBudget,
    sampler: Sampler,
    revoke: RevokeHook,
) -> tuple[KafkaSource, KafkaSource | TraceSource]:
    """The Kafka consumer, and the source the pipeline reads: the consumer itself, or the
    trace source that assembles its OTLP span messages per trace."""
    # a revoke does not wait for the messages buffered traces hold
    buffer = trace_buffer(settings) if settings.input_format != "interaction" else None
    kafka = KafkaSource(
        settings,
        exporter,
        # the budget's share follows the partitions, and the window's spend travels with them
        ledger=LedgerListener(settings, budget),
        on_revoke=revoke,
        held=buffer.held if buffer is not None else None,
    )
    if buffer is None:
        return kafka, kafka
    return kafka, TraceSource(kafka, buffer, settings, exporter, sampler=sampler)


def _checks(
    settings: Settings, kafka: KafkaSource, source: KafkaSource | TraceSource
) -> dict[str, ReadinessCheck]:
    """The readiness checks of the source and the judge's endpoint (`READY_WHEN`)."""
    checks: dict[str, ReadinessCheck] = {"partitions": _assigned(source), "kafka": _kafka(kafka)}
    if settings.judge_base_url:
        host, port = url_endpoint(settings.judge_base_url, 80)
        checks["judge"] = lambda: tcp_reachable(host, port)
    return checks


def _export(
    exporter: Exporter,
    settings: Settings,
    judges: _Judges,
    budget: TokenBudget,
    sampler: Sampler,
    screen: RiskScreen | None,
    kafka: KafkaSource,
) -> None:
    """The gauges read at each scrape, every label set the sidecar exports, the judges' info."""
    exporter.token_budget_remaining.set_function(budget.remaining)
    exporter.sample_rate.set_function(sampler.scaled_rate)
    if screen is not None:
        exporter.risk_screened_share.set_function(lambda: screen.screened_share)
    # (before the first assignment the budget is whole, but the replica holds no share)
    exporter.token_budget_share.set_function(lambda: budget.share if kafka.assignment else 0.0)
    judge, fallback_judge = judges.judge, judges.fallback_judge
    exporter.initialise(
        topic=settings.kafka_topic,
        metrics=settings.online_metrics,
        routes=[*settings.routes, settings.route_label(""), settings.route_label(None)],
        judges=[judge.kind] + (["local"] if fallback_judge is not None else []),
        invalid_reasons=(
            INVALID_REASONS
            if settings.input_format == "interaction"
            else (*INVALID_REASONS, "not_otlp")  # span messages that are no OTLP request
        ),
        skip_reasons=(BUDGET, BUDGET_THINNED),
        backlog_reasons=FLAG_REASONS if settings.pg_dsn is not None else (),
        judge_requests=judge.kind == "llm",
    )
    info = exporter.judge_info
    info.labels(judge.kind, judge_model(judge, settings), "primary").set(1)
    if fallback_judge is not None:
        info.labels("local", judge_model(fallback_judge, settings), "fallback").set(1)


@dataclass
class _Extra:
    """What an optional part adds to the sidecar: its sinks and its services (start order)."""

    sinks: list[Sink] = field(default_factory=list)
    services: list[Service] = field(default_factory=list)


def _backlog(settings: Settings, exporter: Exporter, checks: dict[str, ReadinessCheck]) -> _Extra:
    """The backlog sink, its gauges and its readiness checks (``RAG_MONITOR_PG_DSN``)."""
    if settings.pg_dsn is None:
        return _Extra()
    from monitor.backlog.gauges import BacklogGauges
    from monitor.backlog.store import BacklogStore
    from monitor.sinks.backlog import BacklogSink

    store = BacklogStore(settings.pg_dsn.get_secret_value(), settings)
    backlog = BacklogSink(store, settings, exporter)
    gauges = BacklogGauges(
        store, exporter, calibration_interval=settings.calibration_interval_seconds
    )
    checks.update(backlog_checks(store))
    services = [
        Service("the backlog sink", lambda: backlog.start(check=False), backlog.aclose),
        Service("the backlog gauges", gauges.start, gauges.aclose),  # reads the sink's store
        Service("the backlog schema check", _quietly(checks["schema"])),
    ]
    return _Extra([backlog], services)


def _scores_topic(settings: Settings) -> _Extra:
    """The scores topic sink and its producer (``RAG_MONITOR_SCORES_TOPIC``)."""
    if not settings.scores_topic:
        return _Extra()
    from monitor.sinks.scores_topic import ScoresTopicSink

    publisher = KafkaPublisher(settings)
    sink = ScoresTopicSink(publisher, settings)
    return _Extra([sink], [Service("the scores topic", publisher.start, publisher.stop)])


def judge_model(judge: Judge, settings: Settings) -> str:
    """The judge's model, as the start-up log and ``rag_monitor_judge_info`` name it."""
    return settings.judge_model if judge.kind == "llm" else model_name(judge)


def judge_endpoint(settings: Settings) -> str | None:
    """The LLM judge's endpoint without credentials or query: ``https://host:port/path``."""
    if not settings.judge_base_url:
        return None
    parts = urlsplit(settings.judge_base_url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return f"{parts.scheme}://{netloc}{parts.path}"


async def _load_tokenizers(models: tuple[str, ...]) -> None:
    """Load the judge's token counters at start, not on the first sampled record.

    Loading an encoding takes about a second of CPU; done lazily it would block the
    event loop (fetches, heartbeats, judge responses) in the middle of consumption.
    """

    def load() -> None:
        for model in models:
            count_tokens("rag-monitor", model)

    await asyncio.to_thread(load)


def _assigned(source: KafkaSource | TraceSource) -> ReadinessCheck:
    async def check() -> bool:
        return bool(source.assignment)

    return check


def _kafka(source: KafkaSource) -> ReadinessCheck:
    async def check() -> bool:
        return source.reachable

    return check


def backlog_checks(store: BacklogStore) -> dict[str, ReadinessCheck]:
    """``postgres`` (the backlog's Postgres answers) and ``schema`` (every migration applied)."""

    async def postgres() -> bool:
        await store.ping()
        return True

    return {"postgres": postgres, "schema": _schema(store)}


def _schema(backlog: AppliedMigrations) -> ReadinessCheck:
    """``schema``: every bundled migration applied; says once, in the log, how to fix it."""
    said: list[str] = []

    async def check() -> bool:
        try:
            await check_schema(backlog)
        except SchemaBehind as exc:
            if said != exc.missing:
                said[:] = exc.missing
                log.error(
                    f"backlog schema behind: run `{MIGRATE_COMMAND}`",
                    missing=exc.missing,
                )
            return False
        said.clear()
        return True

    return check


def _quietly(check: ReadinessCheck) -> Callable[[], Awaitable[None]]:
    """Run a readiness check once at start for what it logs; a failure does not stop the start."""

    async def run() -> None:
        try:
            await check()
        except Exception as exc:  # Postgres away at start: /readyz says so, writes retry
            log.warning("start-up check failed", error=str(exc) or type(exc).__name__)

    return run


def _risk(settings: Settings, judges: Sequence[Judge | None]) -> RiskScreen | None:
    """The risk-based sampling hook when enabled (`monitor.risk.build_adjuster`), screening
    with the sidecar's local judge (the primary or the budget's fallback) where it has one,
    so the models are loaded once."""
    if not settings.risk_sampling:
        return None
    from monitor.judges.local.judge import LocalJudge
    from monitor.risk import build_adjuster

    local = next((j for j in judges if isinstance(j, LocalJudge)), None)
    return build_adjuster(settings, local)


async def serve(
    settings: Settings, stop: asyncio.Event | None = None, parts: Components | None = None
) -> int:
    """Run until ``stop`` is set (SIGTERM/SIGINT when ``stop`` is None); returns the exit code.

    ``parts`` (from `build`) lets a caller keep hold of the exporter and source.
    """
    parts = parts if parts is not None else build(settings)
    # before anything starts: a taken port is a settings error (exit 2), not a traceback
    check_port(settings.metrics_host, parts.server.port, "RAG_MONITOR_METRICS_PORT")
    stop = stop if stop is not None else _signal_event()
    async with parts.running():
        pipeline = parts.pipeline(settings)
        if parts.judge.kind == "local" and ambient_api_key(settings):
            log.warning(
                "OPENAI_API_KEY is set but RAG_MONITOR_JUDGE_BASE_URL is not: the key is "
                "unused and the local judge scores (a screen, not a verdict)"
            )
        log.info(
            "monitor running",
            judge=parts.judge.kind,
            judge_model=judge_model(parts.judge, settings),
            judge_endpoint=judge_endpoint(settings),
            topic=settings.kafka_topic,
            group=settings.kafka_group_id,
            sample_rate=settings.sample_rate,
            token_budget=str(settings.token_budget),
            metrics_port=parts.server.port,
        )
        await pipeline.run(stop)
    log.info("monitor stopped")
    return 0


def _signal_event() -> asyncio.Event:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, _on_signal, stop, sig)
    return stop


def _on_signal(stop: asyncio.Event, sig: signal.Signals) -> None:
    log.info("shutdown requested", signal=sig.name)
    stop.set()
