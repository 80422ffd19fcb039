"""The local judge's worked examples, and its speed beside the support model it replaced.

    python -m bench.local_judge [--baseline 09978da] [--before REF] [--records 64]
                                [--long PATH] [--halueval PATH] [--repeat 1000]
                                [--skip-speed] [--skip-score] [--skip-budget] [--figures]

The long-answer file and HaluEval QA dev are not shipped: ``--long`` and ``--halueval``, else
``data/`` under ``$RAGMON_DEV_DATA`` (`scripts.devdata`). Without the long-answer file the
cost section is left out, and the core budget reads the sets that are there, saying so;
``--figures`` needs both.

Its detection on the labelled sets, beside word overlap, is `bench.detection`'s
(``--detectors local,overlap``).

1. The lesson's worked example and the last round's four examples, as faithfulness
   (`LocalJudge.screen`, each answer read as the sidecar reads it).
2. Speed on short answers: the three online metrics through the Scorer (16 records in
   flight, as the sidecar scores them) on the realistic set's answers; records per CPU
   second and per wall second (models loaded, caches empty), and peak RSS, each judge in a
   process of its own: this tree's local judge and the support model of ``--baseline``
   (its ``LearnedJudge``, extracted with ``git archive``).
3. Cost on real RAG-sized records, on the path users run: ``python3 -m monitor score
   FILE --judge local --metrics faithfulness`` at its default concurrency (64), a child
   process per run, on the long-answer dev file (``--long``: 285 real answers, median 79
   words against 586 context words) and on it repeated to ``--repeat`` records. CPU
   seconds (user + system, from the child's rusage: start-up and model loading included,
   the start-up alone on a one-record file in its own row) and peak RSS (the child's
   ru_maxrss), for this tree, ``--before`` (this local judge at another commit) and
   ``--baseline``'s support model (``RAG_MONITOR_LOCAL_JUDGE=model``), in the same run.

The synthetic "RAG-sized" rows that section 2 used to print (each realistic answer with
its scenario's other answers, against its chunks padded with other scenarios' chunks)
are gone: they reused the same few dozen chunks and the same sibling sentences in every
record, so the judge's caches answered most of the work (docs/benchmarks.md has the
counts) and they read several times cheaper than real records do.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.baseline import ROOT, monitor_at
from bench.harness import REALISTIC, read_jsonl
from scripts import devdata

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


_SPEED = r"""
import asyncio, json, os, resource, sys, time
from monitor.records import Interaction
from monitor.scoring import Scorer
kind, path = sys.argv[1], sys.argv[2]
if kind == "local":
    from monitor.judges.local.judge import LocalJudge as Judge
else:
    from monitor.judges.local.learned import LearnedJudge as Judge
rows = json.loads(open(path).read())
fields = ("id", "user_input", "retrieved_contexts", "response")
interactions = [Interaction.model_validate({k: r[k] for k in fields}) for r in rows]
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
    rows = read_jsonl(REALISTIC)[:records]
    sets = {"realistic answers": rows}
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


# --- cost on real RAG-sized records, through `rag-monitor score`


def score_run(tree: Path, data: Path, env: dict[str, str] | None = None) -> dict[str, float]:
    """``python3 -m monitor score data --judge local --metrics faithfulness`` with ``tree``'s
    code, in a child process: its CPU seconds (user + system), wall seconds and peak RSS (MiB),
    from the child's own rusage."""
    command = [
        sys.executable,
        "-m",
        "monitor",
        "score",
        str(data),
        "--judge",
        "local",
        "--metrics",
        "faithfulness",
        "--out",
        os.devnull,
    ]
    child_env = {**os.environ, "PYTHONPATH": str(tree), **(env or {})}
    wall = time.perf_counter()
    process = subprocess.Popen(
        command, env=child_env, cwd=tree, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert process.stderr is not None
    err = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise RuntimeError(f"score failed ({process.returncode}): {err[-2000:].decode()}")
    return {
        "cpu": usage.ru_utime + usage.ru_stime,
        "wall": time.perf_counter() - wall,
        "rss": usage.ru_maxrss / 1024,
    }


def _median(values: list[int]) -> float:
    ordered = sorted(values)
    return float(ordered[len(ordered) // 2])


def score_costs(long: Path, repeat: int, baseline: str, before: str | None) -> None:
    rows = read_jsonl(long)
    ctx = _median([sum(len(c.split()) for c in r["retrieved_contexts"]) for r in rows])
    ans = _median([len(r["response"].split()) for r in rows])
    print(
        f"\n(cost through `python3 -m monitor score FILE --judge local --metrics faithfulness`, "
        f"default concurrency 64; {long.name}: median {ans:.0f} answer words, {ctx:.0f} "
        "context words; CPU s include start-up and model loading)"
    )
    print(
        "| records | judge | CPU s | CPU s / record | CPU s / record less start-up "
        "| wall s | ratio (CPU / record) | peak RSS MiB |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        judges: list[tuple[str, Path, dict[str, str]]] = [
            (
                f"support model ({baseline})",
                monitor_at(baseline, Path(tmp) / "baseline"),
                {"RAG_MONITOR_LOCAL_JUDGE": "model"},
            )
        ]
        if before is not None:
            judges.append((f"local judge ({before})", monitor_at(before, Path(tmp) / "before"), {}))
        judges.append(("local judge (this tree)", ROOT, {}))
        files = {}
        for n in (1, len(rows), repeat):
            path = Path(tmp) / f"records-{n}.jsonl"
            chosen = [
                {**rows[k % len(rows)], "id": f"{rows[k % len(rows)]['id']}#{k}"} for k in range(n)
            ]
            path.write_text("".join(json.dumps(r) + "\n" for r in chosen))
            files[n] = path
        base_per_record = 0.0
        start_up: dict[str, float] = {}
        for n, path in files.items():
            if n == repeat and repeat == len(rows):
                continue
            name = f"{long.name} × {n}" if n != len(rows) else f"{long.name}, {n}"
            if n == 1:
                name = "start-up (1 record)"
            for judge, tree, env in judges:
                if n == repeat and tree != ROOT:
                    continue  # the memory row: this tree only
                got = score_run(tree, path, env)
                per = got["cpu"] / n
                if n == 1:
                    start_up[judge] = got["cpu"]
                net = "-" if n == 1 else f"{(got['cpu'] - start_up[judge]) / (n - 1):.3f}"
                if n == len(rows) and tree != ROOT and not base_per_record:
                    base_per_record = per
                ratio = f"{base_per_record / per:.2f}×" if n == len(rows) else "-"
                print(
                    f"| {name} | {judge} | {got['cpu']:.1f} | {per:.3f} | {net} "
                    f"| {got['wall']:.1f} | {ratio} | {got['rss']:.0f} |",
                    flush=True,
                )


# --- the dev sets' figures, this tree beside another commit

_FIGURES = r"""
import json, math, sys
from pathlib import Path
from monitor.judges.local.judge import LocalJudge
from monitor.text import evasive
sets = json.loads(Path(sys.argv[1]).read_text())
judge = LocalJudge()
out = {}
for name, rows in sets.items():
    found = []
    for r in rows:
        if evasive.noncommittal(r["response"]):
            continue
        s = judge.screen(r["retrieved_contexts"], r["response"], r["user_input"])
        if not math.isnan(s.faithfulness):
            found.append((r["label_hallucinated"], s.faithfulness, s.support))
    out[name] = found
print(json.dumps(out))
"""


def figures(long: Path, halueval: Path, before: str) -> None:
    """Graded AUROC (mean claim support), AUROC of the share, and the flag rate at
    faithfulness < 1 of faithful answers, on HaluEval QA dev, the realistic tune split and
    the long-answer file, each answer read as `bench.detection` reads it
    (`LocalJudge.screen`), for ``before``'s local judge and this tree's, in one run."""
    from bench.harness import FAITHFUL, HALLUCINATED, contexts, load_dataset
    from bench.ranking import auroc

    def rows(items: list[Any]) -> list[dict[str, Any]]:
        return [
            {
                "response": str(i.record["response"]),
                "user_input": str(i.record.get("user_input") or ""),
                "retrieved_contexts": contexts(i.record),
                "label_hallucinated": i.kind == HALLUCINATED,
            }
            for i in items
            if i.kind in (FAITHFUL, HALLUCINATED)
        ]

    sets = {
        "HaluEval QA dev": rows(load_dataset("halueval", halueval)),
        "realistic tune": rows(load_dataset("realistic-tune")),
        long.name: [{**r, "label_hallucinated": False} for r in read_jsonl(long)],
    }
    print(f"\n(dev figures: {before}'s local judge and this tree's, in one run)")
    print(
        "| data set | answers | judge | AUROC graded | AUROC faithfulness "
        "| faithful answers flagged | mean support |"
    )
    print("|---|---:|---|---:|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "sets.json"
        data.write_text(json.dumps(sets))
        trees = [(before, monitor_at(before, Path(tmp) / "before")), ("this tree", ROOT)]
        for judge, tree in trees:
            out = subprocess.run(
                [sys.executable, "-c", _FIGURES, str(data)],
                env={**os.environ, "PYTHONPATH": str(tree)},
                check=True,
                capture_output=True,
                text=True,
                cwd=tree,
            ).stdout
            found = json.loads(out.strip().splitlines()[-1])
            for name, got in found.items():
                labels = [bool(h) for h, _, _ in got]
                faithful = [f for h, f, _ in got if not h]
                both = any(labels) and not all(labels)
                graded = auroc([1 - g for _, _, g in got], labels) if both else float("nan")
                share = auroc([1 - f for _, f, _ in got], labels) if both else float("nan")
                flagged = sum(f < 1 for f in faithful) / len(faithful)
                support = sum(g for _, _, g in got) / len(got)
                print(
                    f"| {name} | {len(got)} | {judge} | {graded:.4f} | {share:.4f} "
                    f"| {flagged:.4f} | {support:.4f} |",
                    flush=True,
                )


# --- the budget of a core, by answer and context size

#: (label, lowest, highest) of the size bands, in words
CONTEXT_BANDS = (
    ("< 150", 0, 149),
    ("150–499", 150, 499),
    ("500–999", 500, 999),
    ("≥ 1000", 1000, 10**9),
)
ANSWER_BANDS = (("< 40", 0, 39), ("40–99", 40, 99), ("≥ 100", 100, 10**9))


def core_budget(long: Path | None, halueval: Path | None) -> None:
    """CPU seconds of faithfulness per answer, one answer at a time on one thread (the
    metric's two steps: the answer's claims, then each claim's support by the contexts
    joined), by context and answer size, over HaluEval QA dev, the realistic set and the
    long-answer file: what one core judges a second."""
    from monitor.judges.local.judge import LocalJudge
    from monitor.text import evasive

    judge = LocalJudge()
    judge.warm_up()
    judge.embedder.warm_up()
    rows = read_jsonl(REALISTIC)
    for path in (long, halueval):
        if path is not None:
            rows += read_jsonl(path)
    cells: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        response, question = str(row["response"]), str(row.get("user_input") or "")
        if evasive.noncommittal(response):
            continue
        contexts = [c if isinstance(c, str) else str(c["text"]) for c in row["retrieved_contexts"]]
        started = time.thread_time()
        said = judge.claims(response, question)
        if said.said:
            judge.assess(said.said, contexts, said.asked)
        spent = time.thread_time() - started
        ctx, ans = len(" ".join(contexts).split()), len(response.split())
        band = (
            next(name for name, low, high in CONTEXT_BANDS if low <= ctx <= high),
            next(name for name, low, high in ANSWER_BANDS if low <= ans <= high),
        )
        cells.setdefault(band, []).append(spent)
    print("\n(faithfulness alone, one answer at a time, one thread: what one core judges)")
    print("| context words | answer words | answers | CPU s / answer (median) | answers / core s |")
    print("|---|---|---:|---:|---:|")
    for cname, _, _ in CONTEXT_BANDS:
        for aname, _, _ in ANSWER_BANDS:
            times = sorted(cells.get((cname, aname), []))
            if not times:
                continue
            median = times[len(times) // 2]
            mean = sum(times) / len(times)
            print(
                f"| {cname} | {aname} | {len(times)} | {median:.3f} | {1 / mean:.1f} |",
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
    parser.add_argument("--before", default=None, help="also time this commit's local judge")
    parser.add_argument("--records", type=int, default=64)
    dev = "default: data/ under $RAGMON_DEV_DATA"
    parser.add_argument("--long", type=Path, help=f"the long-answer dev file ({dev})")
    parser.add_argument("--halueval", type=Path, help=f"HaluEval QA dev ({dev})")
    parser.add_argument("--repeat", type=int, default=1000, help="records of the memory row")
    parser.add_argument("--skip-speed", action="store_true")
    parser.add_argument("--skip-score", action="store_true")
    parser.add_argument("--skip-budget", action="store_true")
    parser.add_argument(
        "--figures", action="store_true", help="the dev sets' figures, --before's and this tree's"
    )
    parser.add_argument("--skip-examples", action="store_true")
    args = parser.parse_args()
    get = devdata.require if args.figures else devdata.find  # --figures needs both
    long, halueval = get(devdata.LONG, args.long), get(devdata.HALUEVAL, args.halueval)
    if long is None and not (args.skip_score and args.skip_budget):
        devdata.leaving_out("the long answers", devdata.LONG, args.long)
    if halueval is None and not args.skip_budget:
        devdata.leaving_out("HaluEval QA dev from the budget", devdata.HALUEVAL, args.halueval)
    print(f"CPU: {_cpu()}\n")
    if not args.skip_examples:
        examples()
    if not args.skip_speed:
        speed(args.baseline, args.records)
    if not args.skip_score and long is not None:
        score_costs(long, args.repeat, args.baseline, args.before)
    if not args.skip_budget:
        core_budget(long, halueval)
    if args.figures:
        assert long is not None and halueval is not None
        figures(long, halueval, args.before or "HEAD")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak RSS of the examples' process: {peak:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
