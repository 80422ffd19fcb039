"""Measure the sidecar's ingest: consume throughput against a bare loop, and scoring throughput.

    python -m bench.ingest [--broker noida|tansu] [--records 50000] [--partitions 4]
                           [--rounds 2] [--latency 0.3] [--concurrency 64] [--window 20]
                           [--embedding-latency 0.05] [--consume-only]

One broker (the embedded noida-db or Tansu), one topic of ``--records``
generated interactions (≈ 1.1 kB each, keyed ``rec-<i>``), one judge server
(`tests.support.judge_server`, real HTTP on 127.0.0.1) in this process.
Each measured consumer runs in its **own process** (this script re-run with
``--worker``), so neither the broker client of the producer nor the judge
server's threads share its interpreter, and its CPU time and peak RSS are its
own (``getrusage(RUSAGE_SELF)``).

1. **Consume.** ``--rounds`` times, in turn: `tests.support.kafka.bare_consume`
   (a plain aiokafka ``getmany`` loop, no work), and the monitor pipeline
   exactly as ``rag-monitor run`` wires it (`monitor.app.build` +
   ``serve``) at sample rate 1 % and at rate 0 (no scoring: the pipeline's own
   cost), the judge answering at once; each with a fresh consumer group over
   the whole topic. Rate = records / time from the partition assignment (the
   group join is outside the clock for both) to the last record. The monitor's
   "last record" is when its source has handed every record to the pipeline;
   backpressure (``max_in_flight``) keeps that within 256 records of finished
   work, and the worker then checks that every record is finished. Every
   record is validated before the sampler decides (a malformed record goes to
   the dead-letter topic whether sampled or not), so rate 0 is the cost of
   validation, sampling and bookkeeping; the table also gives validation alone,
   in this process, per record (`records.parse_record`, the pipeline's one
   path). ``--consume-only`` stops here.
2. **Score.** Twice: the judge answers every request after ``--latency``
   seconds; then chat requests after ``--latency`` and embeddings after
   ``--embedding-latency`` (an embeddings model answers faster than an LLM
   judge). The monitor at sample rate 1 scores ``--concurrency`` records at
   once (``score_concurrency``, as ``rag-monitor score --concurrency``), with
   ``judge_concurrency`` 4× that so the judge's own limit never binds, and an
   unlimited token budget, for ``--window`` seconds after its first scored
   record. Scored records/s over the window, CPU (process CPU seconds / wall
   seconds over the window), peak RSS of the process, judge requests per
   record, and the bound ``concurrency / (chat + embeddings latency)``: a
   record's critical path is the grounding request alongside the relevancy
   questions, then the questions' embeddings. While scoring, the judge server
   runs in ``--judge-processes`` processes sharing one port (``SO_REUSEPORT``):
   one Python server process answers only a few hundred requests/s, fewer
   than 150 records/s need.

Everything started is stopped at the end (workers by pid, the broker's process
group, the judge server's threads).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import resource
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.load import load_options
from tests.support.judge_server import JudgeServer
from tests.support.kafka import LabBroker

ROOT = Path(__file__).resolve().parents[1]

TARGET_RATIO = 0.7
TARGET_SCORED = 150.0
TARGET_RSS_MB = 250.0
RESULT = "BENCH-RESULT "

# --- records ------------------------------------------------------------------

PRODUCTS = ["Atlas", "Beacon", "Cobalt", "Delta", "Ember", "Fjord", "Garnet", "Harbor"]
NOUNS = [
    "quota",
    "retention window",
    "refund limit",
    "rate limit",
    "backup schedule",
    "approval threshold",
    "session timeout",
    "storage tier",
    "support plan",
    "audit log",
]
UNITS = ["days", "requests per minute", "dollars", "hours", "gigabytes", "users"]
TEAMS = ["finance", "platform", "data", "security", "support", "payments"]


def _sentence(rng: random.Random, product: str) -> str:
    noun = rng.choice(NOUNS)
    return (
        f"The {noun} of {product} for the {rng.choice(TEAMS)} team is "
        f"{rng.randint(2, 900)} {rng.choice(UNITS)} since release {rng.randint(1, 40)}."
    )


def generate(count: int, seed: int = 11) -> list[tuple[bytes, bytes]]:
    """``count`` (key, value) pairs: unique questions, three chunks, an answer (some invented)."""
    rng = random.Random(seed)
    out: list[tuple[bytes, bytes]] = []
    for i in range(count):
        product = f"{rng.choice(PRODUCTS)}-{i}"
        chunks = [" ".join(_sentence(rng, product) for _ in range(3)) for _ in range(3)]
        first = chunks[0].split(". ")[0].rstrip(".") + "."
        second = (
            chunks[1].split(". ")[1].rstrip(".") + "."
            if rng.random() < 0.7
            else _sentence(rng, product)
        )
        record = {
            "id": f"rec-{i}",
            "user_input": f"What is the {rng.choice(NOUNS)} of {product}?",
            "retrieved_contexts": chunks,
            "response": f"{first} {second}",
            "metadata": {"route": rng.choice(["search", "chat"]), "model": "rag-7b"},
        }
        out.append((f"rec-{i}".encode(), json.dumps(record).encode()))
    return out


# --- workers (one process each) -------------------------------------------------


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _rss_mb() -> float:
    """Resident set size now (VmRSS)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def validation_cost(pairs: list[tuple[bytes, bytes]], rounds: int = 15) -> dict[str, float]:
    """Best-of-``rounds`` CPU µs per record of each validation over ``pairs`` (process time:
    what the shared machine's other load does to the wall clock does not count)."""
    from monitor import records

    out: dict[str, float] = {}
    for name in ("parse_record",):
        check = getattr(records, name, None)
        if check is None:  # a tree from before the check (``--baseline`` style runs)
            out[name] = float("nan")
            continue
        best = float("inf")
        for _ in range(rounds):
            t = time.process_time()
            for key, value in pairs:
                check(value, key)
            best = min(best, time.process_time() - t)
        out[name] = best / len(pairs) * 1e6
    return out


def worker_bare(args: argparse.Namespace) -> dict[str, Any]:
    from tests.support.kafka import bare_consume

    cpu = _cpu()
    wall = time.perf_counter()
    run = asyncio.run(bare_consume(args.bootstrap, args.topic, args.group, args.records))
    return {
        "records": run.records,
        "seconds": run.seconds,
        "rate": run.rate,
        "cpu_seconds": _cpu() - cpu,
        "cpu_cores": (_cpu() - cpu) / (time.perf_counter() - wall),
        "peak_rss_mb": _peak_rss_mb(),
    }


def _settings(args: argparse.Namespace, **extra: Any) -> Any:
    from monitor.config import load_settings

    values: dict[str, Any] = {
        "kafka_bootstrap_servers": args.bootstrap,
        "kafka_topic": args.topic,
        "kafka_dlq_topic": args.topic + "-dlq",
        "kafka_group_id": args.group,
        "kafka_session_timeout_ms": args.session_timeout_ms,
        "kafka_heartbeat_interval_ms": 1000,
        "judge_base_url": args.judge,
        "judge_api_key": "bench",
        "judge_timeout_seconds": 30.0,
        "metrics_host": "127.0.0.1",
        "metrics_port": 0,
        "routes": ["search", "chat"],
        "token_budget": "0",
        "log_level": "warning",
    }
    values.update(extra)
    return load_settings(**values)


def _total(metric: Any) -> float:
    """The sum of a counter's samples (its own ``collect``, not the whole registry's)."""
    total: float = sum(
        s.value for family in metric.collect() for s in family.samples if s.name.endswith("_total")
    )
    return total


async def _monitor_consume(args: argparse.Namespace) -> dict[str, Any]:
    from monitor.app import build, serve
    from monitor.logging import configure_logging

    settings = _settings(args, sample_rate=args.rate)
    configure_logging(settings.log_level)
    parts = build(settings)
    stop = asyncio.Event()
    cpu, wall = _cpu(), time.perf_counter()
    task = asyncio.create_task(serve(settings, stop, parts))
    consumed = parts.exporter.records_consumed
    first = 0.0
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline and not task.done():
            await asyncio.sleep(0.002)
            if not first and parts.source.assignment:
                first = time.perf_counter()
            if _total(consumed) >= args.records:
                break
        last = time.perf_counter()
        got = _total(consumed)
        for _ in range(6000):  # the sampled ones still being scored, at most 60 s
            if not parts.source.in_flight:
                break
            await asyncio.sleep(0.01)
        finished = got - parts.source.in_flight
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
    return {
        "records": got,
        "seconds": last - first,
        "rate": got / (last - first),
        "finished": finished,
        "sampled": _total(parts.exporter.records_sampled),
        "scored": _total(parts.exporter.records_scored),
        "cpu_seconds": _cpu() - cpu,
        "cpu_cores": (_cpu() - cpu) / (time.perf_counter() - wall),
        "peak_rss_mb": _peak_rss_mb(),
    }


async def _monitor_score(args: argparse.Namespace) -> dict[str, Any]:
    from monitor.allocator import pin_mmap_threshold
    from monitor.app import build, serve
    from monitor.logging import configure_logging

    settings = _settings(
        args,
        sample_rate=1.0,
        # `--concurrency` records scored at once, as `rag-monitor score --concurrency`;
        # frugal: at most 3 judge requests in flight each, so the judge's own limit never binds
        score_concurrency=args.concurrency,
        judge_concurrency=4 * args.concurrency,
        shutdown_grace_seconds=1.0,
    )
    configure_logging(settings.log_level)
    pin_mmap_threshold()  # as `rag-monitor run` does
    parts = build(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop, parts))
    scored = parts.exporter.records_scored
    rss_at_start = 0.0
    try:
        while not parts.source.assignment:
            if task.done():
                raise RuntimeError("the monitor stopped before joining the group")
            await asyncio.sleep(0.01)
        rss_at_start = _rss_mb()  # started: imports, token counters, clients; no records yet
        while not _total(scored):
            if task.done():
                raise RuntimeError("the monitor stopped before scoring anything")
            await asyncio.sleep(0.01)
        s0, t0, c0 = _total(scored), time.perf_counter(), _cpu()
        await asyncio.sleep(args.window)
        s1, t1, c1 = _total(scored), time.perf_counter(), _cpu()
        skipped = _total(parts.exporter.records_skipped)
    finally:
        stop.set()
        await asyncio.wait_for(task, 60)
    return {
        "scored": s1 - s0,
        "seconds": t1 - t0,
        "rate": (s1 - s0) / (t1 - t0),
        "cpu_cores": (c1 - c0) / (t1 - t0),
        "peak_rss_mb": _peak_rss_mb(),
        "rss_at_start_mb": rss_at_start,
        "skipped": skipped,
        "scored_total": _total(scored),
    }


def worker_judge(args: argparse.Namespace) -> dict[str, Any]:
    """One more judge server process on the shared port, until SIGTERM: its requests and CPU."""
    server = JudgeServer(port=args.port, reuse_port=True).start()
    server.latency_seconds = args.latency
    server.embedding_latency_seconds = args.embedding_latency
    cpu, wall = _cpu(), time.perf_counter()
    print("READY", flush=True)
    signal.sigwait({signal.SIGTERM})
    stats = server.stats.snapshot()
    server.stop()
    return {
        "requests": stats.chat_requests + stats.embedding_requests,
        "cpu_cores": (_cpu() - cpu) / (time.perf_counter() - wall),
    }


def popen(command: list[str], env: dict[str, str]) -> subprocess.Popen[str]:
    """A worker process run from the repository root, its stdout and stderr piped."""
    pipe = subprocess.PIPE
    return subprocess.Popen(
        command, stdout=pipe, stderr=pipe, stdin=subprocess.DEVNULL, env=env, cwd=ROOT, text=True
    )


def start_judge(args: argparse.Namespace, port: int, embedding_latency: float) -> Any:
    """A `worker_judge` process, serving once it says so."""
    command = [
        sys.executable,
        "-m",
        "bench.ingest",
        "--worker",
        "judge",
        "--port",
        str(port),
        "--latency",
        str(args.latency),
        "--embedding-latency",
        str(embedding_latency),
    ]
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})  # inherited: sigwait gets it
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, cwd=ROOT, text=True
        )
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    assert process.stdout is not None
    if process.stdout.readline().strip() != "READY":
        process.kill()
        raise RuntimeError("a judge server process did not start")
    return process


def stop_judge(process: Any) -> dict[str, Any]:
    process.terminate()
    out, _ = process.communicate(timeout=30)
    for line in out.splitlines():
        if line.startswith(RESULT):
            result: dict[str, Any] = json.loads(line[len(RESULT) :])
            return result
    return {"requests": 0, "cpu_cores": 0.0}


def run_worker(args: argparse.Namespace) -> int:
    if args.worker == "judge":
        result = worker_judge(args)
    elif args.worker == "bare":
        result = worker_bare(args)
    elif args.worker == "consume":
        result = asyncio.run(_monitor_consume(args))
    else:
        result = asyncio.run(_monitor_score(args))
    print(RESULT + json.dumps(result), flush=True)
    return 0


# --- the run ----------------------------------------------------------------------


def spawn(
    kind: str,
    args: argparse.Namespace,
    broker: LabBroker,
    topic: str,
    group: str,
    judge: JudgeServer,
    rate: float = 0.01,
) -> dict[str, Any]:
    """Run one worker process to completion (killed by pid on a timeout); its result."""
    command = [
        sys.executable,
        "-m",
        "bench.ingest",
        "--worker",
        kind,
        "--bootstrap",
        broker.bootstrap_servers,
        "--topic",
        topic,
        "--group",
        group,
        "--judge",
        judge.base_url,
        "--records",
        str(args.records),
        "--session-timeout-ms",
        str(broker.session_timeout_ms),
        "--concurrency",
        str(args.concurrency),
        "--window",
        str(args.window),
        "--rate",
        str(rate),
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
    process = popen(command, env)
    cpu, wall = _cpu(), time.perf_counter()
    try:
        out, err = process.communicate(timeout=150)
    except subprocess.TimeoutExpired:
        process.kill()
        process.communicate()
        raise
    # this process is idle but for the judge server's threads: their CPU over the worker's life
    judge_cores = (_cpu() - cpu) / (time.perf_counter() - wall)
    for line in out.splitlines():
        if line.startswith(RESULT):
            result: dict[str, Any] = json.loads(line[len(RESULT) :])
            result["judge_cpu_cores"] = judge_cores
            return result
    raise RuntimeError(f"worker {kind} failed ({process.returncode}):\n{err[-3000:]}")


def parser() -> argparse.ArgumentParser:
    """The bench's options (`load_options`, the rounds, the score runs) and its workers'."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    load_options(parser)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--embedding-latency",
        type=float,
        default=0.05,
        help="a second score run with embeddings answering in this many seconds "
        "(the first: every request takes --latency)",
    )
    parser.add_argument(
        "--judge-processes",
        type=int,
        default=3,
        help="judge server processes sharing the port while scoring (one Python server "
        "answers only a few hundred requests/s)",
    )
    parser.add_argument(
        "--consume-only", action="store_true", help="the consume rounds only, no score runs"
    )
    parser.add_argument(
        "--worker", choices=["bare", "consume", "score", "judge"], help=argparse.SUPPRESS
    )
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--bootstrap", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    parser.add_argument("--group", help=argparse.SUPPRESS)
    parser.add_argument("--judge", help=argparse.SUPPRESS)
    parser.add_argument("--session-timeout-ms", type=int, default=10_000, help=argparse.SUPPRESS)
    parser.add_argument("--rate", type=float, default=0.01, help=argparse.SUPPRESS)
    return parser


#: one consume round: the bare loop's result, the monitor's at 1 %, the monitor's at rate 0
Round = tuple[dict[str, Any], dict[str, Any], dict[str, Any]]


@dataclass
class Measured:
    """What the bench measured: the consume rounds, the score runs (by embedding latency)
    and what validating a record costs in this process."""

    rounds: list[Round]
    scores: list[tuple[float, dict[str, Any]]]
    validation: dict[str, float]


def main() -> int:
    args = parser().parse_args()
    if args.worker:
        return run_worker(args)
    started = time.perf_counter()
    measured = measure(args)
    ratio = report_consume(measured)
    if args.consume_only:
        print(f"\ntotal {time.perf_counter() - started:.0f} s")
        return 0
    met = report_score(args, measured.scores, ratio)
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0 if met else 1


def measure(args: argparse.Namespace) -> Measured:
    """Produce the records once, consume them ``--rounds`` times three ways, then score them
    once per embedding latency (unless ``--consume-only``)."""
    from monitor.kafka.topics import produce

    broker = LabBroker(args.broker)
    judge = JudgeServer(reuse_port=True)
    try:
        broker.start()
        judge.start()
        topic = "interactions"
        broker.create_topics({topic: args.partitions, topic + "-dlq": 1})
        pairs = generate(args.records)
        size = statistics.mean(len(v) for _, v in pairs)
        validation = validation_cost(pairs[:5000])
        t = time.perf_counter()
        asyncio.run(produce(broker.bootstrap_servers, topic, pairs))
        produced = time.perf_counter() - t
        del pairs
        print(
            f"broker {broker.kind}, {args.records} records of {size:.0f} B on "
            f"{args.partitions} partitions (produced in {produced:.1f} s), "
            f"{os.cpu_count()} CPUs",
            flush=True,
        )
        rounds = [consume_round(args, broker, topic, judge, r) for r in range(args.rounds)]
        latencies = [] if args.consume_only else [args.latency, args.embedding_latency]
        judge.latency_seconds = args.latency
        scores = [
            (latency, score_run(args, broker, topic, judge, i, latency))
            for i, latency in enumerate(dict.fromkeys(latencies))
        ]
    finally:
        judge.stop()
        broker.stop()
    return Measured(rounds, scores, validation)


def consume_round(
    args: argparse.Namespace, broker: LabBroker, topic: str, judge: JudgeServer, r: int
) -> Round:
    """Round ``r``: the bare loop, the monitor at 1 % and at rate 0, each consuming it all."""
    bare = spawn("bare", args, broker, topic, f"bare-{r}", judge)
    mon = spawn("consume", args, broker, topic, f"monitor-{r}", judge)
    idle = spawn("consume", args, broker, topic, f"monitor-rate0-{r}", judge, rate=0.0)
    finished = min(bare["records"], mon["finished"], idle["finished"])
    if finished < args.records:
        raise RuntimeError(f"round {r}: not everything was consumed: {bare} {mon} {idle}")
    return bare, mon, idle


def score_run(
    args: argparse.Namespace,
    broker: LabBroker,
    topic: str,
    judge: JudgeServer,
    i: int,
    embedding_latency: float,
) -> dict[str, Any]:
    """Score run ``i``, with ``--judge-processes`` judge servers on one port, embeddings
    answering after ``embedding_latency``; the judge's requests and CPU added in."""
    judge.embedding_latency_seconds = embedding_latency
    judge.stats.reset()
    extra = [
        start_judge(args, judge.port, embedding_latency) for _ in range(args.judge_processes - 1)
    ]
    try:
        score = spawn("score", args, broker, topic, f"score-{i}", judge)
    finally:
        others = [stop_judge(p) for p in extra]
    stats = judge.stats.snapshot()
    score["judge_requests"] = (
        stats.chat_requests + stats.embedding_requests + sum(o["requests"] for o in others)
    )
    score["judge_cpu_cores"] += sum(o["cpu_cores"] for o in others)
    return score


def report_consume(measured: Measured) -> float:
    """The consume table, validation's cost and the CPU per record; the median ratio of the
    monitor's rate (at 1 %) to the bare loop's."""
    rounds, validation = measured.rounds, measured.validation
    print("\nConsume (records/s from the partition assignment to the last record; judge at once)\n")
    print(
        "| round | bare aiokafka loop | monitor, rate 1 % | ratio | monitor, rate 0 | ratio "
        "| monitor CPU (1 %) | judge server CPU (1 %) | monitor peak RSS (1 %) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r, (bare, mon, idle) in enumerate(rounds):
        print(
            f"| {r + 1} | {bare['rate']:,.0f} | {mon['rate']:,.0f} | "
            f"{mon['rate'] / bare['rate']:.2f}× | {idle['rate']:,.0f} | "
            f"{idle['rate'] / bare['rate']:.2f}× | {mon['cpu_cores']:.2f} cores | "
            f"{mon['judge_cpu_cores']:.2f} cores | {mon['peak_rss_mb']:.0f} MB |"
        )
    bare_rate = statistics.median(b["rate"] for b, _, _ in rounds)
    mon_rate = statistics.median(m["rate"] for _, m, _ in rounds)
    idle_rate = statistics.median(i["rate"] for _, _, i in rounds)
    ratio = float(mon_rate / bare_rate)
    print(
        f"| median | {bare_rate:,.0f} | {mon_rate:,.0f} | **{ratio:.2f}×** | {idle_rate:,.0f} "
        f"| {idle_rate / bare_rate:.2f}× | | | |"
    )
    last = rounds[-1][1]
    print(
        f"\n(monitor at 1 %: {last['sampled']:.0f} of {last['records']:.0f} records sampled "
        f"and {last['scored']:.0f} scored per round; every record finished)"
    )
    print(
        f"\nValidation alone, this process: parse_record {validation['parse_record']:.1f} µs "
        f"per record; the bare loop spends "
        f"{1e6 / bare_rate:.1f} µs per record, the monitor at rate 0 {1e6 / idle_rate:.1f} µs"
    )

    def cpu_us(i: int) -> float:
        per_record: list[float] = [r[i]["cpu_seconds"] / r[i]["records"] for r in rounds]
        return statistics.median(per_record) * 1e6

    print(
        "\nCPU per record (the consumer process's CPU seconds / records, start and group "
        f"join included; not slowed by other load as wall time is): bare loop {cpu_us(0):.1f} "
        f"µs, monitor at rate 0 {cpu_us(2):.1f} µs, at rate 1 % {cpu_us(1):.1f} µs"
    )
    return ratio


def report_score(
    args: argparse.Namespace, scores: list[tuple[float, dict[str, Any]]], ratio: float
) -> bool:
    """The score table and the targets; whether all were met (``ratio``: the consume one)."""
    print(
        f"\nScore (chat latency {args.latency * 1000:.0f} ms; {args.concurrency} records scored "
        f"at once (score_concurrency), judge_concurrency {4 * args.concurrency}; sample rate 1; "
        f"{args.window:.0f} s window)\n"
    )
    header = " | ".join(f"embeddings {e * 1000:.0f} ms" for e, _ in scores)
    print(f"| measure | {header} | target |")
    print("|---|" + "---:|" * len(scores) + "---:|")

    def row(name: str, cells: list[str], target: str = "") -> None:
        print(f"| {name} | {' | '.join(cells)} | {target} |")

    row("scored records/s", [f"**{s['rate']:.1f}**" for _, s in scores], f"≥ {TARGET_SCORED:.0f}")
    row("CPU (process CPU s / wall s)", [f"{s['cpu_cores']:.2f} cores" for _, s in scores])
    row(
        "CPU ms per scored record",
        [f"{s['cpu_cores'] / s['rate'] * 1000:.1f}" for _, s in scores],
    )
    row(
        "peak RSS",
        [f"**{s['peak_rss_mb']:.0f} MB**" for _, s in scores],
        f"< {TARGET_RSS_MB:.0f} MB",
    )
    row("RSS once started (no record yet)", [f"{s['rss_at_start_mb']:.0f} MB" for _, s in scores])
    row(
        f"judge server CPU ({args.judge_processes} processes, one port)",
        [f"{s['judge_cpu_cores']:.2f} cores" for _, s in scores],
    )
    per_record = [
        s["judge_requests"] / s["scored_total"] if s["scored_total"] else 0.0 for _, s in scores
    ]
    row("judge requests per record (chat + embeddings)", [f"{r:.2f}" for r in per_record])
    # a record's critical path: grounding ∥ (questions → embeddings of the questions)
    bounds = [args.concurrency / (args.latency + e) for e, _ in scores]
    row("bound: records at once / (chat + embeddings latency)", [f"{b:.0f}" for b in bounds])
    row("records skipped in the window", [f"{s['skipped']:.0f}" for _, s in scores], "0")
    score = max((s for _, s in scores), key=lambda s: s["peak_rss_mb"])
    scored_met = [s["rate"] >= TARGET_SCORED for _, s in scores]
    met = [ratio >= TARGET_RATIO, all(scored_met), score["peak_rss_mb"] < TARGET_RSS_MB]
    print(
        f"\ntargets: consume ratio ≥ {TARGET_RATIO} {'met' if met[0] else 'NOT met'}; "
        f"≥ {TARGET_SCORED:.0f} scored/s "
        + ", ".join(
            f"{'met' if m else 'NOT met'} (embeddings {e * 1000:.0f} ms)"
            for m, (e, _) in zip(scored_met, scores, strict=True)
        )
        + "; "
        f"RSS < {TARGET_RSS_MB:.0f} MB {'met' if met[2] else 'NOT met'}."
    )
    return all(met)


if __name__ == "__main__":
    sys.exit(main())
