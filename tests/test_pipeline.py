from __future__ import annotations

import asyncio
import json
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import pytest

from monitor.app import Components, build, serve
from monitor.config import Settings
from monitor.kafka.topics import committed_offsets, produce
from monitor.pipeline import Pipeline
from monitor.records import ScoredRecord
from monitor.sinks import SinkBackpressure
from monitor.sources.kafka import KafkaSource
from tests.fixtures.kafka import Topic, monitor_settings, require_broker
from tests.support.embedded import Broker
from tests.support.judge_server import Fault, JudgeServer, RecordingJudge
from tests.support.logs import captured_logs
from tests.support.monitor import stop_services
from tests.support.records import encode, expected_sample, interaction, samples
from tests.support.sinks import SinkBase
from tests.support.waits import wait_until

pytestmark = pytest.mark.kafka


def value(parts: Components, name: str, **labels: str) -> float:
    got = parts.exporter.registry.get_sample_value(name, labels)
    return 0.0 if got is None else got


def settled(parts: Components | Sequence[Components], topic: Topic, n: int) -> Callable[[], bool]:
    """A wait condition: ``n`` records consumed, by one replica or several together, and
    none of them holds a record in flight."""
    replicas = [parts] if isinstance(parts, Components) else list(parts)

    def check() -> bool:
        consumed = sum(
            value(p, "rag_monitor_records_consumed_total", topic=topic.name) for p in replicas
        )
        return consumed >= n and all(p.source.in_flight == 0 for p in replicas)

    return check


def committed(topic: Topic, n: int) -> Callable[[], Awaitable[bool]]:
    """A wait condition: the group has committed past ``n`` records of ``topic``.

    Wait for it before a rebalance that a test starts itself: noida-db 0.2.3 answers a
    checkpoint's commit that meets the rebalance with IllegalGeneration, then
    UnknownMemberId, and the rejoin that follows never settles.
    """

    async def check() -> bool:
        positions = await committed_offsets(
            topic.bootstrap, topic.group, topic.name, topic.partitions
        )
        return sum(p or 0 for p in positions.values()) >= n

    return check


async def stop_all(stops: Sequence[asyncio.Event], tasks: Sequence[asyncio.Task[int]]) -> None:
    """Stop every replica, then check that each that was started exited 0."""
    for stop in stops:
        stop.set()
    for task in tasks:
        assert await asyncio.wait_for(task, 30) == 0


async def records(topic: Topic, ids: Sequence[int], *, supported: Callable[[int], bool]) -> None:
    await produce(
        topic.bootstrap,
        topic.name,
        [(f"rec-{i}".encode(), encode(interaction(i, supported=supported(i), route="search")))
         for i in ids],
    )  # fmt: skip


def scrape(port: int, path: str = "/metrics") -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


async def test_sampled_records_are_scored_exported_and_committed(
    broker: Broker, topic: Topic, recording_judge: RecordingJudge
) -> None:
    n, rate = 200, 0.3
    settings = monitor_settings(broker, topic, recording_judge, sample_rate=rate)
    await records(topic, range(n), supported=lambda i: i % 4 != 0)
    parts = build(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop, parts))
    try:
        await wait_until(settled(parts, topic, n), 60, "all records consumed")
        status, text = await asyncio.to_thread(scrape, parts.server.port)
        ready, body = await asyncio.to_thread(scrape, parts.server.port, "/readyz")
        alive, _ = await asyncio.to_thread(scrape, parts.server.port, "/healthz")
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    expected = expected_sample(n, rate)
    assert abs(len(expected) - rate * n) < 0.1 * n  # the hash is fair
    assert value(parts, "rag_monitor_records_sampled_total") == len(expected)
    assert value(parts, "rag_monitor_records_scored_total") == len(expected)
    assert set(recording_judge.scored) == expected  # exactly the deterministic sample
    assert status == 200 and alive == 200
    assert ready == 200 and '"partitions": true' in body and '"judge": true' in body
    counts = samples(text, "rag_monitor_metric_score_count")
    key = (("judge", "llm"), ("metric", "faithfulness"), ("route", "search"))
    assert counts[key] == len(expected)
    hallucinated = {i for i in expected if i % 4 == 0}
    halluc = samples(text, "rag_monitor_hallucinations_total")
    assert halluc[(("judge", "llm"), ("route", "search"))] == len(hallucinated)
    weight = samples(text, "rag_monitor_scored_weight_total")
    assert weight[(("judge", "llm"), ("route", "search"))] == pytest.approx(len(expected) / rate)
    verdicts = samples(text, "rag_monitor_verdicts_total")
    fail = (("judge", "llm"), ("metric", "faithfulness"), ("verdict", "fail"))
    assert verdicts[fail] == len(hallucinated)
    assert samples(text, "rag_monitor_sample_rate")[()] == rate
    tokens = samples(text, "rag_monitor_judge_tokens_total")
    assert sum(tokens.values()) > 0
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert sum(p or 0 for p in positions.values()) == n


async def test_judge_failures_skip_with_a_reason_and_scoring_resumes(
    broker: Broker, topic: Topic, judge_server: JudgeServer
) -> None:
    settings = monitor_settings(broker, topic, judge_server)
    parts = build(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop, parts))
    try:
        judge_server.down("503")
        await records(topic, range(0, 5), supported=lambda i: True)
        await wait_until(settled(parts, topic, 5), 60, "records while the judge is down")
        assert value(parts, "rag_monitor_records_skipped_total", reason="server_error") == 5
        judge_server.up()
        judge_server.inject(Fault.INVALID_JSON, times=40)  # junk answers, re-ask included
        await records(topic, range(5, 7), supported=lambda i: True)
        await wait_until(settled(parts, topic, 7), 60, "records while the judge talks junk")
        assert value(parts, "rag_monitor_records_skipped_total", reason="invalid_output") == 2
        judge_server.clear_faults()
        await records(topic, range(7, 10), supported=lambda i: True)
        await wait_until(settled(parts, topic, 10), 60, "records after the judge is back")
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    assert value(parts, "rag_monitor_records_scored_total") == 3
    # no invented scores: only the three scored records have a faithfulness score
    observed = value(
        parts, "rag_monitor_metric_score_count", metric="faithfulness", route="search", judge="llm"
    )
    assert observed == 3
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert sum(p or 0 for p in positions.values()) == 10


class FlakySink(SinkBase):
    """A real sink that asks to wait ``retry_after`` on the first ``failures`` writes (like
    Postgres being away)."""

    name = "flaky"

    def __init__(self, failures: int, retry_after: float = 0.3) -> None:
        self.failures = failures
        self.retry_after = retry_after
        self.attempts = 0
        #: when each write that failed came
        self.failed_at: list[float] = []
        self.stored: Counter[str] = Counter()

    async def write(self, batch: Sequence[ScoredRecord]) -> None:
        self.attempts += 1
        if self.failures > 0:
            self.failures -= 1
            self.failed_at.append(time.monotonic())
            raise SinkBackpressure(self.name, "unavailable", self.retry_after)
        for record in batch:
            self.stored[record.interaction.id] += 1


async def test_sink_failure_holds_offsets_until_the_sink_recovers(
    broker: Broker, topic: Topic, judge_server: JudgeServer
) -> None:
    settings = monitor_settings(broker, topic, judge_server)
    parts = build(settings)
    source = parts.source
    assert isinstance(source, KafkaSource)  # JSON records: no trace assembly
    sink = FlakySink(failures=10**9)
    parts.sinks.append(sink)
    await records(topic, range(8), supported=lambda i: True)
    await source.start()
    stop = asyncio.Event()
    pipeline = Pipeline(parts.source, parts.sampler, parts.scorer, parts.sinks, parts.exporter,
                        settings, revoke=parts.revoke, checkpoint_interval=0.1)  # fmt: skip
    task = asyncio.create_task(pipeline.run(stop, grace_seconds=5))
    try:
        await wait_until(lambda: len(pipeline.pending) == 8, 60, "records scored, sink failing")
        failed = sink.attempts
        await wait_until(lambda: sink.attempts >= failed + 3, 30, "several retries")
        waits = [b - a for a, b in zip(sink.failed_at, sink.failed_at[1:], strict=False)]
        assert min(waits) >= sink.retry_after * 0.95, "each retry waits as the sink asked"
        positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
        assert all(p in (None, 0) for p in positions.values()), positions  # nothing past rec 0
        assert value(parts, "rag_monitor_records_scored_total") == 0
        sink.failures = 0
        await wait_until(lambda: not pipeline.pending, 30, "the sink to recover")
        await wait_until(lambda: source.tracker.committable() == {}, 10, "commit")
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await parts.source.stop()
        await stop_services(parts)
    assert sorted(sink.stored) == sorted(f"rec-{i}" for i in range(8))
    assert set(sink.stored.values()) == {1}
    assert value(parts, "rag_monitor_records_scored_total") == 8
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert sum(p or 0 for p in positions.values()) == 8


class CountingScorer:
    """The real scorer, counting how many records it scores at once."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.now = 0
        self.most = 0

    async def score(self, record: Any) -> ScoredRecord:
        self.now += 1
        self.most = max(self.most, self.now)
        try:
            scored: ScoredRecord = await self.inner.score(record)
            return scored
        finally:
            self.now -= 1


async def test_a_full_window_checkpoints_at_once_and_scoring_is_bounded(
    broker: Broker, topic: Topic, judge_server: JudgeServer
) -> None:
    """Half the in-flight window pending → a checkpoint now, not at the (here: never) timer."""
    n = 40
    settings = monitor_settings(broker, topic, judge_server, max_in_flight=8, score_concurrency=3)
    judge_server.latency_seconds = 0.05  # records overlap
    parts = build(settings)
    scorer = CountingScorer(parts.scorer)
    await records(topic, range(n), supported=lambda i: True)
    await parts.source.start()
    stop = asyncio.Event()
    pipeline = Pipeline(parts.source, parts.sampler, scorer, parts.sinks, parts.exporter,
                        settings, revoke=parts.revoke, checkpoint_interval=3600)  # fmt: skip
    task = asyncio.create_task(pipeline.run(stop, grace_seconds=10))
    try:
        # with only the timer, the window would stay full of pending records: a stall
        await wait_until(
            lambda: value(parts, "rag_monitor_records_scored_total") >= n - 4,
            60,
            "records checkpointed while the window fills",
        )
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await parts.source.stop()
        await stop_services(parts)
        judge_server.latency_seconds = 0.0
    assert scorer.most == 3  # in parallel, and never more than score_concurrency
    assert value(parts, "rag_monitor_records_scored_total") == n  # the rest at shutdown
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert sum(p or 0 for p in positions.values()) == n


async def test_budget_caps_spend_and_skips_what_it_cannot_afford(
    broker: Broker, topic: Topic, judge_server: JudgeServer
) -> None:
    budget = 12_000  # a day's window: one that turned during the test would refill
    settings = monitor_settings(broker, topic, judge_server, token_budget=f"{budget}/d")
    parts = build(settings)
    await records(topic, range(60), supported=lambda i: True)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop, parts))
    try:
        await wait_until(settled(parts, topic, 60), 60, "all records consumed")
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    stats = judge_server.stats.snapshot()
    assert 0 < stats.prompt_tokens + stats.completion_tokens <= budget
    scored = value(parts, "rag_monitor_records_scored_total")
    skipped = value(parts, "rag_monitor_records_skipped_total", reason="budget")
    # about 600 tokens a record here, so about 19 fit. Records started together once
    # shared the window out and most were cut short after spending part of it (3-15
    # scored, once none); now the first is scored alone and the rest while it pays
    assert scored >= 12 and skipped > 0
    assert scored + skipped == value(parts, "rag_monitor_records_sampled_total")
    assert value(parts, "rag_monitor_token_budget_remaining") < budget
    assert value(parts, "rag_monitor_sample_rate") < 1.0  # the adaptive rate backed off


async def test_two_monitors_in_one_group_split_partitions_and_score_each_record_once(
    broker: Broker, topic: Topic, recording_judge: RecordingJudge
) -> None:
    n, rate = 120, 0.5
    settings: list[Settings] = [
        monitor_settings(broker, topic, recording_judge, sample_rate=rate) for _ in range(2)
    ]
    parts = [build(s) for s in settings]
    stop = asyncio.Event()
    tasks = [asyncio.create_task(serve(s, stop, p)) for s, p in zip(settings, parts, strict=True)]
    try:
        await wait_until(
            lambda: (
                all(p.source.assignment for p in parts)
                and sum(len(p.source.assignment) for p in parts) == topic.partitions
            ),
            60,
            "both monitors to get partitions",
        )
        await records(topic, range(n), supported=lambda i: True)

        def done() -> bool:
            consumed = sum(
                value(p, "rag_monitor_records_consumed_total", topic=topic.name) for p in parts
            )
            return consumed >= n and all(p.source.in_flight == 0 for p in parts)

        await wait_until(done, 60, "both monitors to consume everything")
    finally:
        stop.set()
        for task in tasks:
            assert await asyncio.wait_for(task, 30) == 0
    expected = expected_sample(n, rate)
    skipped = [value(p, "rag_monitor_records_skipped_total", reason=r) for p in parts
               for r in ("connection", "timeout", "server_error", "invalid_output")]  # fmt: skip
    assert sum(skipped) == 0
    assert set(recording_judge.scored) == expected
    assert set(recording_judge.scored.values()) == {1}
    per_monitor = [value(p, "rag_monitor_records_scored_total") for p in parts]
    assert all(v > 0 for v in per_monitor) and sum(per_monitor) == len(expected)


async def test_kafka_going_away_is_retried_logged_and_reported_by_readyz(
    judge_server: JudgeServer,
) -> None:
    own = await asyncio.to_thread(require_broker().start)
    try:
        topic = Topic(own.bootstrap_servers, "away-in", "away-dlq", "away-group", 4)
        await asyncio.to_thread(own.create_topics, {topic.name: 4, topic.dlq: 1})
        settings = monitor_settings(own, topic, judge_server)
        parts = build(settings)
        source = parts.source
        assert isinstance(source, KafkaSource)  # JSON records: no trace assembly
        stop = asyncio.Event()
        with captured_logs() as logs:
            task = asyncio.create_task(serve(settings, stop, parts))
            try:
                await wait_until(lambda: bool(parts.source.assignment), 60, "partitions")
                ready, body = await asyncio.to_thread(scrape, parts.server.port, "/readyz")
                assert ready == 200 and json.loads(body)["checks"]["kafka"] is True
                await asyncio.to_thread(own.stop)
                await wait_until(lambda: not source.reachable, 30, "the outage noticed")
                ready, body = await asyncio.to_thread(scrape, parts.server.port, "/readyz")
                assert ready == 503 and json.loads(body)["checks"]["kafka"] is False
                said = [e for e in logs if e["event"] == "cannot reach Kafka: retrying"]
                assert said and said[0]["bootstrap_servers"] == own.bootstrap_servers
                assert said[0]["log_level"] == "warning" and said[0]["retry_in"] > 0
                await wait_until(
                    lambda: sum(e["event"] == "Kafka still away" for e in logs) >= 2,
                    30,
                    "a few retries, backing off",
                )
                delays = [e["retry_in"] for e in logs if e["event"] == "Kafka still away"]
                assert delays == sorted(delays) and len(delays) >= 2
                assert not task.done()  # still running, retrying
                await asyncio.to_thread(own.start)  # same port
                await wait_until(lambda: source.reachable, 60, "Kafka back")
                ready, body = await asyncio.to_thread(scrape, parts.server.port, "/readyz")
                assert json.loads(body)["checks"]["kafka"] is True
                assert any(e["event"] == "Kafka reachable again" for e in logs)
            finally:
                stop.set()
                assert await asyncio.wait_for(task, 60) == 0
    finally:
        await asyncio.to_thread(own.stop)


@pytest.mark.parametrize(("budget", "burst"), [("100m/h", 300), ("12000/h", 60)])
async def test_the_budget_thins_only_what_it_cannot_pay_for_and_counts_it(
    broker: Broker, topic: Topic, judge_server: JudgeServer, budget: str, burst: int
) -> None:
    settings = monitor_settings(broker, topic, judge_server, sample_rate=1.0, token_budget=budget)
    parts = build(settings)
    first = 5 if budget == "12000/h" else burst  # a first wave teaches the cost of a record
    await records(topic, range(first), supported=lambda i: True)

    stop = asyncio.Event()
    with captured_logs() as logs:
        task = asyncio.create_task(serve(settings, stop, parts))
        try:
            await wait_until(settled(parts, topic, first), 120, "the first wave consumed")
            await records(topic, range(first, burst), supported=lambda i: True)
            await wait_until(settled(parts, topic, burst), 120, "the burst consumed")
        finally:
            stop.set()
            assert await asyncio.wait_for(task, 30) == 0
    sampled = value(parts, "rag_monitor_records_sampled_total")
    thinned = value(parts, "rag_monitor_records_skipped_total", reason="budget_thinned")
    assert sampled + thinned == burst  # every record is either sampled or counted as thinned
    # each thinned record is also logged with its coordinates, as every skipped one is
    said = {(e["partition"], e["offset"]) for e in logs
            if e["event"] == "record skipped" and e["reason"] == "budget_thinned"}  # fmt: skip
    assert len(said) == thinned
    if budget == "100m/h":  # the window's bucket pays for the whole burst: nothing thinned
        assert thinned == 0
        assert value(parts, "rag_monitor_records_scored_total") == burst
    else:  # 60 records cost far more than 12000 tokens: the rate drops, and says so
        assert thinned > 0
        stats = judge_server.stats.snapshot()
        assert stats.prompt_tokens + stats.completion_tokens <= 12000


async def test_two_replicas_share_one_budget_and_a_survivor_takes_it_whole(
    broker: Broker, topic: Topic, judge_server: JudgeServer
) -> None:
    budget = 6000
    settings = [monitor_settings(broker, topic, judge_server, token_budget=f"{budget}/h")
                for _ in range(2)]  # fmt: skip
    parts = [build(s) for s in settings]
    stops = [asyncio.Event(), asyncio.Event()]
    tasks = [asyncio.create_task(serve(s, stop, p))
             for s, stop, p in zip(settings, stops, parts, strict=True)]  # fmt: skip

    def shares() -> list[float]:
        return [value(p, "rag_monitor_token_budget_share") for p in parts]

    def spent(p: Components) -> float:
        return sum(
            value(p, "rag_monitor_judge_tokens_total", metric=m, kind=k)
            for m in ("faithfulness", "response_relevancy", "context_utility")
            for k in ("prompt", "completion")
        )

    try:
        await wait_until(lambda: shares() == [0.5, 0.5], 60, "two partitions each")
        assert [p.budget.allowance for p in parts] == [budget / 2, budget / 2]
        # a slow judge: the whole burst is admitted before any record's cost is known, so
        # the sample rate stays 1 and the budget's hard limit is what stops the spending
        judge_server.latency_seconds = 0.3
        await records(topic, range(60), supported=lambda i: True)
        await wait_until(settled(parts, topic, 60), 90, "the 60 records")
        await wait_until(committed(topic, 60), 30, "the 60 records committed")
        stats = judge_server.stats.snapshot()
        scored = [value(p, "rag_monitor_records_scored_total") for p in parts]
        assert all(n > 0 for n in scored)
        assert all(value(p, "rag_monitor_records_skipped_total", reason="budget") > 0
                   for p in parts)  # fmt: skip  # each replica ran out of its share
        per_record = max(spent(p) / n for p, n in zip(parts, scored, strict=True))
        # the judge's own count: both replicas together within the one budget
        assert stats.prompt_tokens + stats.completion_tokens <= budget + 2 * per_record
        assert all(spent(p) <= budget / 2 + per_record for p in parts)

        stops[0].set()  # one replica stops: the other takes every partition, and the budget
        assert await asyncio.wait_for(tasks[0], 30) == 0
        await wait_until(lambda: shares()[1] == 1.0, 60, "the survivor's share")
        assert len(parts[1].source.assignment) == topic.partitions
        assert parts[1].budget.allowance == budget
        # what the replica that left had spent left with its partitions' ledger entries
        # (on every broker: the ledger topic, not the offset commits' metadata, which Tansu
        # drops): the survivor holds the whole budget less what both spent
        left = parts[1].budget.remaining()
        gone = spent(parts[0])
        assert left == pytest.approx(budget - gone - spent(parts[1]), abs=per_record)
    finally:
        judge_server.latency_seconds = 0.0
        await stop_all(stops, tasks)


async def test_a_replica_alone_before_the_other_joins_hands_its_spend_over(
    broker: Broker, topic: Topic, judge_server: JudgeServer
) -> None:
    """The first replica holds every partition (the whole budget) until the second joins.

    What it spent then goes with the partitions it gives up (their ledger entries), so the
    second replica does not spend its share again: both together stay within the one
    budget. The judge is slow, so records are in flight at the rebalance.
    """
    budget = 12000
    settings = [monitor_settings(broker, topic, judge_server, token_budget=f"{budget}/h",
                                 judge_concurrency=2) for _ in range(2)]  # fmt: skip
    parts = [build(s) for s in settings]
    stops = [asyncio.Event(), asyncio.Event()]
    tasks: list[asyncio.Task[int]] = []

    def billed() -> int:
        stats = judge_server.stats.snapshot()
        return stats.prompt_tokens + stats.completion_tokens + stats.embedding_tokens

    judge_server.latency_seconds = 0.3
    try:
        tasks.append(asyncio.create_task(serve(settings[0], stops[0], parts[0])))
        await wait_until(lambda: len(parts[0].source.assignment) == 4, 60, "every partition")
        # one burst, admitted whole before any record's cost is known (the sample rate
        # stays 1); two judge calls at a time, so few tokens are held by reservations and
        # the replica spends nearly all it holds
        sent = 64
        await records(topic, range(sent), supported=lambda i: True)
        await wait_until(settled(parts, topic, sent), 120, f"the first {sent} records")
        await wait_until(committed(topic, sent), 30, f"the first {sent} records committed")
        alone = billed()
        assert parts[0].budget.spent == alone  # settled at what the judge billed
        assert alone > 0.85 * budget  # far more than the half it holds once the other joins

        tasks.append(asyncio.create_task(serve(settings[1], stops[1], parts[1])))
        await wait_until(lambda: [p.budget.share for p in parts] == [0.5, 0.5], 60, "halves")
        # each half starts from what its partitions' ledger entries say was spent
        assert sum(p.budget.spent for p in parts) >= alone
        await records(topic, range(sent, sent + 100), supported=lambda i: True)
        await wait_until(settled(parts, topic, sent + 100), 120, "the next 100 records")
        assert value(parts[1], "rag_monitor_records_skipped_total", reason="budget") > 0
        assert billed() <= budget  # the judge's own count: one budget for both
    finally:
        judge_server.latency_seconds = 0.0
        await stop_all(stops, tasks)
