"""Measure the zero-token local scorer: detection quality, risk-based sampling, throughput.

    python bench/local_scorer.py [--data ../shared/data/halueval_qa_dev.jsonl]
                                 [--demo-data monitor/demo/traffic.jsonl]
                                 [--only-detection | --skip-throughput | --only-throughput]
                                 [--seeds 400] [--workers 2] [--records 600]
                                 [--repeats 3] [--in-flight 64] [--baseline 3abff3b]

1. Detection on the labeled HaluEval-QA dev set: AUROC of local faithfulness
   (lower = hallucinated), of the graded one (the mean support of the
   statements, `Screen.support`) and of the risk screen, precision/recall/F1 at the
   decision "faithfulness < 1", next to the lexical baseline of the data's
   README (flag an answer with a word found in neither the passages nor the
   question) and the same baseline without the question.
   Then the same on the demo's labelled traffic (``monitor/demo/traffic.jsonl``),
   scored as the demo scores it (`monitor.scoring.Scorer` with faithfulness on
   the local judge): the hallucination flag (faithfulness < 0.5) against the
   labels, precision over all labelled records as ``rag-monitor demo`` reports
   it (evasive and off-topic answers flagged count as false alarms) and over
   faithful vs hallucinated only, AUROC of faithfulness on those two, and the
   mean factual_correctness of the faithful answers (against their reference).
2. Risk-based vs uniform sampling at the same expected budget, over many hash
   seeds, on a population with a 10 % hallucination rate drawn from the set:
   share of hallucinations among the judged records, and mean / standard
   deviation of the Horvitz–Thompson estimate of the hallucination rate.
3. Throughput on ``--workers`` processes (one onnxruntime thread each) with
   5 contexts per record (the record's own plus others'), for the lexical risk
   screen and for the full local scoring of the three online metrics through
   `monitor.scoring.Scorer`; warm (chunks repeat, as in production), cold
   (every chunk text new) and cold without the embedding cache (no text is
   ever served from the cache). Peak RSS per worker, forward passes per record,
   and the CPU time per record (user + system, all threads of the workers) with
   its inverse, records per CPU second: n cores busy with nothing else score at
   most n times that. On a shared machine wall-clock rates move with the
   neighbours' load, CPU time much less.

Every figure has its baseline measured in the same run: the whole ``monitor``
package of commit ``--baseline`` (extracted with ``git archive``; its worker
processes import it in place of the working tree's, so its Scorer, records and
local judge, ``monitor/judges/local`` or ``monitor/local`` before it moved, run
together) for detection and for scoring, sequential and with
``--in-flight`` records per worker as the sidecar scores them; throughput
runs are interleaved ``--repeats`` times and the medians reported, with the
ratio to the baseline's run of the same round with as many records at once
(sequential or ``--in-flight``) and the largest score difference to it (0:
nothing measured changed). One more path runs the working tree without its
word table (`monitor.judges.local.words`), to show what the table alone is worth.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import json
import math
import multiprocessing as mp
import os
import random
import re
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from baseline import monitor_at  # bench/ is on sys.path when a bench runs

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ranking import auroc  # noqa: E402  (bench/ is the script's own folder)

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "halueval_qa_dev.jsonl"
DEMO_DATA = ROOT / "monitor" / "demo" / "traffic.jsonl"
#: where the local judge package is in a commit: now, and before it moved into monitor/judges
LOCAL_PACKAGES = ("monitor.judges.local", "monitor.local")
Row = dict[str, Any]


def load(path: Path) -> list[Row]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# --- 1. detection


def prf(predicted: list[bool], positive: list[bool]) -> tuple[float, float, float, float]:
    tp = sum(p and y for p, y in zip(predicted, positive, strict=True))
    fp = sum(p and not y for p, y in zip(predicted, positive, strict=True))
    fn = sum(not p and y for p, y in zip(predicted, positive, strict=True))
    precision = tp / (tp + fp) if tp + fp else 0.0
    recall = tp / (tp + fn) if tp + fn else 0.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    accuracy = sum(p == y for p, y in zip(predicted, positive, strict=True)) / len(positive)
    return accuracy, precision, recall, f1


_WORD = re.compile(r"\w+")


def lexical_baseline(row: Row, *, with_question: bool = True) -> bool:
    """The README's baseline: a word of the answer in neither the passages nor the question."""
    known = {w.lower() for w in _WORD.findall(" ".join(row["retrieved_contexts"]))}
    if with_question:
        known |= {w.lower() for w in _WORD.findall(row["user_input"])}
    return any(w.lower() not in known for w in _WORD.findall(row["response"]))


def _screens(
    job: tuple[list[Row], str | None],
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Local faithfulness, MiniLM risk, lexical risk and graded faithfulness (mean support; the
    verdict mean for a baseline without it) of every row (``job[1]``: baseline code)."""
    rows, baseline = job
    local = _use_tree(baseline)
    judge = importlib.import_module(f"{local}.judge").LocalJudge()
    faith: list[float] = []
    graded: list[float] = []
    risk: list[float] = []
    lexical_risk: list[float] = []
    for r in rows:
        screen = judge.screen(r["retrieved_contexts"], r["response"])
        faith.append(screen.faithfulness if not math.isnan(screen.faithfulness) else 0.0)
        support = getattr(screen, "support", screen.faithfulness)
        graded.append(support if not math.isnan(support) else 0.0)
        risk.append(screen.risk)
        lexical_risk.append(
            judge.screen(r["retrieved_contexts"], r["response"], semantic=False).risk
        )
    return faith, risk, lexical_risk, graded


def detection(rows: list[Row], baseline: str) -> dict[str, list[float]]:
    labels = [bool(r["label_hallucinated"]) for r in rows]
    with tempfile.TemporaryDirectory() as tmp, mp.get_context("spawn").Pool(2) as pool:
        old = str(extract(baseline, Path(tmp)))
        (faith, risk, lexical_risk, graded), (old_faith, old_risk, old_lexical, _) = pool.map(
            _screens, [(rows, None), (rows, old)]
        )
    table = [
        ("local faithfulness (verdict: < 1)", [1 - f for f in faith], [f < 1 for f in faith]),
        (
            "local faithfulness graded, mean support (verdict: < 0.5)",
            [1 - f for f in graded],
            [f < 0.5 for f in graded],
        ),
        ("local risk screen, MiniLM words", risk, [x > 0.5 for x in risk]),
        ("local risk screen, lexical only", lexical_risk, [x > 0.5 for x in lexical_risk]),
        (
            f"local faithfulness, monitor/local@{baseline}",
            [1 - f for f in old_faith],
            [f < 1 for f in old_faith],
        ),
        (f"local risk screen, MiniLM words, @{baseline}", old_risk, [x > 0.5 for x in old_risk]),
        (
            f"local risk screen, lexical only, @{baseline}",
            old_lexical,
            [x > 0.5 for x in old_lexical],
        ),
        (
            "baseline: new word vs passages+question",
            [float(lexical_baseline(r)) for r in rows],
            [lexical_baseline(r) for r in rows],
        ),
        (
            "baseline: new word vs passages only",
            [float(lexical_baseline(r, with_question=False)) for r in rows],
            [lexical_baseline(r, with_question=False) for r in rows],
        ),
    ]
    print(f"\n## Detection on {len(rows)} records ({sum(labels)} hallucinated)\n")
    print("| scorer | AUROC | accuracy | precision | recall | F1 |")
    print("|---|---|---|---|---|---|")
    for name, scores, predicted in table:
        acc, p, rec, f1 = prf(predicted, labels)
        print(
            f"| {name} | {auroc(scores, labels):.3f} | {acc:.3f} | {p:.3f} | {rec:.3f} | {f1:.3f} |"
        )
    return {"risk": risk, "lexical_risk": lexical_risk}


DemoScores = tuple[float, float, float, list[str]]


def _demo_scores(job: tuple[list[Row], str | None]) -> list[DemoScores]:
    """(faithfulness, factual_correctness, response_relevancy, flag reasons) of every demo
    record (``job[1]``: baseline code)."""
    rows, baseline = job
    local = _use_tree(baseline)
    from monitor.flags import flag_reasons
    from monitor.records import validate_record
    from monitor.scoring import Scorer

    judge = importlib.import_module(f"{local}.judge").LocalJudge()
    scorer = Scorer(
        judge, ["faithfulness", "response_relevancy", "context_utility", "factual_correctness"]
    )

    async def run() -> list[Any]:
        return [await scorer.score(validate_record(r)) for r in rows]

    return [
        (
            s.results["faithfulness"].score,
            s.results["factual_correctness"].score,
            s.results["response_relevancy"].score,
            flag_reasons(s, {}),
        )
        for s in asyncio.run(run())
    ]


def demo_detection(path: Path, baseline: str) -> None:
    rows = load(path)
    labels = [str(r["metadata"]["label"]) for r in rows]
    with tempfile.TemporaryDirectory() as tmp, mp.get_context("spawn").Pool(2) as pool:
        old = str(extract(baseline, Path(tmp)))
        new_scores, old_scores = pool.map(_demo_scores, [(rows, None), (rows, old)])
    counts = {label: labels.count(label) for label in sorted(set(labels))}
    print(
        f"\n## Demo traffic ({len(rows)} records: "
        + ", ".join(f"{n} {label}" for label, n in counts.items())
        + "; hallucination flag = faithfulness < 0.5)\n"
    )
    print(
        "| scorer | faithful flagged | hallucinated flagged (recall) | evasive flagged "
        "| off_topic flagged | precision, all labels | precision, faithful vs hallucinated "
        "| AUROC, faithful vs hallucinated | factual_correctness, faithful (mean) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, scores in (
        ("local judge", new_scores),
        (f"local judge, monitor/local@{baseline}", old_scores),
    ):
        flagged = [not math.isnan(f) and f < 0.5 for f, *_ in scores]

        def share(label: str, flags: list[bool] = flagged) -> str:
            n = sum(f for f, y in zip(flags, labels, strict=True) if y == label)
            return f"{n}/{counts.get(label, 0)}"

        positive = [y == "hallucinated" for y in labels]
        _, p_all, recall, _ = prf(flagged, positive)
        pair = [
            k
            for k, y in enumerate(labels)
            if y in ("faithful", "hallucinated") and not math.isnan(scores[k][0])
        ]
        _, p_pair, _, _ = prf([flagged[k] for k in pair], [positive[k] for k in pair])
        area = auroc([1 - scores[k][0] for k in pair], [positive[k] for k in pair])
        facts = [
            fc
            for (_, fc, *_), y in zip(scores, labels, strict=True)
            if y == "faithful" and not math.isnan(fc)
        ]
        print(
            f"| {name} | {share('faithful')} | {share('hallucinated')} ({recall:.3f}) "
            f"| {share('evasive')} | {share('off_topic')} | {p_all:.3f} | {p_pair:.3f} "
            f"| {area:.3f} | {statistics.fmean(facts) if facts else math.nan:.3f} |"
        )
    print(
        "\nAll flags of the three online metrics (`monitor.flags.flag_reasons`, thresholds "
        "0.5), as the demo queues records:\n"
    )
    print(
        "| scorer | "
        + " | ".join(f"{label} flagged (any reason)" for label in counts)
        + " | low_relevancy flags |"
    )
    print("|---|" + "---|" * (len(counts) + 1))
    for name, scores in (
        ("local judge", new_scores),
        (f"local judge, monitor/local@{baseline}", old_scores),
    ):
        cells = [
            f"{sum(bool(r[3]) for r, y in zip(scores, labels, strict=True) if y == label)}/{n}"
            for label, n in counts.items()
        ]
        low = sum("low_relevancy" in r[3] for r in scores)
        print(f"| {name} | " + " | ".join(cells) + f" | {low} |")
    differ = sum(a[3] != b[3] for a, b in zip(new_scores, old_scores, strict=True))
    relevancy = max(abs(a[2] - b[2]) for a, b in zip(new_scores, old_scores, strict=True))
    print(
        f"\nrecords whose flag reasons differ from the baseline: {differ}; largest "
        f"|response_relevancy difference|: {relevancy:.4f}"
    )


# --- 2. sampling


def sampling(rows: list[Row], risks: list[float], seeds: int, label: str) -> None:
    # imported here, not at the top: a spawned worker re-imports this module before `_use_tree`
    from monitor.risk import inclusion_probability, solve_scale
    from monitor.sampling import unit_hash

    rng = random.Random(7)
    bad = [i for i, r in enumerate(rows) if r["label_hallucinated"]]
    good = [i for i, r in enumerate(rows) if not r["label_hallucinated"]]
    population = [rng.choice(bad) if rng.random() < 0.10 else rng.choice(good) for _ in range(3000)]
    ys = [1.0 if rows[i]["label_hallucinated"] else 0.0 for i in population]
    rs = [risks[i] for i in population]
    truth = sum(ys) / len(ys)
    print(
        f"\n## Risk-based vs uniform sampling ({label}; population {len(ys)}, "
        f"true hallucination rate {truth:.3f}, {seeds} seeds)\n"
    )
    print(
        "| rate | sampler | judged (mean) | hallucinations among judged | "
        "HT estimate mean | HT estimate sd | bias / se |"
    )
    print("|---|---|---|---|---|---|---|")
    for rate in (0.05, 0.1, 0.2):
        floor = 0.1 * rate
        scale = solve_scale(rs, rate, floor=floor)
        risk_p = [inclusion_probability(r, scale, floor=floor) for r in rs]
        for name, ps in (("uniform", [rate] * len(rs)), ("risk", risk_p)):
            sizes, shares, estimates = [], [], []
            for seed in range(seeds):
                kept = [k for k in range(len(ys)) if unit_hash(f"{seed}:{k}".encode()) < ps[k]]
                sizes.append(len(kept))
                shares.append(sum(ys[k] for k in kept) / len(kept) if kept else 0.0)
                estimates.append(sum(ys[k] / ps[k] for k in kept) / len(ys))
            mean = statistics.fmean(estimates)
            sd = statistics.stdev(estimates)
            print(
                f"| {rate:.2f} | {name} | {statistics.fmean(sizes):.1f} | "
                f"{statistics.fmean(shares):.3f} | {mean:.4f} | {sd:.4f} | "
                f"{(mean - truth) / (sd / math.sqrt(seeds)):+.2f} |"
            )


# --- 3. throughput


def synthesise(rows: list[Row], count: int, *, cold: bool) -> list[Row]:
    """Records with 5 contexts: the record's own first, then others' (deterministic)."""
    rng = random.Random(11)
    pool = [c for r in rows for c in r["retrieved_contexts"]]
    out = []
    for n in range(count):
        r = rows[n % len(rows)]
        contexts = list(r["retrieved_contexts"])
        while len(contexts) < 5:
            contexts.append(rng.choice(pool))
        if cold:  # every chunk text new: no cache can help
            contexts = [f"{c} (doc {n}-{k})" for k, c in enumerate(contexts)]
        out.append(
            {
                "id": f"bench-{n}",
                "user_input": r["user_input"],
                "retrieved_contexts": contexts[:5],
                "response": r["response"],
            }
        )
    return out


def _use_tree(root: str | None) -> str:
    """Make ``monitor`` of this process the package under ``root`` (an older commit's, from
    `extract`; None: the working tree) and return the name its local judge package has there.

    Every ``monitor`` module imported so far (the bench module's own imports, re-run in a
    spawned worker as ``__mp_main__``, or an earlier task's of a reused worker) is dropped, so
    the commit's Scorer, records and local judge are imported together, all from ``root``."""
    tree = Path(root) if root is not None else ROOT
    for name in [n for n in sys.modules if n == "monitor" or n.startswith("monitor.")]:
        del sys.modules[name]
    sys.path[:] = [str(tree)] + [p for p in sys.path if p != str(tree)]
    importlib.invalidate_caches()
    import monitor

    if not Path(monitor.__file__ or "").is_relative_to(tree):
        raise RuntimeError(f"monitor imported from {monitor.__file__}, not {tree}")
    return next(name for name in LOCAL_PACKAGES if tree.joinpath(*name.split(".")).is_dir())


Scores = list[float]


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _worker(
    job: tuple[str, list[Row], int, str | None, bool],
) -> tuple[int, float, int, int, Scores, float]:
    mode, records, in_flight, baseline, cache = job
    local = _use_tree(baseline)
    from monitor.records import validate_record
    from monitor.scoring import Scorer

    options: dict[str, Any] = {} if cache else {"cache_size": 0}
    if mode == "score, no word table":  # every single word through the model
        options["word_table"] = False
    embedder = importlib.import_module(f"{local}.embedder").MiniLMEmbedder(threads=1, **options)
    judge = importlib.import_module(f"{local}.judge").LocalJudge(embedder=embedder)
    judge.embedder.warm_up()
    interactions = [validate_record(r) for r in records]
    scores: Scores = []
    start, cpu = time.perf_counter(), _cpu_seconds()
    if mode == "screen":
        for i in interactions:
            judge.screen(i.context_texts, i.response, semantic=False)
    else:
        metrics = ["faithfulness", "response_relevancy", "context_utility"]
        scorer = Scorer(judge, metrics)

        async def run() -> list[Any]:
            slots = asyncio.Semaphore(in_flight)  # as the sidecar's score_concurrency

            async def one(interaction: Any) -> Any:
                async with slots:
                    return await scorer.score(interaction)

            return await asyncio.gather(*(one(i) for i in interactions))

        scores = [s.results[m].score for s in asyncio.run(run()) for m in metrics]
    elapsed, cpu = time.perf_counter() - start, _cpu_seconds() - cpu
    passes = getattr(judge.embedder, "passes", -1)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return len(interactions), elapsed, rss, passes, scores, cpu


#: warm: chunks repeat across records; cold: every chunk text new; no embedding cache: cold,
#: and the embedder's cache off: every text is embedded each time it is asked for
CHUNKS = ("warm", "cold", "cold, no embedding cache")


def extract(ref: str, into: Path) -> Path:
    """The whole ``monitor`` package as of commit ``ref`` (read-only ``git archive``) under
    ``into``, for the baseline: its root goes first on a worker's ``sys.path`` (`_use_tree`)."""
    return monitor_at(ref, into)


def throughput(
    rows: list[Row], workers: int, count: int, repeats: int, in_flight: int, baseline: str
) -> None:
    load1 = os.getloadavg()[0]
    print(
        f"\n## Throughput ({workers} worker processes, 1 onnxruntime thread each, "
        f"5 contexts per record, {count} records; median of {repeats} interleaved runs; "
        f"load average at start {load1:.1f})\n"
    )
    ctx = mp.get_context("spawn")
    with tempfile.TemporaryDirectory() as tmp:
        old = str(extract(baseline, Path(tmp)))
        # (label, mode, code root or None for the working tree, records in flight per worker)
        paths: list[tuple[str, str, str | None, int]] = [
            ("risk screen (lexical)", "screen", None, 1),
            (f"3 online metrics (Scorer), monitor/local@{baseline}, sequential", "score", old, 1),
            (
                f"3 online metrics (Scorer), monitor/local@{baseline}, {in_flight} in flight",
                "score",
                old,
                in_flight,
            ),
            ("3 online metrics (Scorer), sequential", "score", None, 1),
            (f"3 online metrics (Scorer), {in_flight} in flight", "score", None, in_flight),
            (
                f"3 online metrics (Scorer), {in_flight} in flight, no word table",
                "score, no word table",
                None,
                in_flight,
            ),
        ]
        runs: dict[tuple[int, str], list[tuple[float, float, float, float]]] = {}
        scored: dict[tuple[int, str], Scores] = {}
        for _ in range(repeats):
            for chunks in CHUNKS:
                cold, cache = chunks != "warm", chunks != "cold, no embedding cache"
                records = synthesise(rows, count, cold=cold)
                parts = [records[k::workers] for k in range(workers)]
                for n, (_, mode, code, flight) in enumerate(paths):
                    if mode == "screen" and not cache:
                        continue
                    with ctx.Pool(workers) as pool:
                        results = pool.map(
                            _worker, [(mode, part, flight, code, cache) for part in parts]
                        )
                    done = sum(r[0] for r in results)
                    wall = max(r[1] for r in results)
                    rss = max(r[2] for r in results) / 1024
                    passes = sum(r[3] for r in results)
                    cpu_ms = 1000 * sum(r[5] for r in results) / done
                    runs.setdefault((n, chunks), []).append(
                        (done / wall, rss, passes / done, cpu_ms)
                    )
                    scored[(n, chunks)] = [x for r in results for x in r[4]]
    print(
        "| path | chunks | records/s (median) | × baseline, same records at once "
        "| CPU ms per record (median) "
        "| records per CPU second | peak RSS per worker (MiB) | forward passes per record |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for chunks in CHUNKS:
        for n, (label, mode, _, flight) in enumerate(paths):
            if (n, chunks) not in runs:
                continue
            base = runs[(1 if flight == 1 else 2, chunks)]  # the baseline's row, same round
            rates = [r[0] for r in runs[(n, chunks)]]
            ratios = [r[0] / b[0] for r, b in zip(runs[(n, chunks)], base, strict=True)]
            ratio = "" if mode == "screen" else f"{statistics.median(ratios):.2f}"
            passes = runs[(n, chunks)][0][2]
            cpu_ms = statistics.median(r[3] for r in runs[(n, chunks)])
            print(
                f"| {label} | {chunks} | {statistics.median(rates):.0f} "
                f"| {ratio} | {cpu_ms:.1f} | {1000 / cpu_ms:.0f} "
                f"| {max(r[1] for r in runs[(n, chunks)]):.0f} "
                f"| {'' if passes < 0 else f'{passes:.2f}'} |"
            )
    for n, (label, mode, _, _) in enumerate(paths):
        if mode != "screen" and n != 1:
            deltas = [
                abs(a - b)
                for chunks in CHUNKS
                for a, b in zip(scored[(n, chunks)], scored[(1, chunks)], strict=True)
                if not (math.isnan(a) and math.isnan(b))
            ]
            moved = sum(d > 1e-6 for d in deltas)
            print(
                f"\nlargest |score difference| to the baseline, {label}: "
                f"{max(deltas, default=0.0):.2g} ({moved} of {len(deltas)} scores moved "
                "by more than 1e-6)",
                end="",
            )
    print()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--demo-data", type=Path, default=DEMO_DATA)
    parser.add_argument("--seeds", type=int, default=400)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--records", type=int, default=600)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--in-flight",
        type=int,
        default=64,
        help="records scored concurrently per worker (the sidecar's "
        "score_concurrency, 64 by default)",
    )
    parser.add_argument(
        "--baseline",
        default="3abff3b",
        help="commit whose monitor package is measured alongside, in the same run",
    )
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument(
        "--only-detection",
        action="store_true",
        help="detection on both sets only (no sampling, no throughput)",
    )
    parser.add_argument("--only-throughput", action="store_true")
    args = parser.parse_args()
    rows = load(args.data)
    if not args.only_throughput:
        risks = detection(rows, args.baseline)
        demo_detection(args.demo_data, args.baseline)
    if not args.only_throughput and not args.only_detection:
        sampling(rows, risks["risk"], args.seeds, "risk = local screen with MiniLM words")
        sampling(rows, risks["lexical_risk"], args.seeds, "risk = lexical screen")
    if not args.skip_throughput and not args.only_detection:
        throughput(rows, args.workers, args.records, args.repeats, args.in_flight, args.baseline)


if __name__ == "__main__":
    main()
