"""CPU the LLM judge client costs per scored record: this tree against an older commit, same run.

    python -m bench.judge_cpu [--baseline d83f760] [--records 400] [--concurrency 16]
                              [--rounds 3] [--latency 0]

The sidecar's scoring throughput is bound by its one event loop's CPU (see
docs/benchmarks.md, Sidecar ingest). This isolates the part the judge client
owns: `Scorer` + `OpenAIJudge` scoring the three online metrics of
``--records`` generated interactions (`bench/ingest.py`'s), ``--concurrency``
at a time, against the real judge server (`tests.support.judge_server`)
running in a process of its own. Each measurement is a fresh worker process
importing ``monitor`` either from this tree or from ``--baseline`` (the whole
package, extracted with ``git archive``; the LLM judge is ``monitor.judges.llm``
there, or ``monitor.judge`` before it moved), after 50 warm-up records; the
records are generated once, by this process, so a worker imports nothing but
its own tree. Rounds alternate the two trees. Printed: CPU milliseconds per
scored record (process CPU time of the worker, its event loop and the HTTP
client included) and records/s, medians over the rounds, and the ratio to the
baseline.
"""

from __future__ import annotations

import argparse
import importlib
import json
import multiprocessing as mp
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.baseline import monitor_at

ROOT = Path(__file__).resolve().parents[1]
RESULT = "BENCH-RESULT "


def _serve(port_queue: Any, latency: float) -> None:
    from tests.support.judge_server import JudgeServer

    server = JudgeServer().start()
    server.latency_seconds = latency
    port_queue.put(server.base_url)
    time.sleep(10**6)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


#: where the LLM judge is in a commit: now, and before it moved into monitor/judges
LLM_JUDGES = ("monitor.judges.llm", "monitor.judge")


def worker(url: str, data: str, concurrency: int, tree: str) -> dict[str, float]:
    """Runs in a fresh process whose ``monitor`` is the tree under test; ``data``: the
    records, one JSON value a line (50 warm-up records first)."""
    import asyncio

    from monitor.records import parse_record
    from monitor.scoring import ONLINE_METRICS, Scorer

    judge_module = next(
        name
        for name in LLM_JUDGES
        if Path(tree).joinpath(*name.split(".")).with_suffix(".py").is_file()
    )
    OpenAIJudge = importlib.import_module(judge_module).OpenAIJudge
    with open(data, "rb") as f:
        interactions = [parse_record(line.rstrip(b"\n")) for line in f]
    records = len(interactions) - 50

    async def run() -> dict[str, float]:
        judge = OpenAIJudge(base_url=url, model="gpt-4o-mini", concurrency=3 * concurrency)
        scorer = Scorer(judge, ONLINE_METRICS)
        slots = asyncio.Semaphore(concurrency)

        async def one(interaction: Any) -> Any:
            async with slots:
                return await scorer.score(interaction)

        try:
            await asyncio.gather(*(one(i) for i in interactions[:50]))  # connections, caches
            cpu, wall = _cpu(), time.perf_counter()
            scored = await asyncio.gather(*(one(i) for i in interactions[50:]))
            cpu, wall = _cpu() - cpu, time.perf_counter() - wall
        finally:
            await judge.aclose()
        failed = sum(1 for s in scored if s.error is not None)
        return {"cpu_ms": cpu / records * 1000, "rate": records / wall, "failed": failed}

    import monitor

    if not Path(monitor.__file__).is_relative_to(tree):
        raise RuntimeError(f"monitor imported from {monitor.__file__}, not {tree}")

    return asyncio.run(run())


def measure(tree: Path, url: str, data: Path, args: argparse.Namespace) -> dict[str, float]:
    code = (
        # `monitor` first, from the tree under test (the working directory, first on the
        # path): later imports find it in sys.modules; `bench` from this tree (PYTHONPATH)
        "import json, monitor; "
        "from bench.judge_cpu import worker; "
        f"print({RESULT!r} + json.dumps("
        f"worker({url!r}, {str(data)!r}, {args.concurrency}, {str(tree)!r})))"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tree, timeout=600
    )
    for line in done.stdout.splitlines():
        if line.startswith(RESULT):
            result: dict[str, float] = json.loads(line[len(RESULT) :])
            return result
    raise RuntimeError(f"worker failed ({done.returncode}):\n{done.stderr[-3000:]}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="d83f760", help="commit measured alongside")
    parser.add_argument("--records", type=int, default=400)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.0, help="judge answer delay, s")
    args = parser.parse_args()
    from bench.ingest import generate  # the bench's records, made by this tree

    queue: Any = mp.get_context("spawn").Queue()
    server = mp.get_context("spawn").Process(target=_serve, args=(queue, args.latency))
    server.daemon = True
    server.start()
    url = queue.get(timeout=60)
    runs: dict[str, list[dict[str, float]]] = {"baseline": [], "this tree": []}
    with tempfile.TemporaryDirectory() as tmp:
        monitor_at(args.baseline, Path(tmp))
        data = Path(tmp) / "records.jsonl"
        data.write_bytes(b"".join(v + b"\n" for _, v in generate(args.records + 50, seed=3)))
        trees = {"baseline": Path(tmp), "this tree": ROOT}
        try:
            for _ in range(args.rounds):
                for name, tree in trees.items():
                    runs[name].append(measure(tree, url, data, args))
        finally:
            server.kill()

    load = os.getloadavg()[0]
    print(
        f"\n{args.records} records × 3 online metrics, {args.concurrency} at a time, judge "
        f"latency {args.latency * 1000:.0f} ms; median of {args.rounds} alternating rounds; "
        f"load average at the end {load:.1f}\n"
    )
    print("| judge client | CPU ms per scored record | records/s | failed records |")
    print("|---|---:|---:|---:|")
    medians = {}
    for name, results in runs.items():
        label = f"monitor@{args.baseline}" if name == "baseline" else name
        cpu = statistics.median(r["cpu_ms"] for r in results)
        medians[name] = cpu
        rate = statistics.median(r["rate"] for r in results)
        failed = max(r["failed"] for r in results)
        print(f"| {label} | {cpu:.2f} | {rate:.0f} | {failed:.0f} |")
    ratio = medians["this tree"] / medians["baseline"]
    print(f"\nCPU per record, this tree / baseline: {ratio:.2f}×")
    return 0


if __name__ == "__main__":
    sys.exit(main())
