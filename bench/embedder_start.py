"""MiniLM embedder start-up: time to the first vector, this tree against a baseline commit.

    python -m bench.embedder_start [--baseline ff08d59] [--rounds 9]

Each measurement is a fresh process that imports the embedder of one tree
(``--baseline``: that commit's whole ``monitor`` package, extracted with ``git
archive``; or this working tree's), builds ``MiniLMEmbedder(threads=1)`` with its
defaults, loads it (``warm_up``: the graph, the tokenizer, the word table, the
onnxruntime session) and embeds a few sentences. The two trees alternate, round
after round, and the medians are reported: the time to import the module, to
load, to the first vectors (from the import on), the first-vector time over the
baseline's of the same round, and the process's peak RSS.
The first vectors of both trees are compared (smallest cosine, largest
difference), on the same machine in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from bench.baseline import monitor_at

ROOT = Path(__file__).resolve().parents[1]

TEXTS = [
    "A man is eating a piece of bread.",
    "How do I reset my password?",
    "Steps to change your account password",
    "Byron provided over US$300,000 to the organization.",
    "The refund window is 30 days from delivery, excluding sale items.",
    "Pedro Rodríguez de la Vega won the race in 1968.",
]

#: run in a fresh process in the tree ``argv[1]`` (the working directory, first on ``sys.path``)
_CHILD = """
import json, resource, sys, time
start = time.perf_counter()
root = sys.argv[1]
import monitor
if not monitor.__file__.startswith(root):
    raise SystemExit(f"monitor imported from {monitor.__file__}, not {root}")
from monitor.judges.local.embedder import MiniLMEmbedder
imported = time.perf_counter()
embedder = MiniLMEmbedder(threads=1)
embedder.warm_up()
loaded = time.perf_counter()
vectors = embedder.embed(json.loads(sys.argv[2]))
done = time.perf_counter()
print(json.dumps({
    "import": imported - start,
    "load": loaded - imported,
    "first vectors": done - start,
    "peak RSS": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    "arithmetic": embedder.arithmetic,
    "vectors": vectors.tolist(),
}))
"""


def measure(tree: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tree), json.dumps(TEXTS)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tree,
    )
    if done.returncode != 0:
        raise SystemExit(f"embedder_start: {tree} failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace").split("\n"):
            if line.startswith("model name"):
                return line.partition(":")[2].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="ff08d59", help="commit measured alongside")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        monitor_at(args.baseline, Path(tmp))
        trees = {f"@{args.baseline}": Path(tmp), "working tree": ROOT}
        runs: dict[str, list[dict[str, Any]]] = {label: [] for label in trees}
        for tree in trees.values():
            measure(tree)  # warm-up: the files into the page cache
        for _ in range(args.rounds):
            for label, tree in trees.items():
                runs[label].append(measure(tree))
    print(
        f"\n## MiniLM embedder start-up ({cpu_name()}, {os.cpu_count()} cores, "
        f"median of {args.rounds} interleaved rounds, fresh processes)\n"
    )
    keys = ("import", "load", "first vectors")
    base = runs[f"@{args.baseline}"]
    print(
        "| tree | arithmetic | "
        + " | ".join(f"{k} (ms)" for k in keys)
        + " | first vectors × baseline | peak RSS (MiB) |"
    )
    print("|---|---|" + "---|" * (len(keys) + 2))
    for label, found in runs.items():
        times = " | ".join(f"{1000 * statistics.median(r[k] for r in found):.0f}" for k in keys)
        # each round's time over the baseline's of the same round: steadier on a shared machine
        ratio = statistics.median(
            r["first vectors"] / b["first vectors"] for r, b in zip(found, base, strict=True)
        )
        rss = statistics.median(r["peak RSS"] for r in found)
        print(f"| {label} | {found[0]['arithmetic']} | {times} | {ratio:.2f} | {rss:.0f} |")
    old, new = (np.array(runs[label][0]["vectors"], np.float32) for label in trees)
    print(
        f"\nfirst vectors, working tree vs @{args.baseline} ({len(TEXTS)} texts): smallest "
        f"cosine {float((old * new).sum(axis=1).min()):.6f}, largest |difference| "
        f"{float(np.abs(old - new).max()):.2e}"
    )


if __name__ == "__main__":
    main()
