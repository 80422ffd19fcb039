"""Faults survived and load held: real `rag-monitor run` replicas under faults, one row each.

    python -m bench.faults [--scenarios kill,postgres,...] [--quick] [--rate 10]
                           [--soak-minutes 20] [--budget-fraction 0.6] [--json FILE]

Every scenario starts from nothing: a fresh Kafka-protocol broker (noida-db, or
Tansu where noida-db cannot carry the fault), a topic of 4 partitions with its
dead-letter and scores topics, a schema of its own on one embedded Postgres (the
run's), the test judge server (`tests.support.judge_server`, real HTTP) in this
process, and one or two ``python -m monitor run`` processes (sample rate 1,
scores topic and backlog on, a token budget per minute below what the traffic
would spend). A producer writes interactions at ``--rate`` records/s (a fifth of
them answered with an invented fact, so they are flagged and queued in the
backlog) for the warm-up, the fault and the recovery; then the bench waits until
the group's committed offsets reach the end of every partition, stops the
replicas (SIGTERM) and checks every record against what the sidecar wrote:

- **produced**: records in the topic (read back), malformed ones included;
- **scored**: distinct ids in the scores topic; **skipped**: records the
  replicas logged as ``record skipped``, by reason; **dlq**: dead-lettered keys;
- **lost**: records in the topic that are none of those (must be 0);
- **dup**: scores-topic messages beyond the first per id (at-least-once allows
  them) / backlog duplicates: ``Σ seen_count − distinct interactions`` (must be
  0); **miss**: flagged scores missing from the backlog (must be 0);
- **budget**: the judge server's tokens (prompt + completion, chat and
  embeddings) per clock minute of the requests' arrival ÷ the deployment's budget
  per minute, the worst minute (≤ 1.0 and one record's tokens, `over_budget`);
- **recovery**: seconds from the end of the fault until the group's lag (the
  producer's acknowledged offsets − the committed ones) is back under its
  highest level in the 10 s before the fault;
- **RSS / lag** per replica slot: peak RSS (VmHWM, the highest over the slot's
  processes) and the highest ``rag_monitor_consumer_lag`` total it reported.

Scenarios (``--scenarios``, comma list; ``all`` is the default, ``judge`` all
five judge faults): ``kill`` (SIGKILL one of two replicas, it stays down),
``restart`` (SIGKILL and restart one replica three times in a minute),
``zombie`` (SIGSTOP one replica past the session timeout, SIGCONT after its
partitions moved), ``broker`` (the broker stopped for 30 s, then restarted on
its data), ``postgres`` (Postgres down 30 s, later restarted mid-batch),
``judge-500``, ``judge-timeout``, ``judge-json``, ``judge-slow``,
``judge-down``, ``poison`` (oversized, invalid UTF-8, deeply nested, not JSON,
mixed in), ``soak`` (``--soak-minutes`` at the rate; RSS and open file
descriptors every minute), ``throughput`` (records/s consumed at sample rate 0
and at the default rate, one and two replicas, beside a bare aiokafka loop).

Bounded: every wait has a deadline, traffic goes to 127.0.0.1 only, and every
process the bench starts (replicas and brokers in process groups of their own,
Postgres by its postmaster) is stopped by its pid in ``finally`` blocks, also
on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import json
import os
import platform
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.errors import KafkaError

from bench.memory import proc_status
from monitor.kafka.client import MAX_REQUEST_BYTES
from monitor.kafka.topics import create_topics, produce
from tests.support.embedded import EmbeddedPostgres, broker_command, free_port
from tests.support.judge_server import Fault, JudgeServer, JudgeStats
from tests.support.kafka import ConsumedRecord, bare_consume, read_topic
from tests.support.records import encode, interaction, samples

ROOT = Path(__file__).resolve().parents[1]

PARTITIONS = 4
RUN = [sys.executable, "-m", "monitor", "run"]
JUDGE_LATENCY = 0.2
SCENARIOS = (
    "kill",
    "restart",
    "zombie",
    "broker",
    "postgres",
    "judge-500",
    "judge-timeout",
    "judge-json",
    "judge-slow",
    "judge-down",
    "poison",
    "soak",
    "throughput",
)
GROUPS = {"judge": ("judge-500", "judge-timeout", "judge-json", "judge-slow", "judge-down")}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- processes: every one registered, every one stopped by pid ------------------------------

_STARTED: list[subprocess.Popen[bytes]] = []


def spawn(argv: list[str], env: dict[str, str], logfile: Path) -> subprocess.Popen[bytes]:
    """``argv`` in a process group of its own (stopped with `stop_group`), output to ``logfile``."""
    with open(logfile, "ab") as out:
        process = subprocess.Popen(
            argv,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=ROOT,
            start_new_session=True,
        )
    _STARTED.append(process)
    return process


def stop_group(process: subprocess.Popen[bytes], grace: float = 15.0) -> None:
    """SIGTERM the process group (SIGCONT first: it may be stopped), SIGKILL after ``grace``."""
    if process.poll() is None:
        for sig in (signal.SIGCONT, signal.SIGTERM):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, sig)
        try:
            process.wait(grace)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(10)
    if process in _STARTED:
        _STARTED.remove(process)


def stop_all() -> None:
    for process in list(_STARTED):
        stop_group(process, grace=5.0)


def _interrupted(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_to_the_end(run: Coroutine[Any, Any, int], workdir: Path, *, clean: bool) -> int:
    """``run``'s exit code, 130 when Ctrl-C or SIGTERM cut it short; every process started
    is stopped either way, and with ``clean`` the logs' directory ``workdir`` removed."""
    signal.signal(signal.SIGTERM, _interrupted)
    try:
        return asyncio.run(run)
    except KeyboardInterrupt:
        log("interrupted: stopping everything started")
        return 130
    finally:
        stop_all()
        if clean:
            shutil.rmtree(workdir, ignore_errors=True)


# --- the broker: restartable on its data (noida-db, or Tansu on S3) ----------------------------


def wait_started(
    process: subprocess.Popen[bytes],
    answers: Callable[[], None],
    within: float,
    what: str,
    logfile: Path,
) -> None:
    """Until ``answers()`` stops raising OSError; RuntimeError once ``process`` has exited
    or ``within`` seconds have passed."""
    deadline = time.monotonic() + within
    while True:
        try:
            answers()
            return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start; see {logfile}") from None
            time.sleep(0.1)


class S3Store:
    """An S3-compatible server on 127.0.0.1 (moto's, real HTTP; the dev extra installs it)
    with one bucket, for Tansu's ``s3://`` storage engine: the log and the group's commits
    live in this process, so a restart of the broker keeps them, as it does with the S3 or
    Postgres a production Tansu stores in. It keeps the objects in its memory."""

    BUCKET = "tansu"

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.logfile = workdir / "s3.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def env(self) -> dict[str, str]:
        """What Tansu reads to reach it (the server takes any credentials)."""
        return {"AWS_ENDPOINT": self.url, "AWS_ALLOW_HTTP": "true",
                "AWS_DEFAULT_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench"}  # fmt: skip

    def start(self, within: float = 30.0) -> None:
        if importlib.util.find_spec("moto") is None:
            raise RuntimeError("tansu-s3 needs the moto S3 server: pip install -e '.[dev]'")
        argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(self.port)]
        self.process = spawn(argv, dict(os.environ), self.logfile)
        create = urllib.request.Request(f"{self.url}/{self.BUCKET}", method="PUT")

        def bucket() -> None:
            with urllib.request.urlopen(create, timeout=2):
                pass

        wait_started(self.process, bucket, within, "the S3 server", self.logfile)

    def stop(self) -> None:
        if self.process is not None:
            stop_group(self.process)
            self.process = None


class BenchBroker:
    """A noida-db or Tansu process; `restart` keeps the port and (noida-db, or Tansu on S3:
    kind ``tansu-s3``) the data."""

    def __init__(self, kind: str, workdir: Path) -> None:
        #: Tansu's log in an S3 server of its own (`S3Store`), not in the broker's memory
        self.s3 = S3Store(workdir) if kind == "tansu-s3" else None
        self.kind = "tansu" if self.s3 is not None else kind
        self.port = free_port()
        self.data = workdir / f"{kind}-data"
        self.data.mkdir(parents=True)
        self.logfile = workdir / f"{kind}.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def keeps_its_log(self) -> bool:
        """Whether a restart keeps the log (Tansu's memory storage does not)."""
        return self.kind != "tansu" or self.s3 is not None

    @property
    def session_timeout_ms(self) -> int:
        return 6000 if self.kind == "tansu" else 10000

    def start(self, within: float = 30.0) -> None:
        env = dict(os.environ)
        storage = "memory://tansu/"
        if self.s3 is not None:
            if self.s3.process is None:
                self.s3.start()
            env.update(self.s3.env())
            storage = f"s3://{self.s3.BUCKET}/"
        argv = broker_command(self.kind, self.port, self.data, tansu_storage=storage)
        self.process = spawn(argv, env, self.logfile)

        def listening() -> None:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                pass

        wait_started(self.process, listening, within, self.kind, self.logfile)

    def stop(self) -> None:
        """The broker only (a restart starts it again on what its storage kept)."""
        if self.process is not None:
            stop_group(self.process)
            self.process = None

    def close(self) -> None:
        self.stop()
        if self.s3 is not None:
            self.s3.stop()


# --- the judge: the test server, counting tokens per clock minute ------------------------------


class TimedStats(JudgeStats):
    """`JudgeStats` that also sums the tokens answered per clock minute, each request's
    tokens in the minute it arrived: the budget window the replica reserved them in (the
    server's latency would otherwise push a request sent in a window's last moment, and
    its tokens, into the next window)."""

    def __init__(self) -> None:
        super().__init__()
        self.per_minute: Counter[int] = Counter()
        self._minute_lock = threading.Lock()
        #: the arrival time of the request this server thread is answering
        self._arrival = threading.local()

    def enter(self) -> None:
        self._arrival.at = time.time()
        super().enter()

    def _add(self, tokens: int) -> None:
        at = getattr(self._arrival, "at", None) or time.time()
        with self._minute_lock:
            self.per_minute[int(at // 60)] += tokens

    def answered(self, step: str, choices: int, prompt_tokens: int, completion_tokens: int) -> None:
        super().answered(step, choices, prompt_tokens, completion_tokens)
        self._add(prompt_tokens + completion_tokens)

    def embedding_request(self, texts: int, tokens: int) -> None:
        super().embedding_request(texts, tokens)
        self._add(tokens)


class ShareFaults:
    """Injects ``fault`` into about ``share`` of the judge's chat requests while running."""

    def __init__(self, judge: JudgeServer, fault: Fault, share: float, seconds: float = 30.0):
        self.judge, self.fault, self.share, self.seconds = judge, fault, share, seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        seen = self.judge.stats.snapshot().calls
        carry = 0.0
        while not self._stop.wait(0.2):
            calls = self.judge.stats.snapshot().calls
            carry += (calls - seen) * self.share
            seen = calls
            whole = int(carry)
            if whole and self.judge.pending_faults() < 50:
                self.judge.inject(self.fault, whole, seconds=self.seconds)
                carry -= whole

    def __enter__(self) -> ShareFaults:
        self.judge.inject(self.fault, 2, seconds=self.seconds)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self.judge.clear_faults()


# --- one replica: a `rag-monitor run` process, re-startable in its slot ---------------------------


def _fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


class Replica:
    """A replica slot: its environment, its current process, its peaks over every process."""

    def __init__(self, name: str, env: dict[str, str], workdir: Path) -> None:
        self.name = name
        self.port = free_port()
        self.env = {**env, "RAG_MONITOR_METRICS_PORT": str(self.port)}
        self.logfile = workdir / f"{name}.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.peak_rss_mb = 0
        self.peak_lag = 0.0
        self.starts = 0

    def start(self) -> None:
        self.process = spawn(RUN, self.env, self.logfile)
        self.starts += 1

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, sig: signal.Signals) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        self.sample()
        if self.process is not None:
            self.signal(signal.SIGKILL)
            self.process.wait(10)
            _STARTED.remove(self.process)
            self.process = None

    def stop(self) -> None:
        self.sample()
        if self.process is not None:
            stop_group(self.process, grace=20.0)
            self.process = None

    def metrics_text(self) -> str | None:
        if not self.alive:
            return None
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as r:
                text: str = r.read().decode()
                return text
        except OSError:
            return None

    def metric(self, name: str) -> float:
        text = self.metrics_text()
        return sum(samples(text, name).values()) if text else 0.0

    def sample(self) -> None:
        """Peak RSS from /proc, consumer lag from /metrics (when it answers)."""
        if self.process is None:
            return
        self.peak_rss_mb = max(self.peak_rss_mb, int(proc_status(self.process.pid).get("VmHWM", 0)))
        text = self.metrics_text()
        if text:
            self.peak_lag = max(
                self.peak_lag, sum(samples(text, "rag_monitor_consumer_lag").values())
            )

    def skipped(self) -> dict[tuple[int, int], str]:
        """(partition, offset) → reason of every ``record skipped`` line in the slot's log."""
        out: dict[tuple[int, int], str] = {}
        if not self.logfile.exists():
            return out
        for line in self.logfile.read_text(errors="replace").splitlines():
            if '"record skipped"' in line:
                with contextlib.suppress(ValueError, KeyError):
                    event = json.loads(line)
                    out[(event["partition"], event["offset"])] = event["reason"]
        return out


# --- the scenario's world -------------------------------------------------------------------------


@dataclass
class Options:
    rate: float
    quick: bool
    soak_minutes: float
    budget_fraction: float
    workdir: Path

    def seconds(self, full: float, quick: float) -> float:
        return quick if self.quick else full


def over_budget(row: Row) -> bool:
    """The worst minute spent more than the budget and one record's tokens.

    One record's tokens is the slack the budget's guarantee allows (docs/design.md, "The
    budget ledger"): spend a replica could not commit while the broker was away, and
    a call that settles in the next minute, are each about a record's tokens or less.
    """
    return row.budget > 1.0 + row.budget_record


@dataclass
class Row:
    scenario: str
    broker: str
    produced: int = 0
    scored: int = 0
    skipped: dict[str, int] = field(default_factory=dict)
    dlq: int = 0
    lost: int = 0
    dup_scores: int = 0
    dup_backlog: int = 0
    backlog_missing: int = 0
    budget: float = 0.0
    #: one record's tokens as a share of a minute's budget: how far over 1.0 `budget` may
    #: go (`over_budget`)
    budget_record: float = 0.0
    recovery: float | None = None
    replicas: list[tuple[str, int, float]] = field(default_factory=list)
    note: str = ""


def record(i: int, supported: bool) -> tuple[bytes, bytes]:
    """Record ``i`` (its own question, so the backlog keeps one row per flagged record)."""
    body = interaction(i, supported=supported, route="search")
    body["user_input"] = f"When do I need to attach a receipt for trip {i}?"
    return body["id"].encode(), encode(body)


def poison(i: int, max_bytes: int) -> tuple[bytes, bytes]:
    """Malformed record number ``i``: oversized, invalid UTF-8, deeply nested, or not JSON."""
    key = f"poison-{i}".encode()
    kind = i % 4
    if kind == 0:
        body = interaction(i)
        body["id"] = key.decode()
        body["response"] = "x" * (max_bytes + 1000)
        return key, encode(body)
    if kind == 1:
        return key, b'{"id": "' + key + b'", "user_input": "\xff\xfe bad", "response": "x"}'
    if kind == 2:
        return key, b'{"id": "' + key + b'", "metadata": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    return key, b"not json at all " + key


def _key(record: ConsumedRecord) -> str:
    return (record.key or b"").decode()


class Lab:
    """One scenario's broker, topics, judge, Postgres schema and replicas."""

    def __init__(self, name: str, kind: str, options: Options, pg: EmbeddedPostgres) -> None:
        self.name = name
        self.options = options
        self.workdir = options.workdir / name
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.broker = BenchBroker(kind, self.workdir)
        self.pg = pg
        self.schema = "s_" + name.replace("-", "_") + f"_{os.getpid()}"
        self.dsn = pg.dsn + ("&" if "?" in pg.dsn else "?") + f"search_path={self.schema}"
        self.topic, self.dlq, self.scores, self.group = "in", "dlq", "scores", "monitor"
        self.judge = JudgeServer()
        self.judge.stats = TimedStats()
        self.judge.latency_seconds = JUDGE_LATENCY
        self.replicas: list[Replica] = []
        self.max_record_bytes = 64 * 1024
        #: the producer's acknowledged end of each partition, and when the lag was measured
        self.ends: dict[int, int] = dict.fromkeys(range(PARTITIONS), 0)
        self.lag: list[tuple[float, int]] = []
        self.produced_valid = 0
        self.produced_poison = 0
        self.budget_per_minute = 0
        self.tokens_per_record = 0.0
        self.budget_spec = "0"
        self.started_minute = 0

    # -- set-up

    async def setup(self, tokens_per_record: float, budget: bool = True) -> None:
        self.tokens_per_record = tokens_per_record
        self.broker.start()
        await create_topics(
            self.broker.bootstrap,
            {self.topic: PARTITIONS, self.dlq: 1, self.scores: PARTITIONS},
            max_message_bytes=16 * 1024 * 1024,
        )
        conn = await asyncpg.connect(self.pg.dsn, timeout=10)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
            await conn.execute(f'CREATE SCHEMA "{self.schema}"')
        finally:
            await conn.close()
        env = self.env()
        result = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "monitor", "migrate"],
            env=env,
            capture_output=True,
            timeout=120,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
        )
        if result.returncode != 0:
            raise RuntimeError(f"migrate failed: {result.stderr.decode()[-2000:]}")
        if budget:
            demand = self.options.rate * 60 * tokens_per_record
            self.budget_per_minute = int(demand * self.options.budget_fraction)
            self.budget_spec = f"{self.budget_per_minute}/m"
        self.judge.start()
        self.started_minute = int(time.time() // 60)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
        env.update(
            {
                "PYTHONPATH": str(ROOT),
                "RAG_MONITOR_KAFKA_BOOTSTRAP_SERVERS": self.broker.bootstrap,
                "RAG_MONITOR_KAFKA_TOPIC": self.topic,
                "RAG_MONITOR_KAFKA_DLQ_TOPIC": self.dlq,
                "RAG_MONITOR_KAFKA_GROUP_ID": self.group,
                "RAG_MONITOR_KAFKA_SESSION_TIMEOUT_MS": str(self.broker.session_timeout_ms),
                "RAG_MONITOR_KAFKA_HEARTBEAT_INTERVAL_MS": "1000",
                "RAG_MONITOR_SCORES_TOPIC": self.scores,
                "RAG_MONITOR_PG_DSN": self.dsn,
                "RAG_MONITOR_JUDGE_TIMEOUT_SECONDS": "5",
                "RAG_MONITOR_METRICS_HOST": "127.0.0.1",
                "RAG_MONITOR_TOKEN_BUDGET": self.budget_spec,
                "RAG_MONITOR_SAMPLE_RATE": "1.0",
                "RAG_MONITOR_MAX_RECORD_BYTES": str(self.max_record_bytes),
                "RAG_MONITOR_SHUTDOWN_GRACE_SECONDS": "10",
                "RAG_MONITOR_LOG_LEVEL": "debug",
            }
        )
        if self.judge._port:  # a key without a base URL is refused (migrate runs before)
            env["RAG_MONITOR_JUDGE_BASE_URL"] = self.judge.base_url
            env["RAG_MONITOR_JUDGE_API_KEY"] = "bench-key"
        env.update(extra)
        return env

    def add_replica(self, **extra: str) -> Replica:
        replica = Replica(f"r{len(self.replicas)}", self.env(**extra), self.workdir)
        self.replicas.append(replica)
        replica.start()
        return replica

    async def wait_ready(self, within: float = 90.0) -> None:
        """Every live replica has consumed (the group is formed and fetching)."""
        deadline = time.monotonic() + within
        while True:
            live = [r for r in self.replicas if r.alive]
            counts = await asyncio.gather(
                *(asyncio.to_thread(r.metric, "rag_monitor_records_consumed_total") for r in live)
            )
            if live and all(c > 0 for c in counts):
                return
            for r in self.replicas:
                if r.process is not None and r.process.poll() is not None:
                    raise RuntimeError(f"{r.name} exited; see {r.logfile}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"replicas not consuming after {within} s; see {self.workdir}")
            await asyncio.sleep(0.5)

    # -- traffic and measurement

    async def produce(self, until: asyncio.Event, seconds: float, poison_every: int = 0) -> None:
        """``rate`` records/s until ``until`` is set (``seconds`` at most); one in
        ``poison_every`` malformed (0: none).

        A send that fails (the broker is away) is retried until the deadline; the records
        in the topic are read back at the end, so a retried one written twice is counted.
        """
        producer = AIOKafkaProducer(
            bootstrap_servers=self.broker.bootstrap,
            acks="all",
            max_request_size=MAX_REQUEST_BYTES,
            request_timeout_ms=5000,
            retry_backoff_ms=200,
        )
        await producer.start()
        rng = random.Random(len(self.name))
        count = int(seconds * self.options.rate)
        started = time.monotonic()
        deadline = started + seconds + 120
        try:
            for i in range(count):
                if until.is_set():
                    break
                await asyncio.sleep(max(0.0, started + i / self.options.rate - time.monotonic()))
                if poison_every and i % poison_every == poison_every - 1:
                    key, value = poison(self.produced_poison, self.max_record_bytes)
                    self.produced_poison += 1
                else:
                    key, value = record(self.produced_valid, supported=rng.random() >= 0.2)
                    self.produced_valid += 1
                while True:
                    try:
                        meta = await producer.send_and_wait(self.topic, value=value, key=key)
                        self.ends[meta.partition] = max(self.ends[meta.partition], meta.offset + 1)
                        break
                    except KafkaError as exc:
                        if time.monotonic() > deadline:
                            raise RuntimeError(f"producer gave up: {exc!r}") from exc
                        await asyncio.sleep(0.5)
        finally:
            await producer.stop()

    async def watch(self, stop: asyncio.Event) -> None:
        """Every second: the group's lag (acknowledged ends − committed), replica peaks."""
        consumer: AIOKafkaConsumer | None = None
        partitions = [TopicPartition(self.topic, p) for p in range(PARTITIONS)]
        while not stop.is_set():
            try:
                if consumer is None:
                    consumer = AIOKafkaConsumer(
                        bootstrap_servers=self.broker.bootstrap,
                        group_id=self.group,
                        enable_auto_commit=False,
                        request_timeout_ms=3000,
                    )
                    await asyncio.wait_for(consumer.start(), 5)
                committed = [await asyncio.wait_for(consumer.committed(tp), 3) for tp in partitions]
                lag = sum(self.ends[p] - (c or 0) for p, c in enumerate(committed))
                self.lag.append((time.monotonic(), lag))
            except (KafkaError, TimeoutError, OSError):
                if consumer is not None:
                    with contextlib.suppress(Exception):
                        await asyncio.wait_for(consumer.stop(), 5)
                consumer = None
            await asyncio.gather(*(asyncio.to_thread(r.sample) for r in self.replicas))
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
        if consumer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(consumer.stop(), 5)

    def lag_now(self) -> int | None:
        return self.lag[-1][1] if self.lag else None

    async def caught_up(self, within: float) -> bool:
        """Wait until the committed offsets reach every acknowledged end (False at the deadline)."""
        deadline = time.monotonic() + within
        seen = len(self.lag)
        while time.monotonic() < deadline:
            if len(self.lag) > seen and self.lag[-1][1] == 0:
                return True
            await asyncio.sleep(1.0)
        return False

    def recovery(self, fault_start: float, fault_end: float) -> float | None:
        before = [lag for t, lag in self.lag if fault_start - 10 <= t <= fault_start]
        level = max(before, default=0)
        for t, lag in self.lag:
            if t >= fault_end and lag <= level:
                return t - fault_end
        return None

    # -- the end: read what was written, check every record

    async def read_all(
        self, topic: str, quiet: float = 4.0, within: float = 120.0
    ) -> list[ConsumedRecord]:
        """Every record of ``topic``: read until none has come for ``quiet`` seconds."""
        return await read_topic(
            self.broker.bootstrap, topic, within_seconds=within, quiet_seconds=quiet
        )

    async def check(self, row: Row) -> None:
        for replica in self.replicas:
            replica.stop()
        produced = await self.read_all(self.topic)
        scores = await self.read_all(self.scores)
        dead = await self.read_all(self.dlq)
        row.produced = len(produced)
        score_ids = Counter(_key(m) for m in scores)
        flagged = {_key(m) for m in scores if json.loads(m.value or b"{}").get("flags")}
        dead_keys = {_key(m) for m in dead if m.key is not None}
        skipped: dict[tuple[int, int], str] = {}
        for replica in self.replicas:
            skipped.update(replica.skipped())
        row.scored = len(score_ids)
        row.dup_scores = sum(score_ids.values()) - len(score_ids)
        row.dlq = len(dead_keys)
        reasons: Counter[str] = Counter()
        lost = []
        for m in produced:
            key = _key(m)
            if key in score_ids or key in dead_keys:
                continue
            reason = skipped.get((m.partition, m.offset))
            if reason is not None:
                reasons[reason] += 1
            else:
                lost.append((m.partition, m.offset, key))
        row.skipped = dict(reasons)
        row.lost = len(lost)
        if lost:
            (self.workdir / "lost.json").write_text(json.dumps(lost))
        rows = await self._fetch("SELECT interaction_id FROM backlog_interactions")
        queued = {r["interaction_id"] for r in rows}
        seen = await self._fetch("SELECT coalesce(sum(seen_count), 0) AS n FROM backlog")
        row.dup_backlog = int(seen[0]["n"]) - len(queued)
        row.backlog_missing = len(flagged - queued)
        if self.budget_per_minute:
            minutes = self.judge.stats.per_minute  # type: ignore[attr-defined]
            row.budget = max(minutes.values(), default=0) / self.budget_per_minute
            row.budget_record = self.tokens_per_record / self.budget_per_minute
        row.replicas = [(r.name, r.peak_rss_mb, r.peak_lag) for r in self.replicas]

    async def _fetch(self, sql: str) -> list[asyncpg.Record]:
        conn = await asyncpg.connect(self.dsn, timeout=10)
        try:
            rows: list[asyncpg.Record] = await conn.fetch(sql)
            return rows
        finally:
            await conn.close()

    async def close(self) -> None:
        for replica in self.replicas:
            with contextlib.suppress(Exception):
                replica.stop()
        self.judge.stop()
        self.broker.close()
        with contextlib.suppress(Exception):
            conn = await asyncpg.connect(self.pg.dsn, timeout=10)
            try:
                await conn.execute(f'DROP SCHEMA IF EXISTS "{self.schema}" CASCADE')
            finally:
                await conn.close()


# --- scenarios ---------------------------------------------------------------------------------

FaultFn = Callable[[Lab], Awaitable[str]]


async def run_fault_scenario(
    name: str,
    kind: str,
    options: Options,
    pg: EmbeddedPostgres,
    tokens_per_record: float,
    replicas: int,
    fault: FaultFn | None,
    *,
    fault_seconds: float,
    poison_every: int = 0,
    replica_env: Callable[[int], dict[str, str]] | None = None,
    budget: bool = True,
) -> Row:
    """Warm-up, ``fault`` (it returns a note), recovery; traffic throughout; then the check."""
    lab = Lab(name, kind, options, pg)
    row = Row(name, kind)
    stop = asyncio.Event()
    watcher: asyncio.Task[None] | None = None
    producer: asyncio.Task[None] | None = None
    try:
        await lab.setup(tokens_per_record, budget=budget)
        warm = options.seconds(30, 15)
        after = options.seconds(45, 25)
        enough = asyncio.Event()
        most = 300 + warm + fault_seconds + after
        producer = asyncio.create_task(lab.produce(enough, most, poison_every))
        if replica_env is None and kind == "noida":
            # noida-db never expires a dynamic member: one that a join race made rejoin
            # under a new id leaves its old one behind, and the group waits for it forever
            replica_env = static_member
        for i in range(replicas):  # one after the other, as a rollout starts them
            lab.add_replica(**(replica_env(i) if replica_env else {}))
            await asyncio.sleep(1.0)
            await lab.wait_ready()
        watcher = asyncio.create_task(lab.watch(stop))
        await asyncio.sleep(warm)
        started = time.monotonic()
        log(f"{name}: fault")
        row.note = await fault(lab) if fault is not None else ""
        ended = time.monotonic()
        log(f"{name}: fault over after {ended - started:.0f} s; lag {lab.lag_now()}")
        await asyncio.sleep(after)
        enough.set()
        await producer
        if not await lab.caught_up(within=options.seconds(240, 150)):
            row.note += f" NOT CAUGHT UP (lag {lab.lag_now()})"
        row.recovery = lab.recovery(started, ended)
        stop.set()
        await watcher
        await lab.check(row)
        if over_budget(row):
            row.note += "; OVER BUDGET (more than one record's tokens past it)"
        return row
    finally:
        stop.set()
        if producer is not None and not producer.done():
            producer.cancel()
        if watcher is not None and not watcher.done():
            watcher.cancel()
        await lab.close()


def static_member(i: int) -> dict[str, str]:
    return {"RAG_MONITOR_KAFKA_GROUP_INSTANCE_ID": f"bench-{i}"}


async def fault_kill(lab: Lab) -> str:
    lab.replicas[1].kill()
    return "r1 SIGKILLed, stays down"


async def fault_restart(lab: Lab) -> str:
    for _ in range(3):
        lab.replicas[1].kill()
        await asyncio.sleep(2)
        lab.replicas[1].start()
        await asyncio.sleep(18)
    return "r1 SIGKILLed and restarted 3x in 60 s (static member)"


async def fault_zombie(lab: Lab) -> str:
    replica = lab.replicas[1]
    replica.signal(signal.SIGSTOP)
    await asyncio.sleep(lab.broker.session_timeout_ms / 1000 + 12)
    replica.signal(signal.SIGCONT)
    return f"r1 SIGSTOPped {lab.broker.session_timeout_ms / 1000 + 12:.0f} s, then SIGCONT"


def fault_broker(down: float) -> FaultFn:
    async def fault(lab: Lab) -> str:
        lab.broker.stop()
        await asyncio.sleep(down)
        lab.broker.start()
        return f"broker stopped {down:.0f} s, restarted on its data"

    return fault


def fault_postgres(down: float) -> FaultFn:
    async def fault(lab: Lab) -> str:
        await asyncio.to_thread(lab.pg.stop)
        await asyncio.sleep(down)
        await asyncio.to_thread(lab.pg.start)
        await asyncio.sleep(10)
        await asyncio.to_thread(lab.pg.stop)
        await asyncio.to_thread(lab.pg.start)
        return f"Postgres down {down:.0f} s; 10 s later restarted at once"

    return fault


def fault_share(
    fault: Fault, share: float, seconds: float, note: str, slow: float = 0.0
) -> FaultFn:
    async def run(lab: Lab) -> str:
        with ShareFaults(lab.judge, fault, share, seconds=slow or 30.0):
            await asyncio.sleep(seconds)
        return note

    return run


def fault_slow(seconds: float) -> FaultFn:
    async def fault(lab: Lab) -> str:
        lab.judge.latency_seconds = JUDGE_LATENCY * 10
        await asyncio.sleep(seconds)
        lab.judge.latency_seconds = JUDGE_LATENCY
        return f"judge {JUDGE_LATENCY * 10:g} s per request (10x) for {seconds:.0f} s"

    return fault


def fault_judge_down(seconds: float) -> FaultFn:
    async def fault(lab: Lab) -> str:
        lab.judge.down("refuse")
        await asyncio.sleep(seconds)
        lab.judge.up()
        return f"judge refusing connections for {seconds:.0f} s"

    return fault


async def fault_poison(lab: Lab) -> str:
    return "1 in 25 malformed: oversized, invalid UTF-8, nested 100,000 deep, not JSON"


async def scenario(name: str, options: Options, pg: EmbeddedPostgres, tpr: float) -> Row:
    q = options.quick
    if name == "kill":
        return await run_fault_scenario(
            name, "tansu", options, pg, tpr, 2, fault_kill, fault_seconds=0
        )
    if name == "restart":
        return await run_fault_scenario(
            name, "noida", options, pg, tpr, 2, fault_restart, fault_seconds=60
        )
    if name == "zombie":
        return await run_fault_scenario(
            name, "tansu", options, pg, tpr, 2, fault_zombie, fault_seconds=18
        )
    if name == "broker":
        down = 15.0 if q else 30.0
        return await run_fault_scenario(
            name, "noida", options, pg, tpr, 2, fault_broker(down), fault_seconds=down
        )
    if name == "postgres":
        down = 15.0 if q else 30.0
        return await run_fault_scenario(
            name, "noida", options, pg, tpr, 2, fault_postgres(down), fault_seconds=down + 12
        )
    span = 20.0 if q else 60.0
    judge_faults: dict[str, FaultFn] = {
        "judge-500": fault_share(
            Fault.SERVER_ERROR, 0.3, span, f"30% of chat requests HTTP 500, {span:.0f} s"
        ),
        "judge-timeout": fault_share(
            Fault.SLOW,
            0.1,
            span,
            f"10% of chat requests past the 5 s timeout, {span:.0f} s",
            slow=8.0,
        ),
        "judge-json": fault_share(
            Fault.INVALID_JSON, 0.2, span, f"20% of chat replies not JSON, {span:.0f} s"
        ),
        "judge-slow": fault_slow(span),
        "judge-down": fault_judge_down(span),
    }
    if name in judge_faults:
        return await run_fault_scenario(
            name, "noida", options, pg, tpr, 2, judge_faults[name], fault_seconds=span
        )
    if name == "poison":
        return await run_fault_scenario(
            name, "noida", options, pg, tpr, 2, fault_poison, fault_seconds=0, poison_every=25
        )
    raise ValueError(name)


#: the soak's warm-up (the group formed, caches filled); RSS growth is counted after it
WARM_UP_SECONDS = 120.0


async def soak(options: Options, pg: EmbeddedPostgres, tpr: float) -> tuple[Row, list[str]]:
    minutes = options.soak_minutes
    every = 10.0 if options.quick else 60.0
    series: list[str] = []

    async def steady(lab: Lab) -> str:
        deadline = time.monotonic() + minutes * 60
        first: dict[str, tuple[int, int]] = {}
        warm: dict[str, int] = {}  # RSS once the start-up warm-up is over
        last: dict[str, tuple[int, int]] = {}
        warm_after = time.monotonic() + min(WARM_UP_SECONDS, minutes * 30)
        for _ in range(int(minutes * 60 / every) + 2):
            if time.monotonic() >= deadline:
                break
            cells = []
            for r in lab.replicas:
                pid = r.process.pid if r.process else 0
                now = (int(proc_status(pid).get("VmRSS", 0)), _fds(pid))
                first.setdefault(r.name, now)
                if time.monotonic() >= warm_after:
                    warm.setdefault(r.name, now[0])
                last[r.name] = now
                cells.append(f"{r.name} rss {now[0]} MB fds {now[1]}")
            series.append(f"{time.strftime('%H:%M:%S')} lag {lab.lag_now()}  " + ", ".join(cells))
            log("soak: " + series[-1])
            await asyncio.sleep(min(every, max(0.0, deadline - time.monotonic())))
        growth = "; ".join(
            f"{n} RSS {first[n][0]}→{last[n][0]} MB ({last[n][0] - warm.get(n, first[n][0]):+d} "
            f"after warm-up), fds {first[n][1]}→{last[n][1]}"
            for n in first
        )
        return f"{minutes:g} min steady; {growth}"

    row = await run_fault_scenario(
        "soak", "noida", options, pg, tpr, 2, steady, fault_seconds=minutes * 60
    )
    return row, series


# --- throughput: records/s consumed, the monitor beside a bare aiokafka loop --------------------


async def throughput(options: Options) -> list[str]:
    records = 20000 if options.quick else 60000
    workdir = options.workdir / "throughput"
    workdir.mkdir(parents=True, exist_ok=True)
    broker = BenchBroker("noida", workdir)
    judge = JudgeServer()
    lines = []
    try:
        broker.start()
        judge.start()
        await create_topics(broker.bootstrap, {"in": PARTITIONS, "dlq": 1})
        pairs = [record(i, supported=i % 5 != 0) for i in range(records)]
        await produce(broker.bootstrap, "in", pairs)
        bare = await bare_consume(broker.bootstrap, "in", "bare", records, within_seconds=300)
        lines.append(f"| bare aiokafka | 1 | - | {bare.rate:,.0f} | 1.00 |")
        for rate in ("0", "0.1"):
            for count in (1, 2):
                group = f"g-{rate}-{count}"
                env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
                env.update(
                    {
                        "PYTHONPATH": str(ROOT),
                        "RAG_MONITOR_KAFKA_BOOTSTRAP_SERVERS": broker.bootstrap,
                        "RAG_MONITOR_KAFKA_TOPIC": "in",
                        "RAG_MONITOR_KAFKA_DLQ_TOPIC": "dlq",
                        "RAG_MONITOR_KAFKA_GROUP_ID": group,
                        "RAG_MONITOR_KAFKA_HEARTBEAT_INTERVAL_MS": "1000",
                        "RAG_MONITOR_JUDGE_BASE_URL": judge.base_url,
                        "RAG_MONITOR_JUDGE_API_KEY": "bench-key",
                        "RAG_MONITOR_METRICS_HOST": "127.0.0.1",
                        "RAG_MONITOR_SAMPLE_RATE": rate,
                        "RAG_MONITOR_TOKEN_BUDGET": "0",
                        "RAG_MONITOR_LOG_LEVEL": "info",
                    }
                )
                slots = [Replica(f"{group}-r{i}", env, workdir) for i in range(count)]
                try:
                    for r in slots:
                        r.start()
                    first: float | None = None
                    deadline = time.monotonic() + 600
                    total = 0.0
                    while time.monotonic() < deadline:
                        counts = await asyncio.gather(
                            *(
                                asyncio.to_thread(r.metric, "rag_monitor_records_consumed_total")
                                for r in slots
                            )
                        )
                        total = sum(counts)
                        if first is None and total > 0:
                            first = time.monotonic()
                        if total >= records:
                            break
                        await asyncio.sleep(0.2)
                    seconds = time.monotonic() - (first or time.monotonic())
                    per_second = total / seconds if seconds > 0 else 0.0
                    for r in slots:
                        r.sample()
                    rss = "/".join(str(r.peak_rss_mb) for r in slots)
                    lines.append(
                        f"| monitor, sample rate {rate} | {count} | {rss} MB | "
                        f"{per_second:,.0f} | {per_second / bare.rate:.2f} |"
                    )
                    log(lines[-1])
                finally:
                    for r in slots:
                        r.stop()
        return lines
    finally:
        judge.stop()
        broker.stop()


# --- calibration, output, main ------------------------------------------------------------------


def tokens_per_record(workdir: Path) -> float:
    """What one record costs the judge: `rag-monitor score` over 20 records, its ``usage``."""
    with JudgeServer() as judge:
        path = workdir / "calibrate.jsonl"
        path.write_text(
            "".join(record(i, supported=i % 5 != 0)[1].decode() + "\n" for i in range(20))
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
        env.update(
            {
                "PYTHONPATH": str(ROOT),
                "RAG_MONITOR_JUDGE_BASE_URL": judge.base_url,
                "RAG_MONITOR_JUDGE_API_KEY": "bench-key",
            }
        )
        out = subprocess.run(
            [sys.executable, "-m", "monitor", "score", str(path)],
            env=env,
            capture_output=True,
            timeout=300,
            cwd=ROOT,
            check=True,
        )
        stats = judge.stats.snapshot()
    lines = [json.loads(line) for line in out.stdout.decode().splitlines() if line.strip()]
    embed = stats.embedding_tokens
    total: int = sum(
        line["usage"]["prompt_tokens"] + line["usage"]["completion_tokens"] for line in lines
    )
    return (total + embed) / max(1, len(lines))


HEADER = (
    "| scenario | broker | produced | scored | skipped (reason) | dlq | lost | dup scores/backlog "
    "| backlog miss | budget | recovery s | peak RSS MB, max lag per replica | note |"
)


def format_row(row: Row) -> str:
    skipped = ", ".join(f"{n} {r}" for r, n in sorted(row.skipped.items())) or "0"
    recovery = "-" if row.recovery is None else f"{row.recovery:.0f}"
    replicas = ", ".join(f"{n} {rss}/{lag:.0f}" for n, rss, lag in row.replicas)
    budget = f"{row.budget:.2f}" if row.budget else "-"
    return (
        f"| {row.scenario} | {row.broker} | {row.produced} | {row.scored} | {skipped} | "
        f"{row.dlq} | {row.lost} | {row.dup_scores}/{row.dup_backlog} | {row.backlog_missing} "
        f"| {budget} | {recovery} | {replicas} | {row.note.strip()} |"
    )


def machine() -> str:
    model = "unknown CPU"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    commit = (
        subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
        ).stdout.strip()
        or "unknown"
    )
    return f"commit {commit}, {model} ({os.cpu_count()} cores), Python {platform.python_version()}"


def selected(text: str) -> list[str]:
    out: list[str] = []
    for name in (n.strip() for n in text.split(",") if n.strip()):
        names = SCENARIOS if name == "all" else GROUPS.get(name, (name,))
        for n in names:
            if n not in SCENARIOS:
                raise SystemExit(
                    f"unknown scenario {n!r}; one of {', '.join(SCENARIOS)}, judge, all"
                )
            if n not in out:
                out.append(n)
    return out


async def main_async(args: argparse.Namespace, options: Options) -> int:
    names = selected(args.scenarios)
    rows: list[Row] = []
    extra: list[str] = []
    tpr = 0.0
    pg = EmbeddedPostgres()
    try:
        if any(n != "throughput" for n in names):
            await asyncio.to_thread(pg.start)
            tpr = await asyncio.to_thread(tokens_per_record, options.workdir)
            log(f"the judge spends {tpr:.0f} tokens per record")
        for name in names:
            log(f"scenario {name}")
            try:
                if name == "throughput":
                    extra += [
                        "",
                        "| consumer | replicas | peak RSS | records/s | × bare |",
                        "|---|---|---|---|---|",
                        *await throughput(options),
                    ]
                    continue
                if name == "soak":
                    row, series = await soak(options, pg, tpr)
                    extra += ["", "soak samples:", *series]
                else:
                    row = await scenario(name, options, pg, tpr)
            except Exception as exc:  # one scenario's failure is its row, not the run's end
                log(f"{name} failed: {exc!r}")
                row = Row(name, "-", note=f"FAILED: {exc!r}"[:300])
            rows.append(row)
            log(format_row(row))
    finally:
        stop_all()
        await asyncio.to_thread(pg.close)
    print(
        f"rag-monitor fault bench: {machine()}; rate {options.rate:g}/s, "
        f"budget {options.budget_fraction:g} of demand ({tpr:.0f} tokens/record)"
        f"{', --quick' if options.quick else ''}"
    )
    if rows:
        print(HEADER)
        print("|" + "---|" * 13)
        for row in rows:
            print(format_row(row))
    for line in extra:
        print(line)
    if args.json:
        text = json.dumps([row.__dict__ for row in rows], indent=2, default=str)
        await asyncio.to_thread(Path(args.json).write_text, text)
    bad = [
        r
        for r in rows
        if r.lost
        or r.dup_backlog
        or r.backlog_missing
        or over_budget(r)
        or "FAILED" in r.note
        or "NOT CAUGHT UP" in r.note
    ]
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scenarios", default="all", help="comma list; 'judge' = its 5, 'all'")
    parser.add_argument("--quick", action="store_true", help="shorter phases (a smoke run)")
    parser.add_argument("--rate", type=float, default=10.0, help="records/s produced")
    parser.add_argument("--soak-minutes", type=float, default=None, help="default 20 (quick: 2)")
    parser.add_argument(
        "--budget-fraction",
        type=float,
        default=0.6,
        help="the token budget per minute as a share of what the traffic needs",
    )
    parser.add_argument("--json", help="also write the rows to this file")
    parser.add_argument("--clean", action="store_true", help="remove the logs' directory after")
    args = parser.parse_args()
    soak_minutes = args.soak_minutes if args.soak_minutes is not None else (2 if args.quick else 20)
    workdir = Path(tempfile.mkdtemp(prefix="rag-monitor-faults-"))
    log(f"logs in {workdir}")
    options = Options(args.rate, args.quick, soak_minutes, args.budget_fraction, workdir)
    return run_to_the_end(main_async(args, options), workdir, clean=args.clean)


if __name__ == "__main__":
    sys.exit(main())
