"""The local judge's worked examples, and its speed beside the support model it replaced.

    python -m bench.local_judge [--baseline 09978da] [--records 64] [--skip-speed]

Its detection on the labelled sets, beside word overlap, is `bench.detection`'s
(``--detectors local,overlap``).

1. The lesson's worked example and the last round's four examples, as faithfulness
   (`LocalJudge.screen`, each answer read as the sidecar reads it).
2. Speed: the three online metrics through the Scorer (16 records in flight, as the
   sidecar scores them) on the realistic set's answers, and on RAG-sized records
   (each realistic answer with the other answers of its scenario, about 85 words,
   against its chunks plus chunks of other scenarios, about 400 words); records per
   CPU second and per wall second (models loaded, caches empty), and peak RSS, each judge in a
   process of its own: this tree's local judge and the support model of
   ``--baseline`` (its ``LearnedJudge``, extracted with ``git archive``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.baseline import ROOT, monitor_at
from bench.harness import REALISTIC, read_jsonl

REFUNDS = (
    "Cancel your subscription in Settings. Refunds are issued to the original card within "
    "5-7 business days."
)
#: (context, answer, the faithfulness it should get)
EXAMPLES = [
    (
        REFUNDS,
        "Cancel in Settings, then your refund posts to your original card in about a week.",
        1.0,
    ),
    (
        REFUNDS,
        "Cancel in Settings, refunds post in 5-7 days, and amounts over $500 need manager "
        "sign-off.",
        2 / 3,
    ),
    (
        "We accept credit cards and SEPA direct debit. Orders ship within two days. "
        "PayPal is not accepted.",
        "Sorry, we don't take PayPal. You can pay by credit card or by SEPA direct debit.",
        1.0,
    ),
    (
        "Local admin rights are not granted to employees. Software is installed by IT.",
        "You can ask for local admin rights.",
        0.0,
    ),
    (
        "Full-time employees are entitled to 25 days of paid annual leave.",
        "If you work full time you get twenty-five paid days off each year.",
        1.0,
    ),
    (
        "Full-time employees are entitled to 25 days of paid annual leave.",
        "If you work full time you get thirty paid days off each year.",
        0.0,
    ),
]


def examples() -> None:
    from monitor.judges.local.judge import LocalJudge

    judge = LocalJudge()
    print("| context | answer | should be | faithfulness | weakest claim's reason |")
    print("|---|---|---:|---:|---|")
    for context, answer, expected in EXAMPLES:
        screen = judge.screen([context], answer)
        print(
            f"| {context} | {answer} | {expected:.2f} | {screen.faithfulness:.2f} "
            f"| {screen.reason} |"
        )


# --- speed


def rag_sized(rows: list[dict[str, Any]], pool: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each realistic answer with its scenario's other answers (about 85 words), against its
    chunks and other scenarios' chunks (about 400 words): the median size of real RAG
    traffic, made from the set's own text."""
    by_scenario: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_scenario.setdefault(r["user_input"], []).append(r)
    chunks = list(dict.fromkeys(c for r in pool for c in r["retrieved_contexts"]))
    out = []
    for k, r in enumerate(rows):
        siblings = [s["response"] for s in by_scenario[r["user_input"]] if s is not r]
        answer = " ".join([r["response"], *siblings])
        answer = " ".join(answer.split()[:90])
        contexts = list(r["retrieved_contexts"])
        for step in range(1, len(chunks) + 1):  # every chunk once at most
            if sum(len(c.split()) for c in contexts) >= 400:
                break
            chunk = chunks[(k + 7 * step) % len(chunks)]
            if chunk not in contexts:
                contexts.append(chunk)
        out.append({**r, "response": answer, "retrieved_contexts": contexts})
    return out


_SPEED = r"""
import asyncio, json, os, resource, sys, time
from monitor.records import validate_record
from monitor.scoring import Scorer
kind, path = sys.argv[1], sys.argv[2]
if kind == "local":
    from monitor.judges.local.judge import LocalJudge as Judge
else:
    from monitor.judges.local.learned import LearnedJudge as Judge
rows = json.loads(open(path).read())
fields = ("id", "user_input", "retrieved_contexts", "response")
interactions = [validate_record({k: r[k] for k in fields}) for r in rows]
judge = Judge()
judge.support_model.warm_up()  # loaded at start, as the sidecar does: not timed
judge.embedder.warm_up()
scorer = Scorer(judge, ["faithfulness", "response_relevancy", "context_utility"])
async def run():
    gate = asyncio.Semaphore(16)
    async def one(i):
        async with gate:
            await scorer.score(i)
    await asyncio.gather(*(one(i) for i in interactions))
out = {}
cpu, wall = os.times(), time.perf_counter()
asyncio.run(run())
after = os.times()
out["cold"] = [len(interactions) / ((after.user - cpu.user) + (after.system - cpu.system)),
               len(interactions) / (time.perf_counter() - wall)]
out["rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def speed(baseline: str, records: int) -> None:
    every = read_jsonl(REALISTIC)
    rows = every[:records]
    sets = {"realistic answers": rows, "RAG-sized (~400 / ~85 words)": rag_sized(rows, every)}
    print(f"\n(speed: {records} records a set; baseline {baseline}'s support model)")
    print(
        "| records | context words | answer words | judge | records / CPU s "
        "| records / s (wall) | ratio (CPU) | peak RSS MiB |"
    )
    print("|---|---:|---:|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        old = monitor_at(baseline, Path(tmp) / "baseline")
        for name, chosen in sets.items():
            data = Path(tmp) / "records.json"
            data.write_text(json.dumps(chosen))
            ctx = sum(len(" ".join(r["retrieved_contexts"]).split()) for r in chosen) / len(chosen)
            ans = sum(len(r["response"].split()) for r in chosen) / len(chosen)
            found = {}
            for judge, tree in (("baseline model", old), ("local judge", ROOT)):
                env = {**os.environ, "PYTHONPATH": str(tree)}
                kind = "local" if tree == ROOT else "learned"
                out = subprocess.run(
                    [sys.executable, "-c", _SPEED, kind, str(data)],
                    env=env,
                    check=True,
                    capture_output=True,
                    text=True,
                    cwd=tmp,
                ).stdout
                found[judge] = json.loads(out.strip().splitlines()[-1])
            base = found["baseline model"]["cold"][0]
            for judge, got in found.items():
                print(
                    f"| {name} | {ctx:.0f} | {ans:.0f} | {judge} | {got['cold'][0]:.1f} "
                    f"| {got['cold'][1]:.1f} | {got['cold'][0] / base:.2f}× | {got['rss']:.0f} |",
                    flush=True,
                )


def _cpu() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            flags = Path("/proc/cpuinfo").read_text()
            vnni = "avx512_vnni" in flags
            return f"{line.split(':', 1)[1].strip()}, {os.cpu_count()} cores, VNNI: {vnni}"
    return "unknown CPU"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default="09978da", help="the commit whose model to time")
    parser.add_argument("--records", type=int, default=64)
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-examples", action="store_true")
    args = parser.parse_args()
    print(f"CPU: {_cpu()}\n")
    if not args.skip_examples:
        examples()
    if not args.skip_speed:
        speed(args.baseline, args.records)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of the examples' process: {peak:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
