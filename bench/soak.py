"""The sidecar at load for a long while, through kills and a broker restart: one row per interval.

    python -m bench.soak --rate 10000 --minutes 60 [--broker noida|tansu|tansu-s3] [--sample 0.01]
                         [--budget 200000/h] [--interval 300] [--kill-every 300]
                         [--restart-after 30] [--broker-down 15] [--no-faults]
                         [--retention MINUTES] [--start earliest|latest]
                         [--json FILE] [--clean]

A fresh Kafka-protocol broker (noida-db; Tansu with its log in its memory; or, with
``tansu-s3``, Tansu with its log in an S3 server of its own, moto's on 127.0.0.1) with a
topic of 4 partitions, its dead-letter and scores topics; a schema on an embedded
Postgres; the test judge server (`tests.support.judge_server`, real HTTP, 0.2 s per
request) behind the LLM path; two ``python -m monitor run`` replicas (static members)
with the production token budget (``--budget``, the sidecar's default) and
``RAG_MONITOR_BUDGET_FALLBACK=local``, so the records the budget cannot pay for are
scored by the local judge, at ``--sample``.

A producer on loopback writes interactions at ``--rate`` records/s (a fifth of them
answered with an invented fact, so they are flagged and queued in the backlog). Every
``--kill-every`` seconds one replica (r1, r0, r1, ...) is SIGKILLed and started again
``--restart-after`` seconds later; once, halfway between the two kills around the
middle, the broker is stopped for ``--broker-down`` seconds and restarted on its data
(not on ``tansu``: Tansu keeps that log in memory, so a restart would empty it). After
``--minutes`` the producer stops, the bench waits until the group has committed every
record, stops the replicas and prints one row per interval:

- **produced**: records the broker acknowledged in the interval;
- **consumed**: records the group committed past in the interval (Σ committed offsets;
  short of what was produced where the broker lost acknowledged records and gave their
  offsets again, which the summary line counts);
- **scored**: ``rag_monitor_records_scored_total`` of both replicas (each process's count
  added up; a killed process's last second is not counted);
- **lost**: records produced in the interval at or past the group's final committed
  offset of their partition, once the bench has waited for it to catch up (must be 0);
- **backlog dup**: ``Σ seen_count − distinct interactions`` in the backlog at the end of
  the interval (must be 0);
- **lag**: the group's lag (acknowledged ends − committed) at the interval's end, and
  its highest in the interval;
- **RSS**: each replica's resident memory at the interval's end (MB), and its highest;
- **tokens**: the judge server's tokens (prompt + completion, chat and embeddings) in
  the budget window the interval ends in, each request's in the window it arrived in,
  ÷ the budget.

``--retention`` gives the interactions topic a retention (``retention.ms``), as a
production topic has, so a broker that holds its log in memory (noida-db) holds only
that much of it; records the broker deleted before the group committed past them are
counted and fail the run. ``--start`` sets ``RAG_MONITOR_KAFKA_START`` on the replicas
(where a partition with no committed offset is read from: after noida-db's restart, which
can lose the group's commits, ``earliest`` replays the log it kept).

Then each restart's recovery (seconds from the replica's or broker's start until the
lag is back under one minute of traffic; for the broker's also when it first answered,
since a broker that loads its log from disk answers nothing for a while), the partitions
the broker left to no replica or gave to both at the end (each replica's last assignment,
from its log: noida-db 0.2.3 computes a rejoining static member's assignment afresh
without rebalancing the other member, docs/operations.md), and the RSS drift (the last
15 minutes' mean against the first 15 after the warm-up, or the last interval against the
first after it on a shorter run).

Bounded: every wait has a deadline, traffic stays on 127.0.0.1, every process started
is stopped by its pid (`bench.faults.stop_all`), also on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType
from aiokafka.errors import KafkaError

from bench.faults import (
    PARTITIONS,
    Lab,
    Options,
    Replica,
    log,
    machine,
    record,
    run_to_the_end,
    static_member,
    stop_all,
    tokens_per_record,
)
from bench.memory import proc_status
from monitor.config import TokenBudgetSpec
from monitor.kafka.client import MAX_REQUEST_BYTES
from tests.support.embedded import EmbeddedPostgres
from tests.support.records import samples

#: RSS drift is counted after this (the group formed, the models loaded, caches filled)
WARM_UP_SECONDS = 300.0


@dataclass
class Interval:
    """One row: what happened from ``start`` to ``end`` (seconds since the soak began)."""

    start: float
    end: float
    produced: int = 0
    consumed: int = 0
    scored: int = 0
    lost: int = 0
    dup_backlog: int = 0
    lag_end: int = 0
    lag_max: int = 0
    rss_end: dict[str, int] = field(default_factory=dict)
    rss_max: dict[str, int] = field(default_factory=dict)
    tokens: float = 0.0
    events: list[str] = field(default_factory=list)


@dataclass
class Recovery:
    event: str
    at: float
    seconds: float | None = None
    #: a broker restart: seconds from its start until it first answered the watcher (a
    #: broker that loads its log answers nothing for a while); None for a replica's
    answered: float | None = None


def held_at_end(logfile: Path) -> set[int]:
    """The partitions a replica's latest process holds, as its log says (its assignments,
    revokes, a stall's let-go and its stop)."""
    held: set[int] = set()
    with contextlib.suppress(OSError):
        for line in logfile.read_text(errors="replace").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line of another process's output, not the sidecar's log
            event = entry.get("event") if isinstance(entry, dict) else None
            if event in ("kafka source started", "kafka source stopped"):
                held = set()
            elif event == "partitions assigned":
                held = set(entry.get("partitions", ()))  # the whole new assignment
            elif event == "partitions revoked" or event and event.startswith("stood still"):
                held -= set(entry.get("partitions", ()))
    return held


def misassigned(holdings: dict[str, set[int]]) -> tuple[list[int], list[int]]:
    """The partitions no replica holds, and those more than one holds."""
    counts = Counter(p for held in holdings.values() for p in held)
    return (
        [p for p in range(PARTITIONS) if counts[p] == 0],
        sorted(p for p, n in counts.items() if n > 1),
    )


class Soak:
    """The producer, the watcher and the faults of one soak on one `Lab`."""

    def __init__(self, lab: Lab, args: argparse.Namespace) -> None:
        self.lab = lab
        self.args = args
        self.rate: float = args.rate
        self.budget = TokenBudgetSpec.parse(args.budget)
        self.t0 = 0.0
        self.intervals: list[Interval] = []
        self.recoveries: list[Recovery] = []
        #: acknowledged end of each partition, and per (interval, partition) the offsets
        #: the broker acknowledged in it: (lowest, highest, count)
        self.ends: dict[int, int] = dict.fromkeys(range(PARTITIONS), 0)
        self.acked: dict[tuple[int, int], list[int]] = {}
        self.committed: dict[int, int] = dict.fromkeys(range(PARTITIONS), 0)
        self.lag: list[tuple[float, int]] = []
        #: per replica slot: pid → its last scored count
        self.scored_seen: dict[str, dict[int, float]] = {}
        self.scored_total = 0.0
        self.produced = 0
        self.rss_now: dict[str, int] = {}
        self.rss_peak: dict[str, int] = {}
        self.lag_peak = 0
        #: each replica's partitions at the end (its log), and records lost per partition
        self.holdings: dict[str, set[int]] = {}
        self.lost_by_partition: Counter[int] = Counter()
        #: whether the broker's process ended by itself (not stopped by the bench)
        self.broker_exited = False
        #: per partition, the most records the broker deleted (retention) before the
        #: group committed past them
        self.expired: dict[int, int] = dict.fromkeys(range(PARTITIONS), 0)
        self._expiry_checked = 0.0

    def now(self) -> float:
        return time.monotonic() - self.t0

    def interval_of(self, t: float) -> int:
        return int(t // self.args.interval)

    # -- traffic

    async def produce(self, stop: asyncio.Event) -> None:
        """``rate`` records/s until ``stop``: sends due every 10 ms, acknowledged in the
        background; a send the broker refused is sent again."""
        producer = AIOKafkaProducer(
            bootstrap_servers=self.lab.broker.bootstrap,
            acks="all",
            linger_ms=self.args.linger,
            max_request_size=MAX_REQUEST_BYTES,
            request_timeout_ms=5000,
            retry_backoff_ms=200,
        )
        await producer.start()
        rng = random.Random(7)
        retry: list[tuple[bytes, bytes]] = []
        pending: set[asyncio.Future[object]] = set()
        started = time.monotonic()
        sent = 0

        def acked(future: asyncio.Future[object], key: bytes, value: bytes) -> None:
            pending.discard(future)
            if future.cancelled() or future.exception() is not None:
                retry.append((key, value))
                return
            meta = future.result()
            partition, offset = meta.partition, meta.offset  # type: ignore[attr-defined]
            self.ends[partition] = max(self.ends[partition], offset + 1)
            cell = self.acked.setdefault((self.interval_of(self.now()), partition),
                                         [offset, offset, 0])  # fmt: skip
            cell[0], cell[1], cell[2] = min(cell[0], offset), max(cell[1], offset), cell[2] + 1
            self.produced += 1

        try:
            while not stop.is_set():
                due = int((time.monotonic() - started) * self.rate) - sent
                batch = retry[:due]
                del retry[: len(batch)]
                while len(batch) < due:
                    batch.append(record(self.lab.produced_valid, supported=rng.random() >= 0.2))
                    self.lab.produced_valid += 1
                for key, value in batch:
                    try:
                        future = await producer.send(self.lab.topic, value=value, key=key)
                    except KafkaError:
                        retry.append((key, value))
                        continue
                    pending.add(future)
                    future.add_done_callback(lambda f, k=key, v=value: acked(f, k, v))
                sent += len(batch)
                await asyncio.sleep(0.01)
            # the last sends, and what the broker refused, until acknowledged or the deadline
            # (a broker that is gone for good answers none of them)
            deadline = time.monotonic() + 120
            while (pending or retry) and time.monotonic() < deadline:
                for key, value in retry[:]:
                    retry.remove((key, value))
                    left = deadline - time.monotonic()
                    with contextlib.suppress(KafkaError, TimeoutError):
                        send = producer.send(self.lab.topic, value=value, key=key)
                        future = await asyncio.wait_for(send, max(0.1, left))
                        pending.add(future)
                        future.add_done_callback(lambda f, k=key, v=value: acked(f, k, v))
                await asyncio.sleep(0.2)
        finally:
            with contextlib.suppress(KafkaError, TimeoutError):
                await asyncio.wait_for(producer.stop(), 30)

    # -- measurement

    async def watch(self, stop: asyncio.Event) -> None:
        """Every second: the committed offsets and the lag, each replica's RSS and count."""
        consumer: AIOKafkaConsumer | None = None
        partitions = [TopicPartition(self.lab.topic, p) for p in range(PARTITIONS)]
        while not stop.is_set():
            try:
                if consumer is None:
                    consumer = AIOKafkaConsumer(
                        bootstrap_servers=self.lab.broker.bootstrap,
                        group_id=self.lab.group,
                        enable_auto_commit=False,
                        request_timeout_ms=3000,
                    )
                    await asyncio.wait_for(consumer.start(), 5)
                for tp in partitions:
                    at = await asyncio.wait_for(consumer.committed(tp), 3)
                    self.committed[tp.partition] = max(self.committed[tp.partition], at or 0)
                if self.args.retention and self.now() - self._expiry_checked >= 5.0:
                    self._expiry_checked = self.now()
                    first = await asyncio.wait_for(consumer.beginning_offsets(partitions), 3)
                    for tp, offset in first.items():
                        gone = offset - self.committed[tp.partition]
                        self.expired[tp.partition] = max(self.expired[tp.partition], gone)
                lag = sum(self.ends[p] - self.committed[p] for p in range(PARTITIONS))
                self.lag.append((self.now(), lag))
                self.lag_peak = max(self.lag_peak, lag)
            except (KafkaError, TimeoutError, OSError):
                if consumer is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(consumer.stop(), 5)
                consumer = None
            await asyncio.gather(*(asyncio.to_thread(self.sample, r) for r in self.lab.replicas))
            broker = self.lab.broker.process
            if broker is not None and broker.poll() is not None and not self.broker_exited:
                self.broker_exited = True
                self.event(f"the broker exited (code {broker.returncode}) at {self.now():.0f} s")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
        if consumer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.stop(), 5)

    def sample(self, replica: Replica) -> None:
        process = replica.process
        if process is None or process.poll() is not None:
            self.rss_now[replica.name] = 0
            return
        rss = int(proc_status(process.pid).get("VmRSS", 0))
        self.rss_now[replica.name] = rss
        self.rss_peak[replica.name] = max(self.rss_peak.get(replica.name, 0), rss)
        text = replica.metrics_text()
        if text:
            count = sum(samples(text, "rag_monitor_records_scored_total").values())
            seen = self.scored_seen.setdefault(replica.name, {})
            self.scored_total += count - seen.get(process.pid, 0.0)
            seen[process.pid] = count

    def tokens_in_window(self) -> float:
        """The judge's tokens in the current budget window ÷ the budget."""
        if self.budget.unlimited:
            return 0.0
        minutes: Counter[int] = self.lab.judge.stats.per_minute  # type: ignore[attr-defined]
        window = int(time.time() // self.budget.window_seconds)
        spent = sum(n for m, n in minutes.items()
                    if int(m * 60 // self.budget.window_seconds) == window)  # fmt: skip
        return spent / self.budget.tokens

    def worst_window(self) -> float:
        if self.budget.unlimited:
            return 0.0
        minutes: Counter[int] = self.lab.judge.stats.per_minute  # type: ignore[attr-defined]
        windows: Counter[int] = Counter()
        for m, n in minutes.items():
            windows[int(m * 60 // self.budget.window_seconds)] += n
        return max(windows.values(), default=0) / self.budget.tokens

    async def dup_backlog(self) -> int:
        with contextlib.suppress(OSError, asyncpg.PostgresError, TimeoutError):
            conn = await asyncpg.connect(self.lab.dsn, timeout=10)
            try:
                seen = await conn.fetchval("SELECT coalesce(sum(seen_count), 0) FROM backlog")
                distinct = await conn.fetchval("SELECT count(*) FROM backlog_interactions")
                return int(seen) - int(distinct)
            finally:
                await conn.close()
        return -1

    async def close_interval(self, start: float, consumed_before: int, scored_before: float,
                             produced_before: int) -> Interval:  # fmt: skip
        row = Interval(start, self.now())
        row.produced = self.produced - produced_before
        row.consumed = sum(self.committed.values()) - consumed_before
        row.scored = int(self.scored_total - scored_before)
        row.dup_backlog = await self.dup_backlog()
        row.lag_end = self.lag[-1][1] if self.lag else 0
        row.lag_max = self.lag_peak
        row.rss_end = dict(self.rss_now)
        row.rss_max = dict(self.rss_peak)
        row.tokens = self.tokens_in_window()
        self.lag_peak = row.lag_end
        self.rss_peak = dict(self.rss_now)
        return row

    # -- faults

    def event(self, text: str) -> None:
        log(f"soak: {text}")
        self.pending_events.append(text)

    async def faults(self, stop: asyncio.Event) -> None:
        """A replica killed every ``kill_every`` s and started ``restart_after`` s later;
        the broker restarted once, half an interval past the middle."""
        minutes = self.args.minutes * 60
        every = self.args.kill_every
        # halfway between the two kills around the middle
        broker_at = (minutes / 2 // every) * every + every / 2
        kills = [
            k * self.args.kill_every for k in range(1, int(minutes // self.args.kill_every) + 1)
        ]
        plan = [(t, "kill") for t in kills if t < minutes]
        if not self.lab.broker.keeps_its_log:
            self.event("no broker restart: Tansu keeps its log in memory, a restart empties it "
                       "(--broker tansu-s3 keeps it in an S3 server)")  # fmt: skip
        else:
            plan = sorted([*plan, (broker_at, "broker")])
        victim = 1
        for at, what in plan:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), max(0.0, at - self.now()))
            if stop.is_set():
                return
            if what == "kill":
                replica = self.lab.replicas[victim]
                replica.kill()
                self.event(f"{replica.name} SIGKILLed at {self.now():.0f} s")
                await asyncio.sleep(self.args.restart_after)
                replica.start()
                self.recoveries.append(Recovery(f"{replica.name} restarted", self.now()))
                self.event(f"{replica.name} started again at {self.now():.0f} s")
                victim = 1 - victim
            else:
                self.lab.broker.stop()
                self.event(f"broker stopped at {self.now():.0f} s")
                await asyncio.sleep(self.args.broker_down)
                self.lab.broker.start()
                self.recoveries.append(Recovery("broker restarted", self.now()))
                self.event(f"broker started again at {self.now():.0f} s")

    def settle_recoveries(self) -> None:
        """Each restart's seconds until the lag is under one minute of traffic, and for the
        broker's, until it first answered (the watcher's first lag after it)."""
        under = self.rate * 60
        for recovery in self.recoveries:
            if recovery.event.startswith("broker"):
                answers = (t for t, _ in self.lag if t >= recovery.at)
                first = next(answers, None)
                recovery.answered = None if first is None else round(first - recovery.at, 1)
            for t, lag in self.lag:
                if t >= recovery.at and lag < under:
                    recovery.seconds = round(t - recovery.at, 1)
                    break

    def count_lost(self) -> None:
        """Per interval: produced offsets at or past the final committed offset."""
        for (i, partition), (low, high, _) in self.acked.items():
            if i < len(self.intervals):
                past = max(0, high - max(low, self.committed[partition]) + 1)
                self.intervals[i].lost += past
                self.lost_by_partition[partition] += past

    # -- the run

    async def run(self) -> None:
        self.pending_events: list[str] = []
        stop = asyncio.Event()
        self.t0 = time.monotonic()
        producer = asyncio.create_task(self.produce(stop))
        watcher_stop = asyncio.Event()
        watcher = asyncio.create_task(self.watch(watcher_stop))
        faults = asyncio.create_task(self.faults(stop) if self.args.faults else stop.wait())
        try:
            end = self.args.minutes * 60
            start, consumed, scored, produced = 0.0, 0, 0.0, 0
            while self.now() < end:
                boundary = min(end, (self.interval_of(self.now()) + 1) * self.args.interval)
                await asyncio.sleep(max(0.0, boundary - self.now()))
                row = await self.close_interval(start, consumed, scored, produced)
                row.events, self.pending_events = self.pending_events, []
                self.intervals.append(row)
                log("soak: " + format_interval(row, self.budget))
                start, consumed = row.end, sum(self.committed.values())
                scored, produced = self.scored_total, self.produced
            stop.set()
            await faults
            await producer
            deadline = time.monotonic() + self.args.catch_up
            while time.monotonic() < deadline:
                if self.lag and self.lag[-1][1] == 0 and self.lag[-1][0] > end:
                    break
                await asyncio.sleep(1.0)
            self.holdings = {r.name: held_at_end(r.logfile) for r in self.lab.replicas if r.alive}
            self.tail = await self.close_interval(start, consumed, scored, produced)
            self.tail.events, self.pending_events = self.pending_events, []
        finally:
            stop.set()
            watcher_stop.set()
            for task in (producer, faults):
                if not task.done():
                    task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(watcher, 15)
        self.settle_recoveries()
        self.count_lost()


async def retain(lab: Lab, minutes: float) -> None:
    """Give the interactions topic a retention of ``minutes``, in segments of a tenth of it
    (a broker deletes whole segments: with one segment per partition, noida-db kept all)."""
    admin = AIOKafkaAdminClient(bootstrap_servers=lab.broker.bootstrap, request_timeout_ms=10_000)
    await admin.start()
    try:
        keep = int(minutes * 60_000)
        retention = {"retention.ms": str(keep), "segment.ms": str(max(1000, keep // 10))}
        answers = await admin.alter_configs(
            [ConfigResource(ConfigResourceType.TOPIC, lab.topic, retention)]
        )
        for answer in answers:  # a refusal comes back as an error code, not an exception
            for code, message, *_ in answer.resources:
                if code:
                    raise SystemExit(f"--retention: the broker refused it ({code}: {message})")
    finally:
        await admin.close()


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f}".removesuffix(".0")


def format_interval(row: Interval, budget: TokenBudgetSpec) -> str:
    rss = ", ".join(f"{n} {row.rss_end.get(n, 0)}/{row.rss_max.get(n, 0)}"
                    for n in sorted(row.rss_end))  # fmt: skip
    events = "; ".join(row.events)
    tokens = "-" if budget.unlimited else f"{row.tokens:.2f}"
    return (
        f"| {_minutes(row.start)}–{_minutes(row.end)} | {row.produced:,} | {row.consumed:,} | "
        f"{row.scored:,} | {row.lost} | {row.dup_backlog} | {row.lag_end:,}/{row.lag_max:,} | "
        f"{rss} | {tokens} | {events} |"
    )


HEADER = (
    "| minutes | produced | consumed | scored | lost | backlog dup | lag end/max | "
    "RSS MB end/max | tokens ÷ budget | events |"
)


def rss_drift(intervals: list[Interval], interval_seconds: float) -> dict[str, str]:
    """Per replica: the mean RSS at interval ends in the last 15 minutes against the first
    15 after the warm-up (the last interval against the first after it on a short run)."""
    warm = [r for r in intervals if r.start >= min(WARM_UP_SECONDS, intervals[-1].start)]
    span = max(1, int(900 // interval_seconds))
    out: dict[str, str] = {}
    if not warm:
        return out
    first, last = warm[:span], warm[-span:]
    for name in sorted(warm[0].rss_end):
        a = [r.rss_end.get(name, 0) for r in first if r.rss_end.get(name, 0)]
        b = [r.rss_end.get(name, 0) for r in last if r.rss_end.get(name, 0)]
        if a and b:
            before, after = sum(a) / len(a), sum(b) / len(b)
            out[name] = f"{before:.0f}→{after:.0f} MB ({(after - before) / before:+.1%})"
    return out


async def main_async(args: argparse.Namespace, workdir: Path) -> int:
    options = Options(args.rate, False, args.minutes, 1.0, workdir)
    pg = EmbeddedPostgres()
    lab: Lab | None = None
    try:
        await asyncio.to_thread(pg.start)
        tpr = await asyncio.to_thread(tokens_per_record, workdir)
        lab = Lab(f"soak-{args.broker}", args.broker, options, pg)
        await lab.setup(tpr, budget=False)
        lab.budget_spec = args.budget
        if args.retention:
            await retain(lab, args.retention)
        extra = {
            "RAG_MONITOR_SAMPLE_RATE": str(args.sample),
            "RAG_MONITOR_BUDGET_FALLBACK": "local",
            "RAG_MONITOR_LOG_LEVEL": "info",
            "RAG_MONITOR_KAFKA_START": args.start,
        }
        for i in range(2):
            lab.add_replica(**extra, **static_member(i))
            await asyncio.sleep(1.0)
        soak = Soak(lab, args)
        log(f"soak: {args.rate:g}/s for {args.minutes:g} min on {args.broker}; logs in {workdir}")
        await soak.run()
        for replica in lab.replicas:
            replica.stop()
    finally:
        stop_all()
        if lab is not None:
            await lab.close()
        await asyncio.to_thread(pg.close)
    rows = [*soak.intervals, soak.tail]
    kept = f"{args.retention:g} min retention" if args.retention else "no retention"
    print(
        f"rag-monitor soak: {machine()}; {args.broker}, {args.rate:g} records/s for "
        f"{args.minutes:g} min, sample {args.sample:g}, budget {args.budget} with the local "
        f"judge as fallback, {tpr:.0f} judge tokens per record, {kept}, "
        f"RAG_MONITOR_KAFKA_START={args.start}"
    )
    print(HEADER)
    print("|" + "---|" * 10)
    for row in soak.intervals:
        print(format_interval(row, soak.budget))
    print(format_interval(soak.tail, soak.budget).replace("| ", "| catch-up ", 1))
    produced = sum(r.produced for r in rows)
    # acknowledged sends the log does not hold at the end: offsets the broker gave again
    # after losing them (noida-db in its restart), never the sidecar's doing
    missing = max(0, produced - sum(soak.ends.values()))
    lost = sum(r.lost for r in rows)
    dup = max((r.dup_backlog for r in rows), default=0)
    worst = soak.worst_window()
    print()
    print(f"produced {produced:,}, lost {lost}, backlog duplicates {dup}, worst budget window "
          f"{worst:.2f}× the budget")  # fmt: skip
    expired = sum(soak.expired.values())
    if args.retention:
        print(f"deleted by the topic's retention before the group committed past them: "
              f"{expired:,}")  # fmt: skip
    if missing:
        print(f"acknowledged by the broker but not in its log at the end: {missing:,} "
              "(offsets given again after the broker lost them in its restart)")  # fmt: skip
    orphaned, shared = misassigned(soak.holdings)
    if orphaned or shared:
        held = ", ".join(f"{name} {sorted(parts)}" for name, parts in soak.holdings.items())
        print(f"the broker's assignment at the end: {held}; held by none {orphaned}, by two "
              f"{shared} (the broker's fault, not the sidecar's: docs/operations.md); lost per "
              f"partition {dict(sorted(soak.lost_by_partition.items()))}")  # fmt: skip
    for recovery in soak.recoveries:
        took = "not within the run" if recovery.seconds is None else f"{recovery.seconds:g} s"
        if recovery.answered is not None and recovery.seconds is not None:
            took += (f" (the broker answered after {recovery.answered:g} s: "
                     f"{recovery.seconds - recovery.answered:.1f} s after that)")  # fmt: skip
        print(f"recovery after {recovery.event} at {recovery.at:.0f} s: lag under one minute "
              f"of traffic ({args.rate * 60:,.0f}) after {took}")  # fmt: skip
    for name, text in rss_drift(soak.intervals, args.interval).items():
        print(f"RSS {name}: {text}")
    if args.json:
        await asyncio.to_thread(Path(args.json).write_text, json.dumps({
            "intervals": [asdict(r) for r in rows],
            "recoveries": [asdict(r) for r in soak.recoveries],
            "produced": produced, "lost": lost, "dup_backlog": dup, "budget": worst,
            "broker_missing": missing, "expired": expired,
            "holdings": {name: sorted(parts) for name, parts in soak.holdings.items()},
            "orphaned": orphaned, "shared": shared,
            "lost_by_partition": {str(p): n for p, n in sorted(soak.lost_by_partition.items())},
            "caught_up": bool(soak.lag and soak.lag[-1][1] == 0),
        }, indent=2))  # fmt: skip
    ok = lost == 0 and expired == 0 and dup == 0 and worst <= 1.0 + tpr / max(1, soak.budget.tokens)
    return 0 if ok and soak.lag and soak.lag[-1][1] == 0 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=10000.0, help="records/s produced")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument(
        "--broker",
        choices=("noida", "tansu", "tansu-s3"),
        default="noida",
        help="tansu-s3: Tansu with its log in an S3 server (moto's), so its restart keeps it",
    )
    parser.add_argument("--sample", type=float, default=0.01, help="RAG_MONITOR_SAMPLE_RATE")
    parser.add_argument(
        "--linger",
        type=int,
        default=5,
        help="the producer's linger.ms (how long it gathers a batch; a broker on S3 "
        "stores one object per batch)",
    )
    parser.add_argument("--budget", default="200000/h", help="RAG_MONITOR_TOKEN_BUDGET")
    parser.add_argument("--interval", type=float, default=300.0, help="seconds per row")
    parser.add_argument("--kill-every", type=float, default=300.0, help="seconds between kills")
    parser.add_argument("--restart-after", type=float, default=30.0)
    parser.add_argument("--broker-down", type=float, default=15.0)
    parser.add_argument(
        "--faults",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the kills and the broker restart (--no-faults: the rate alone, to find what holds)",
    )
    parser.add_argument(
        "--retention",
        type=float,
        default=0.0,
        help="minutes the interactions topic keeps (retention.ms; 0: everything; noida-db only)",
    )
    parser.add_argument(
        "--start",
        choices=("earliest", "latest"),
        default="earliest",
        help="RAG_MONITOR_KAFKA_START of the replicas",
    )
    parser.add_argument("--catch-up", type=float, default=300.0, help="the most to wait at the end")
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--clean", action="store_true", help="remove the logs' directory after")
    args = parser.parse_args()
    if args.retention and args.broker.startswith("tansu"):
        parser.error("--retention: Tansu does not apply a topic's retention.ms (its log stays)")
    workdir = Path(tempfile.mkdtemp(prefix="rag-monitor-soak-"))
    # the producer's and watcher's clients log every refused connection of the broker restart
    logging.getLogger("aiokafka").setLevel(logging.CRITICAL)
    return run_to_the_end(main_async(args, workdir), workdir, clean=args.clean)


if __name__ == "__main__":
    sys.exit(main())
