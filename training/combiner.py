"""Fit the local judge's combiner (`monitor.judges.local.combiner`) and report what it does.

    python -m training.combiner features   # read every set through the judge: .cache/combiner/
    python -m training.combiner fit        # fit the weights, write model/combiner.json
    python -m training.combiner report     # AUROC per set and per feature set (ablation)

``features`` reads HaluEval QA dev and the NLI pairs, which are not shipped: ``--halueval``
and ``--nli``, else ``data/`` and ``nli/`` under ``$RAGMON_DEV_DATA`` (`scripts.devdata`);
it stops without them (``--answers-only`` needs no NLI pairs).

Fitted only on data outside every evaluation set: the held-out fiftieth of the
NLI mix (claims against their evidence, `training.cross_encoder.held_out`) with
one-fact edits of its supported claims, HaluEval QA dev's first half by question
(the other half is reported) and the realistic set's tune split. The realistic
holdout and the demo traffic are only ever read by ``report``.

An answer's claims are joined as a noisy AND: the answer is faithful when every
claim is supported, P = Π p(claim), which lets answer-level labels fit claim-level
weights; the NLI pairs are claims with their own label. Each of the three sources
weighs the same in the fit.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from bench.harness import DEMO, REALISTIC, halueval_fit_half, overlap
from bench.ranking import auroc
from monitor.judges.local.claims import Claims
from monitor.judges.local.combiner import COMBINER_PATH, FEATURES, Combiner, features
from monitor.judges.local.judge import LocalJudge
from monitor.text import evasive
from scripts import devdata
from training import nli
from training.cross_encoder import held_out
from training.windows import texts

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "combiner"

Array = npt.NDArray[np.float64]


def _records(halueval: Path) -> list[dict[str, Any]]:
    """Every labelled answer, with its set and whether the fit may read it."""
    out = []
    for line in halueval.read_text().splitlines():
        r = json.loads(line)
        fit = halueval_fit_half(r)
        out.append({**r, "set": "halueval-fit" if fit else "halueval-report", "fit": fit})
    for line in REALISTIC.read_text().splitlines():
        r = json.loads(line)
        if r["category"] == "evasive":
            continue
        out.append({**r, "set": f"realistic-{r['split']}", "fit": r["split"] == "tune"})
    for line in DEMO.read_text().splitlines():
        r = json.loads(line)
        label = r["metadata"]["label"]
        if label == "evasive":
            continue
        out.append(
            {**r, "label_hallucinated": label == "hallucinated", "set": "demo", "fit": False}
        )
    return out


def _judge() -> LocalJudge:
    """The judge whose steps read every set: its own combiner is what is being fitted, so
    it reads with zero weights (only `Reader.read` and `Reader.gaps` are used)."""
    return LocalJudge(combiner=Combiner((0.0,) * len(FEATURES), 0.0), threads=1)


def read_features(halueval: Path, nli_root: Path | None) -> None:
    """Every answer's claims and every held-out NLI pair (under ``nli_root``; none when it is
    None) through the judge's parts."""
    CACHE.mkdir(parents=True, exist_ok=True)
    judge = _judge()
    start = time.perf_counter()
    rows = []
    records = _records(halueval)
    for n, r in enumerate(records):
        contexts = texts(r["retrieved_contexts"])
        said = judge.claims(r["response"], r["user_input"])
        if not said.said:
            continue  # the faithfulness metric scores no answer without claims
        [found] = judge.reader.read(said, contexts)
        rows.append(
            {
                "id": r["id"],
                "set": r["set"],
                "fit": r["fit"],
                "category": r.get("category", ""),
                "faithful": int(not r["label_hallucinated"]),
                "evasive": int(evasive.noncommittal(r["response"])),
                "overlap": overlap(r["response"], contexts),
                "contexts": contexts,
                "claims": [
                    {"claim": c, "asked": a, "logit": f.support.logit}
                    for c, a, f in zip(said.said, said.asked, found, strict=True)
                ],
            }
        )
        if n % 50 == 0:
            print(f"answers {n}/{len(records)} {time.perf_counter() - start:.0f}s", flush=True)
    (CACHE / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    if nli_root is None:
        return
    pairs = [p for name in nli.SOURCES for p in nli.SOURCES[name](nli_root) if held_out(p)]
    pairs = list({(p.premise, p.hypothesis): p for p in pairs}.values())
    pairs += nli.contrastive_edits(pairs, random.Random(7), 0.5)
    out = []
    for n, p in enumerate(pairs):
        [[read]] = judge.reader.read(Claims.of([p.hypothesis]), [p.premise])
        out.append(
            {
                "source": p.source,
                "label": p.label,
                "premise": p.premise,
                "hypothesis": p.hypothesis,
                "logit": read.support.logit,
            }
        )
        if n % 500 == 0:
            print(f"nli pairs {n}/{len(pairs)} {time.perf_counter() - start:.0f}s", flush=True)
    (CACHE / "nli.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out))


def _load(name: str) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (CACHE / name).read_text().splitlines()]


def with_features(
    answers: list[dict[str, Any]], pairs: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The cached logits with the combiner's features as the judge computes them now
    (`Reader.gaps`: the lexical side is cheap, only the logits are cached)."""
    judge = _judge()
    for a in answers:
        if any("asked" not in c for c in a["claims"]):
            raise SystemExit(f"{CACHE / 'answers.jsonl'} predates Claims.asked: read it again")
        said = Claims([c["claim"] for c in a["claims"]], [c["asked"] for c in a["claims"]])
        found = judge.reader.gaps(said, a["contexts"])
        for c, (gaps, is_phrase) in zip(a["claims"], found, strict=True):
            c["x"] = features(c["logit"], gaps, phrase=is_phrase)
    for p in pairs:
        [(gaps, is_phrase)] = judge.reader.gaps(Claims.of([p["hypothesis"]]), [p["premise"]])
        p["x"] = features(p["logit"], gaps, phrase=is_phrase)
    return answers, pairs


def fit(answers: list[dict[str, Any]], pairs: list[dict[str, Any]], used: Sequence[int]) -> Array:
    """The weights (bias first) over the features ``used``, by gradient ascent on the
    likelihood (see the module docstring), each source weighing the same."""
    k = len(used)
    theta = np.zeros(k + 1)
    groups: dict[str, list[dict[str, Any]]] = {}
    for a in answers:
        groups.setdefault(a["set"].split("-")[0], []).append(a)
    xs = [np.array([[1.0, *(c["x"][i] for i in used)] for c in a["claims"]]) for a in answers]
    ys = [a["faithful"] for a in answers]
    share = {g: 1.0 / len(v) for g, v in groups.items()}
    ws = [share[a["set"].split("-")[0]] for a in answers]
    px = np.array([[1.0, *(p["x"][i] for i in used)] for p in pairs])
    py = np.array([p["label"] for p in pairs], dtype=float)
    pw = 1.0 / len(pairs)
    for _ in range(4000):
        grad = np.zeros(k + 1)
        for x, y, w in zip(xs, ys, ws, strict=True):
            s = 1.0 / (1.0 + np.exp(-(x @ theta)))
            if y:
                g = 1.0 - s
            else:
                p = float(np.prod(s))
                g = -(p / max(1.0 - p, 1e-9)) * (1.0 - s)
            grad += w * (g @ x)
        s = 1.0 / (1.0 + np.exp(-(px @ theta)))
        grad += pw * ((py - s) @ px)
        grad -= 1e-3 * np.r_[0.0, theta[1:]]
        theta += 0.5 * grad
    return theta


def answer_scores(a: dict[str, Any], theta: Array, used: Sequence[int]) -> tuple[float, float]:
    """(faithfulness: the share of claims at p >= 0.5, graded: the mean p)."""
    ps = [
        1.0
        / (
            1.0
            + np.exp(-(theta[0] + sum(t * c["x"][i] for t, i in zip(theta[1:], used, strict=True))))
        )
        for c in a["claims"]
    ]
    return sum(p >= 0.5 for p in ps) / len(ps), float(np.mean(ps))


SETS: dict[str, Callable[[dict[str, Any]], bool]] = {
    "HaluEval QA dev, report half": lambda a: a["set"] == "halueval-report",
    "realistic holdout": lambda a: a["set"] == "realistic-holdout",
    "realistic all": lambda a: a["set"].startswith("realistic"),
    "demo": lambda a: a["set"] == "demo",
}


def report(theta: Array, used: Sequence[int], answers: list[dict[str, Any]]) -> dict[str, float]:
    out = {}
    for name, chosen in SETS.items():
        rows = [a for a in answers if chosen(a) and not a["evasive"]]
        scored = [answer_scores(a, theta, used) for a in rows]
        ok = [a["faithful"] for a in rows]
        out[f"{name}: graded"] = auroc([s[1] for s in scored], [bool(y) for y in ok])
        out[f"{name}: faithfulness"] = auroc([s[0] for s in scored], [bool(y) for y in ok])
        out[f"{name}: overlap"] = auroc([a["overlap"] for a in rows], [bool(y) for y in ok])
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["features", "fit", "report"])
    parser.add_argument(
        "--answers-only", action="store_true", help="features: keep the NLI pairs' features"
    )
    dev = "features: default under $RAGMON_DEV_DATA"
    parser.add_argument("--halueval", type=Path, metavar="PATH", help=dev)
    parser.add_argument("--nli", type=Path, metavar="PATH", help=dev)
    args = parser.parse_args(argv)
    if args.command == "features":
        halueval = devdata.require(devdata.HALUEVAL, args.halueval)
        nli_root = None if args.answers_only else devdata.require(devdata.NLI, args.nli)
        read_features(halueval, nli_root)
        return 0
    answers, pairs = with_features(_load("answers.jsonl"), _load("nli.jsonl"))
    fitted = [a for a in answers if a["fit"]]
    full = list(range(len(FEATURES)))
    if args.command == "fit":
        theta = fit(fitted, pairs, full)
        data = {
            "features": list(FEATURES),
            "weights": [round(float(w), 6) for w in theta[1:]],
            "bias": round(float(theta[0]), 6),
            "fitted_on": "NLI held-out fiftieth and its edits, HaluEval QA dev fit half, "
            "realistic tune",
        }
        raw = (json.dumps(data, indent=2) + "\n").encode()
        COMBINER_PATH.write_bytes(raw)
        print(json.dumps(data), hashlib.sha256(raw).hexdigest())
        Combiner.load(digest=None)
        return 0
    ablations = {
        "model logit only": [0],
        "lexical only": [1, 2, 3, 4, 5],
        "logit + missing words": [0, 1],
        "+ missing numbers": [0, 1, 2],
        "+ missing names": [0, 1, 2, 3],
        "+ phrase": [0, 1, 2, 3, 4],
        "+ copied (all)": full,
    }
    table: dict[str, dict[str, float]] = {}
    for name, used in ablations.items():
        table[name] = report(fit(fitted, pairs, used), used, answers)
    sets = list(SETS)
    print("| features | " + " | ".join(f"{n}: graded | {n}: faithfulness" for n in sets) + " |")
    print("|---|" + "---:|" * (2 * len(sets)))
    for name, row in table.items():
        cells = [f"{row[f'{n}: graded']:.3f} | {row[f'{n}: faithfulness']:.3f}" for n in sets]
        print(f"| {name} | " + " | ".join(cells) + " |")
    cells = [f"{row[f'{n}: overlap']:.3f} | –" for n in sets]
    print("| word overlap (baseline) | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
