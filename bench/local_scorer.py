"""Measure the zero-token local scorer: detection quality, risk-based sampling, throughput.

    python bench/local_scorer.py [--data ../shared/data/halueval_qa_dev.jsonl]
                                 [--seeds 400] [--workers 2] [--records 600]

1. Detection on the labeled HaluEval-QA dev set: AUROC of local faithfulness
   (lower = hallucinated) and of the risk screen, precision/recall/F1 at the
   decision "faithfulness < 1", next to the lexical baseline of the data's
   README (flag an answer with a word found in neither the passages nor the
   question) and the same baseline without the question.
2. Risk-based vs uniform sampling at the same expected budget, over many hash
   seeds, on a population with a 10 % hallucination rate drawn from the set:
   share of hallucinations among the judged records, and mean / standard
   deviation of the Horvitz–Thompson estimate of the hallucination rate.
3. Throughput on ``--workers`` processes (one onnxruntime thread each) with
   5 contexts per record (the record's own plus others'), for the lexical risk
   screen and for the full local scoring of the three online metrics through
   `monitor.scoring.Scorer`; warm (chunks repeat, as in production) and cold
   (every chunk text new). Peak RSS per worker.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import random
import re
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from monitor.local.judge import LocalJudge  # noqa: E402
from monitor.risk import inclusion_probability, solve_scale  # noqa: E402
from monitor.sampling import unit_hash  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "halueval_qa_dev.jsonl"
Row = dict[str, Any]


def load(path: Path) -> list[Row]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# --- 1. detection


def auroc(scores: list[float], positive: list[bool]) -> float:
    """Probability that a positive scores above a negative (ties count half)."""
    pos = [s for s, p in zip(scores, positive, strict=True) if p]
    neg = [s for s, p in zip(scores, positive, strict=True) if not p]
    wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    return wins / (len(pos) * len(neg))


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


def detection(rows: list[Row], judge: LocalJudge) -> dict[str, list[float]]:
    labels = [bool(r["label_hallucinated"]) for r in rows]
    faith: list[float] = []
    risk: list[float] = []
    lexical_risk: list[float] = []
    for r in rows:
        screen = judge.screen(r["retrieved_contexts"], r["response"])
        faith.append(screen.faithfulness if not math.isnan(screen.faithfulness) else 0.0)
        risk.append(screen.risk)
        lexical_risk.append(judge.screen(r["retrieved_contexts"], r["response"],
                                         semantic=False).risk)
    table = [
        ("local faithfulness (verdict: < 1)", [1 - f for f in faith], [f < 1 for f in faith]),
        ("local risk screen, MiniLM words", risk, [x > 0.5 for x in risk]),
        ("local risk screen, lexical only", lexical_risk, [x > 0.5 for x in lexical_risk]),
        ("baseline: new word vs passages+question",
         [float(lexical_baseline(r)) for r in rows], [lexical_baseline(r) for r in rows]),
        ("baseline: new word vs passages only",
         [float(lexical_baseline(r, with_question=False)) for r in rows],
         [lexical_baseline(r, with_question=False) for r in rows]),
    ]
    print(f"\n## Detection on {len(rows)} records ({sum(labels)} hallucinated)\n")
    print("| scorer | AUROC | accuracy | precision | recall | F1 |")
    print("|---|---|---|---|---|---|")
    for name, scores, predicted in table:
        acc, p, rec, f1 = prf(predicted, labels)
        print(f"| {name} | {auroc(scores, labels):.3f} | {acc:.3f} | {p:.3f} | {rec:.3f} "
              f"| {f1:.3f} |")
    return {"risk": risk, "lexical_risk": lexical_risk}


# --- 2. sampling


def sampling(rows: list[Row], risks: list[float], seeds: int, label: str) -> None:
    rng = random.Random(7)
    bad = [i for i, r in enumerate(rows) if r["label_hallucinated"]]
    good = [i for i, r in enumerate(rows) if not r["label_hallucinated"]]
    population = [rng.choice(bad) if rng.random() < 0.10 else rng.choice(good)
                  for _ in range(3000)]
    ys = [1.0 if rows[i]["label_hallucinated"] else 0.0 for i in population]
    rs = [risks[i] for i in population]
    truth = sum(ys) / len(ys)
    print(f"\n## Risk-based vs uniform sampling ({label}; population {len(ys)}, "
          f"true hallucination rate {truth:.3f}, {seeds} seeds)\n")
    print("| rate | sampler | judged (mean) | hallucinations among judged | "
          "HT estimate mean | HT estimate sd | bias / se |")
    print("|---|---|---|---|---|---|---|")
    for rate in (0.05, 0.1, 0.2):
        floor = 0.1 * rate
        scale = solve_scale(rs, rate, floor=floor)
        risk_p = [inclusion_probability(r, scale, floor=floor) for r in rs]
        for name, ps in (("uniform", [rate] * len(rs)), ("risk", risk_p)):
            sizes, shares, estimates = [], [], []
            for seed in range(seeds):
                kept = [k for k in range(len(ys))
                        if unit_hash(f"{seed}:{k}".encode()) < ps[k]]
                sizes.append(len(kept))
                shares.append(sum(ys[k] for k in kept) / len(kept) if kept else 0.0)
                estimates.append(sum(ys[k] / ps[k] for k in kept) / len(ys))
            mean = statistics.fmean(estimates)
            sd = statistics.stdev(estimates)
            print(f"| {rate:.2f} | {name} | {statistics.fmean(sizes):.1f} | "
                  f"{statistics.fmean(shares):.3f} | {mean:.4f} | {sd:.4f} | "
                  f"{(mean - truth) / (sd / math.sqrt(seeds)):+.2f} |")


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
        out.append({"id": f"bench-{n}", "user_input": r["user_input"],
                    "retrieved_contexts": contexts[:5], "response": r["response"]})
    return out


def _worker(job: tuple[str, list[Row]]) -> tuple[int, float, int]:
    mode, records = job
    from monitor.local.embedder import MiniLMEmbedder
    from monitor.records import validate_record
    from monitor.scoring import Scorer

    judge = LocalJudge(embedder=MiniLMEmbedder(threads=1))
    judge.embedder.warm_up()
    interactions = [validate_record(r) for r in records]
    start = time.perf_counter()
    if mode == "screen":
        for i in interactions:
            judge.screen(i.context_texts, i.response, semantic=False)
    else:
        scorer = Scorer(judge, ["faithfulness", "response_relevancy", "context_utility"])

        async def run() -> None:
            for i in interactions:
                await scorer.score(i)

        asyncio.run(run())
    elapsed = time.perf_counter() - start
    return len(interactions), elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def throughput(rows: list[Row], workers: int, count: int) -> None:
    load1 = __import__("os").getloadavg()[0]
    print(f"\n## Throughput ({workers} worker processes, 1 onnxruntime thread each, "
          f"5 contexts per record; load average at start {load1:.1f})\n")
    print("| path | chunks | records | wall s | records/s | peak RSS per worker (MiB) |")
    print("|---|---|---|---|---|---|")
    ctx = mp.get_context("spawn")
    for mode in ("screen", "score"):
        for cold in (False, True):
            records = synthesise(rows, count, cold=cold)
            parts = [records[k::workers] for k in range(workers)]
            with ctx.Pool(workers) as pool:
                results = pool.map(_worker, [(mode, part) for part in parts])
            done = sum(n for n, _, _ in results)
            wall = max(t for _, t, _ in results)
            rss = max(m for _, _, m in results) / 1024
            name = "risk screen (lexical)" if mode == "screen" else "3 online metrics (Scorer)"
            print(f"| {name} | {'cold' if cold else 'warm'} | {done} | {wall:.2f} | "
                  f"{done / wall:.0f} | {rss:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--seeds", type=int, default=400)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--records", type=int, default=600)
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--only-throughput", action="store_true")
    args = parser.parse_args()
    rows = load(args.data)
    if not args.only_throughput:
        judge = LocalJudge()
        risks = detection(rows, judge)
        sampling(rows, risks["risk"], args.seeds, "risk = local screen with MiniLM words")
        sampling(rows, risks["lexical_risk"], args.seeds, "risk = lexical screen")
    if not args.skip_throughput:
        throughput(rows, args.workers, args.records)


if __name__ == "__main__":
    main()
