"""Fit the local judge's answer-level decision: the probability that an answer holds at least
one unsupported claim, and the cut above which the judge says so.

Every answer of the dev sets is read as the faithfulness metric reads it (its claims, each
with the combiner's support probability against the answer's contexts); the claims'
probabilities become a few answer features (`monitor.judges.local.answer.FEATURES`), and a
logistic fit on the fitting halves maps them to a probability. The cut is then the lowest
probability that flags at most `FALSE_FLAGS` of the faithful answers of *each* fitting half
(long answers, the realistic tune split, HaluEval QA dev's fitting half).

Fitting halves: ``long-fit`` (the long faithful answers and their twins, `bench.twins`),
``realistic-tune``, and the half of HaluEval QA dev the combiner was fitted on. Reported:
the other halves (``long-report``, ``halueval-unfitted``) and, read only, the realistic
holdout and the demo (never fitted on).

    python -m training.answer --cache /tmp/answer-claims.jsonl          # fit, print, write
    python -m training.answer --cache /tmp/answer-claims.jsonl --dry-run  # fit and print only

HaluEval QA dev and the long-answer file are not shipped: ``--halueval`` and ``--long``, else
``data/`` under ``$RAGMON_DEV_DATA`` (`scripts.devdata`); the fit needs both and stops
without them.

The claims' probabilities are cached in ``--cache`` (one line per answer; a second run reads
what is there and scores only what is missing). See docs/model.md, "The answer's probability".
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.harness import (
    FAITHFUL,
    HALLUCINATED,
    Item,
    contexts,
    halueval_fit_half,
    load_dataset,
)
from bench.ranking import auroc
from monitor.judges.local.answer import ANSWER_PATH, FEATURES, AnswerModel, features
from monitor.judges.local.judge import LocalJudge
from monitor.text import evasive
from scripts import devdata

#: the most faithful answers the cut may flag on each fitting half
FALSE_FLAGS = 0.05
FIT_SETS = ("long-fit", "realistic-tune", "halueval-fit")
REPORT_SETS = ("long-report", "halueval-unfitted", "realistic-holdout", "demo")
#: L2 penalty of the logistic fit (features are standardised first)
L2 = 1.0

Array = npt.NDArray[np.float64]


def _items(name: str, halueval: Path, long: Path) -> list[Item]:
    if name == "halueval-fit":
        return [i for i in load_dataset("halueval", halueval) if halueval_fit_half(i.record)]
    return load_dataset(name, halueval, long=long)


def _key(name: str, item: Item) -> str:
    return f"{name}\t{item.record['id']}\t{item.record['response'][:40]}"


def read_answer(judge: LocalJudge, item: Item) -> dict[str, Any]:
    """The claims' support probabilities of one answer, as the faithfulness metric reads it
    (None for an answer the metric leaves unscored)."""
    record = item.record
    response, question = record["response"], record["user_input"]
    if evasive.noncommittal(response):
        return {"probabilities": None}
    said = judge.claims(response, question)
    if not said.said:
        return {"probabilities": None}
    found = judge.support(said.said, contexts(record), said.asked)
    return {"probabilities": [d.probability for d in found]}


def collect(
    judge: LocalJudge, sets: Sequence[str], cache: Path, halueval: Path, long: Path
) -> dict[str, list[tuple[Item, list[float] | None]]]:
    """Every set's labelled answers with their claims' probabilities (read from ``cache``
    where it has them, scored and appended otherwise)."""
    done: dict[str, list[float] | None] = {}
    if cache.is_file():
        for line in cache.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            done[row["key"]] = row["probabilities"]
    out: dict[str, list[tuple[Item, list[float] | None]]] = {}
    with cache.open("a", encoding="utf-8") as sink, ThreadPoolExecutor(2) as pool:
        for name in sets:
            items = [i for i in _items(name, halueval, long) if i.kind in (FAITHFUL, HALLUCINATED)]
            todo = [i for i in items if _key(name, i) not in done]
            if todo:
                print(f"{name}: scoring {len(todo)} of {len(items)} answers", file=sys.stderr)
            found_all = pool.map(lambda i: read_answer(judge, i), todo)
            for item, found in zip(todo, found_all, strict=True):
                done[_key(name, item)] = found["probabilities"]
                sink.write(json.dumps({"key": _key(name, item), **found}) + "\n")
                sink.flush()
            out[name] = [(i, done[_key(name, i)]) for i in items]
    return out


def _matrix(rows: Sequence[tuple[Item, list[float] | None]]) -> tuple[Array, Array]:
    kept = [(i, p) for i, p in rows if p]
    x = np.array([features(p) for _, p in kept], dtype=np.float64)
    y = np.array([float(i.kind == HALLUCINATED) for i, _ in kept])
    return x, y


def fit_logistic(x: Array, y: Array, l2: float = L2) -> tuple[Array, float]:
    """Weights and bias of a logistic regression (Newton's method, L2 on the weights),
    fitted on standardised features and returned in the features' own units."""
    mean, scale = x.mean(axis=0), x.std(axis=0) + 1e-9
    z = np.hstack([(x - mean) / scale, np.ones((len(x), 1))])
    w = np.zeros(z.shape[1])
    penalty = np.full(z.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(50):
        p = 1.0 / (1.0 + np.exp(-(z @ w)))
        grad = z.T @ (p - y) + penalty * w
        hess = (z * (p * (1 - p))[:, None]).T @ z + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    weights = w[:-1] / scale
    bias = float(w[-1] - (weights * mean).sum())
    return weights, bias


def cut_for(faithful_probabilities: Sequence[Sequence[float]], share: float = FALSE_FLAGS) -> float:
    """The lowest cut (flag at probability >= cut) that flags at most ``share`` of the
    faithful answers of every set."""
    cut = 0.0
    for probs in faithful_probabilities:
        ordered = sorted(probs, reverse=True)
        allowed = math.floor(share * len(ordered))
        # flag strictly fewer than allowed + 1: the cut sits just above the next one
        above = ordered[allowed] if allowed < len(ordered) else 0.0
        cut = max(cut, math.nextafter(above, 2.0))
    return cut


def report(model: AnswerModel, data: dict[str, list[tuple[Item, list[float] | None]]]) -> list[str]:
    """One table line per set: answers, faithful flagged, recall, AUROC of the answer's
    probability and of the mean support, today's rule (any claim below 0.5) for comparison."""
    lines = [
        "| set | faithful | hallucinated | faithful flagged | recall | AUROC p(answer) "
        "| AUROC mean support | any claim < 0.5: faithful flagged / recall |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, rows in data.items():
        kept = [(i, p) for i, p in rows if p]
        bad = [p for i, p in kept if i.kind == HALLUCINATED]
        good = [p for i, p in kept if i.kind == FAITHFUL]
        pa_bad = [model.probability(p) for p in bad]
        pa_good = [model.probability(p) for p in good]
        flagged_good = sum(q >= model.cut for q in pa_good) / max(len(good), 1)
        recall = sum(q >= model.cut for q in pa_bad) / max(len(bad), 1)
        old_good = sum(min(p) < 0.5 for p in good) / max(len(good), 1)
        old_recall = sum(min(p) < 0.5 for p in bad) / max(len(bad), 1)
        labels = [True] * len(bad) + [False] * len(good)
        a_p = auroc(pa_bad + pa_good, labels)
        a_m = auroc([-float(np.mean(p)) for p in bad + good], labels)
        lines.append(
            f"| {name} | {len(good)} | {len(bad)} | {flagged_good:.1%} | {recall:.1%} "
            f"| {a_p:.3f} | {a_m:.3f} | {old_good:.1%} / {old_recall:.1%} |"
        )
    return lines


def reliability(
    model: AnswerModel, rows: Sequence[tuple[Item, list[float] | None]], bins: int = 10
) -> list[str]:
    """Predicted against observed, per decile of the predicted probability."""
    kept = sorted(
        ((model.probability(p), i.kind == HALLUCINATED) for i, p in rows if p),
        key=lambda t: t[0],
    )
    lines = [
        "| decile | answers | predicted (mean) | observed hallucinated |",
        "|---:|---:|---:|---:|",
    ]
    for k in range(bins):
        part = kept[k * len(kept) // bins : (k + 1) * len(kept) // bins]
        if not part:
            continue
        predicted = sum(q for q, _ in part) / len(part)
        observed = sum(b for _, b in part) / len(part)
        lines.append(f"| {k + 1} | {len(part)} | {predicted:.3f} | {observed:.3f} |")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.answer", description=__doc__)
    parser.add_argument("--cache", type=Path, required=True, metavar="PATH")
    dev = "default: data/ under $RAGMON_DEV_DATA"
    parser.add_argument("--halueval", type=Path, metavar="PATH", help=dev)
    parser.add_argument("--long", type=Path, metavar="PATH", help=dev)
    parser.add_argument("--out", type=Path, default=ANSWER_PATH, metavar="PATH")
    parser.add_argument("--dry-run", action="store_true", help="fit and report, write nothing")
    args = parser.parse_args(argv)
    halueval = devdata.require(devdata.HALUEVAL, args.halueval)
    long = devdata.require(devdata.LONG, args.long)

    judge = LocalJudge()
    judge.warm_up()
    data = collect(judge, (*FIT_SETS, *REPORT_SETS), args.cache, halueval, long)
    fit_rows = [row for name in FIT_SETS for row in data[name]]
    x, y = _matrix(fit_rows)
    weights, bias = fit_logistic(x, y)
    provisional = AnswerModel(tuple(float(w) for w in weights), bias, 0.5)
    cut = cut_for(
        [
            [provisional.probability(p) for i, p in data[name] if p and i.kind == FAITHFUL]
            for name in FIT_SETS
        ]
    )
    model = AnswerModel(provisional.weights, bias, math.ceil(cut * 1e6) / 1e6)
    print(f"features {FEATURES}\nweights {model.weights}\nbias {model.bias:.4f} cut {model.cut}")
    print("\n".join(report(model, data)))
    print("\nreliability, fitting halves together:")
    print("\n".join(reliability(model, fit_rows)))
    report_rows = [row for name in ("long-report", "halueval-unfitted") for row in data[name]]
    print("\nreliability, long-report and halueval-unfitted together:")
    print("\n".join(reliability(model, report_rows)))
    if not args.dry_run:
        model.save(args.out)
        print(f"wrote {args.out}: pin its sha256 in monitor/judges/local/answer.py")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
