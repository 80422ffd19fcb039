"""Where the sidecar's memory goes: RSS once started, and while it scores.

    python -m bench.memory [--broker noida|tansu] [--records 50000] [--partitions 4]
                           [--latency 0.3] [--embedding-latency S] [--concurrency 64]
                           [--window 20] [--diagnose]

1. **Once started.** A fresh interpreter goes through the start of
   ``rag-monitor run`` step by step (imports, `build`, the judge model's token
   encoding) and prints its VmRSS after each.
2. **Scoring.** Only the "score" phase of `bench/ingest.py`, with its own worker
   (``bench/ingest.py --worker score``: the monitor wired as ``rag-monitor run``
   wires it, sample rate 1, a judge answering after ``--latency`` seconds,
   embeddings after ``--embedding-latency``), watched from outside: VmRSS every
   50 ms from ``/proc/PID/status``, printed as a timeline with the samples around
   the peak, and VmHWM (the peak RSS the bench reports).

``--diagnose`` runs the same worker with a reporter beside it that prints, every
second, what the process holds: records in flight, asyncio tasks, the bytes the
Kafka client has buffered, entries of the judge cache (their deep size every 5 s).
It reads private attributes (of aiokafka too) and costs a little memory itself:
use it to see *what* grows, the plain run for *how much*. tracemalloc is no help
here: it slows the worker until its group session expires.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench.load import load_options

ROOT = Path(__file__).resolve().parents[1]


def proc_status(pid: int | str = "self") -> dict[str, float]:
    """VmRSS, VmHWM, RssAnon, RssFile of a process, in MB (empty once it is gone)."""
    out: dict[str, float] = {}
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return out
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
            out[key] = int(value.split()[0]) / 1024
    return out


# --- 1. once started (in a fresh interpreter) --------------------------------------------


def startup() -> None:
    """VmRSS after each start step of ``rag-monitor run`` with an LLM judge."""
    steps: list[tuple[str, float]] = [("interpreter", proc_status()["VmRSS"])]

    def step(name: str) -> None:
        steps.append((name, proc_status()["VmRSS"]))

    import monitor.config

    step("import monitor.config (pydantic, pydantic-settings, yaml)")
    import monitor.app

    step("import monitor.app (aiokafka, prometheus_client, numpy, ...)")
    settings = monitor.config.load_settings(
        judge_base_url="http://127.0.0.1:9/v1", judge_api_key="probe", metrics_port=0
    )
    monitor.app.build(settings)
    step("build(settings) (openai, aiohttp)")
    from monitor.tokens import count_tokens

    count_tokens("rag-monitor", settings.judge_model)
    step(f"token encoding of {settings.judge_model}")
    print(f"{'step':<72} {'RSS':>7} {'+':>7}")
    previous = steps[0][1]
    for name, rss in steps:
        print(f"{name:<72} {rss:6.0f}M {rss - previous:+6.0f}M")
        previous = rss
    heavy = [
        m
        for m in ("numpy", "onnxruntime", "tokenizers", "monitor.judges.local")
        if m in sys.modules
    ]
    print(f"modules loaded: {len(sys.modules)}; of note: {', '.join(heavy) or 'none'}")


# --- 2. the score worker, watched from outside ----------------------------------------------


def watch(command: list[str], env: dict[str, str], timeout: float) -> dict[str, Any]:
    """Run ``command``, sampling its VmRSS every 50 ms; its timeline, last status and stdout."""
    from bench.ingest import popen

    process = popen(command, env)
    started = time.monotonic()
    timeline: list[tuple[float, float]] = []
    last: dict[str, float] = {}
    try:
        while process.poll() is None and time.monotonic() - started < timeout:
            status = proc_status(process.pid)
            if status:
                last = status
                timeline.append((time.monotonic() - started, status["VmRSS"]))
            time.sleep(0.05)
    finally:
        if process.poll() is None:
            process.kill()
        out, err = process.communicate(timeout=30)
    if process.returncode != 0:
        raise RuntimeError(f"worker failed ({process.returncode}):\n{err[-3000:]}")
    return {"timeline": timeline, "last_status": last, "stdout": out}


def print_timeline(timeline: list[tuple[float, float]], every: float = 2.0) -> None:
    if not timeline:
        return
    at = max(range(len(timeline)), key=lambda i: timeline[i][1])
    peak_t, peak = timeline[at]
    print(f"RSS timeline (every {every:.0f} s; peak {peak:.0f} MB at {peak_t:.1f} s):")
    mark = 0.0
    for t, rss in timeline:
        if t >= mark:
            print(f"  {t:5.1f} s  {rss:6.0f} MB")
            mark = t + every
    near = timeline[max(0, at - 5) : at + 5]
    print("around the peak (50 ms apart):", " ".join(f"{r:.0f}" for _, r in near), "MB")


# --- --diagnose: what the worker holds while it scores ------------------------------------


def _deep_size(obj: object) -> int:
    """Bytes of ``obj`` and of everything it reaches through containers and ``__dict__``."""
    seen: set[int] = set()
    stack = [obj]
    total = 0
    while stack:
        item = stack.pop()
        if id(item) in seen or isinstance(item, type):
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            stack.extend(item)
        elif hasattr(item, "__dict__"):
            stack.append(vars(item))
    return total


async def diagnose(args: argparse.Namespace) -> None:
    """`ingest._monitor_score` as is, with a reporter beside it (``build`` wrapped to see parts)."""
    import monitor.app as app
    from bench import ingest

    built: list[Any] = []
    original = app.build

    def build(settings: Any) -> Any:
        built.append(original(settings))
        return built[-1]

    app.build = build
    started = time.monotonic()

    def report(deep: bool) -> None:
        parts = built[0]
        buffered = fetches = 0
        for result in parts.source._consumer._fetcher._records.values():
            records = getattr(getattr(result, "_partition_records", None), "_records", None)
            if records is not None:
                fetches += 1
                buffered += records.size_in_bytes()
        cache = parts.scorer._cache
        size = f" {_deep_size(list(cache.items())) / 1e6:.1f} MB" if deep else ""
        print(
            f"{time.monotonic() - started:5.1f} s  RSS {proc_status()['VmRSS']:4.0f} MB  "
            f"in flight {parts.source.in_flight:4d}  tasks {len(asyncio.all_tasks()):4d}  "
            f"buffered by the client {buffered / 1e6:5.1f} MB ({fetches} partitions)  "
            f"scored {ingest._total(parts.exporter.records_scored):5.0f}  "
            f"judge cache {len(cache)} entries{size}",
            flush=True,
        )
        if deep:
            counts = collections.Counter(type(o).__name__ for o in gc.get_objects())
            print("    objects:", ", ".join(f"{n} {c}" for n, c in counts.most_common(10)))

    async def reporter() -> None:
        tick = 0
        while True:
            await asyncio.sleep(1.0)
            if built and built[0].source._consumer is not None:
                tick += 1
                report(deep=tick % 5 == 0)

    task = asyncio.create_task(reporter())
    try:
        result = await ingest._monitor_score(args)
    finally:
        task.cancel()
    print(ingest.RESULT + json.dumps(result), flush=True)


def worker_parser() -> argparse.ArgumentParser:
    """The worker options `ingest._monitor_score` reads (as `bench/ingest.py` passes them)."""
    parser = argparse.ArgumentParser()
    for name in ("--bootstrap", "--topic", "--group", "--judge"):
        parser.add_argument(name)
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--session-timeout-ms", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--window", type=float, default=20.0)
    parser.add_argument("--rate", type=float, default=1.0)
    return parser


# --- the run --------------------------------------------------------------------------------


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    load_options(parser)
    parser.add_argument("--embedding-latency", type=float, default=None, help="default: --latency")
    parser.add_argument("--diagnose", action="store_true", help="print what the worker holds")
    parser.add_argument("--startup", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--diagnose-worker", action="store_true", help=argparse.SUPPRESS)
    args, rest = parser.parse_known_args()
    if args.startup:
        startup()
        return 0
    if args.diagnose_worker:
        asyncio.run(diagnose(worker_parser().parse_args(rest)))
        return 0

    from bench import ingest
    from monitor.kafka.topics import produce
    from tests.support.judge_server import JudgeServer
    from tests.support.kafka import LabBroker

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
    print("Once started, before any record (a fresh interpreter):\n", flush=True)
    subprocess.run(
        [sys.executable, "-m", "bench.memory", "--startup"], env=env, cwd=ROOT, check=True
    )

    broker = LabBroker(args.broker)
    judge = JudgeServer()
    try:
        broker.start()
        judge.start()
        topic = "interactions"
        broker.create_topics({topic: args.partitions, topic + "-dlq": 1})
        asyncio.run(produce(broker.bootstrap_servers, topic, ingest.generate(args.records)))
        judge.latency_seconds = args.latency
        judge.embedding_latency_seconds = args.embedding_latency
        worker = [
            "--bootstrap", broker.bootstrap_servers, "--topic", topic, "--group", "score-mem",
            "--judge", judge.base_url, "--records", str(args.records),
            "--session-timeout-ms", str(broker.session_timeout_ms),
            "--concurrency", str(args.concurrency), "--window", str(args.window), "--rate", "1",
        ]  # fmt: skip
        if args.diagnose:
            command = [sys.executable, "-m", "bench.memory", "--diagnose-worker", *worker]
        else:
            command = [sys.executable, "-m", "bench.ingest", "--worker", "score"]
            command += worker
        embeddings = args.latency if args.embedding_latency is None else args.embedding_latency
        print(
            f"\nScoring: broker {broker.kind}, {args.records} records on {args.partitions} "
            f"partitions, chat latency {args.latency * 1000:.0f} ms, embeddings "
            f"{embeddings * 1000:.0f} ms, concurrency {args.concurrency}, "
            f"{args.window:.0f} s window\n",
            flush=True,
        )
        watched = watch(command, env, timeout=args.window + 120)
    finally:
        judge.stop()
        broker.stop()
    for line in watched["stdout"].splitlines():
        if line.startswith(ingest.RESULT):
            print("worker:", line[len(ingest.RESULT) :])
        elif args.diagnose:
            print(line)
    print_timeline(watched["timeline"])
    status = watched["last_status"]
    print(
        f"VmHWM (peak RSS) {status.get('VmHWM', 0):.0f} MB; at the end RssAnon "
        f"{status.get('RssAnon', 0):.0f} MB, RssFile {status.get('RssFile', 0):.0f} MB"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
