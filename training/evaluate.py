"""The support model on labelled answers it was not fitted on, next to word overlap.

    python -m training.evaluate --weights PATH [--halueval-qa ../shared/data/halueval_qa_dev.jsonl]

The baselines (the local judge's rules, word overlap) are bench/detection.py's rows.

Per data set: AUROC of the answer's weakest statement's probability (graded) and of
faithfulness (the share of statements at >= 0.5, the metric as the judge reports it),
the share of faithful answers flagged (faithfulness < 0.5) and of hallucinated ones
flagged. Evasive answers are left out (both judges leave
them unscoreable before any support decision). This is a development view; the
benchmark of record is bench/detection.py, through the judge.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.statements import statements
from monitor.text import evasive
from training import model as support_model
from training.evidence import Passage, measure
from training.fit import auroc

ROOT = Path(__file__).resolve().parents[1]
SHARED_QA = ROOT.parent / "shared" / "data" / "halueval_qa_dev.jsonl"


def _records(name: str, qa: Path) -> list[tuple[dict[str, object], bool]]:
    if name == "halueval-qa":
        rows = [json.loads(x) for x in qa.read_text().splitlines() if x.strip()]
        return [(r, bool(r["label_hallucinated"])) for r in rows]
    if name == "demo":
        path = ROOT / "monitor" / "demo" / "traffic.jsonl"
        rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        labels = {"faithful": False, "hallucinated": True}
        return [
            (r, labels[r["metadata"]["label"]]) for r in rows if r["metadata"]["label"] in labels
        ]
    split = name.removeprefix("realistic-")
    rows = [
        json.loads(x)
        for x in (ROOT / "bench" / "data" / "realistic.jsonl").read_text().splitlines()
    ]
    return [
        (r, bool(r["label_hallucinated"]))
        for r in rows
        if r["split"] == split and r["category"] != "evasive"
    ]


def _texts(record: dict[str, object]) -> list[str]:
    contexts = record["retrieved_contexts"]
    assert isinstance(contexts, list)
    return [c if isinstance(c, str) else str(c["text"]) for c in contexts]


def evaluate(
    name: str, model: support_model.SupportModel, embedder: MiniLMEmbedder, qa: Path
) -> dict[str, float]:
    graded, faith, labels = [], [], []
    for record, hallucinated in _records(name, qa):
        response = str(record["response"])
        if evasive.noncommittal(response):
            continue
        said = statements(response) or [response]
        found = measure(said, Passage.of(_texts(record)), embedder)
        p = model.probabilities(np.stack([e.as_array() for e in found]))
        graded.append(float(p.min()))
        faith.append(float(np.mean(p >= 0.5)))
        labels.append(not hallucinated)
    y = np.asarray(labels)
    f = np.asarray(faith)
    return {
        "n": len(y),
        "auroc_graded": auroc(graded, labels),
        "auroc_faithfulness": auroc(faith, labels),
        "faithful_flagged": float(np.mean(f[y] < 0.5)) if y.any() else float("nan"),
        "hallucinated_flagged": float(np.mean(f[~y] < 0.5)) if (~y).any() else float("nan"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights", type=Path, required=True, metavar="PATH")
    parser.add_argument("--halueval-qa", type=Path, default=SHARED_QA)
    parser.add_argument("--datasets", default="realistic-tune,realistic-holdout,halueval-qa,demo")
    args = parser.parse_args(argv)
    model = support_model.load(args.weights)
    embedder = MiniLMEmbedder(threads=2)
    print(
        f"{'data set':<20} {'n':>4} {'graded':>7} {'faith.':>7} "
        f"{'faithful fl.':>12} {'halluc. fl.':>11}"
    )
    for name in args.datasets.split(","):
        r = evaluate(name, model, embedder, args.halueval_qa)
        print(
            f"{name:<20} {r['n']:>4} {r['auroc_graded']:>7.3f} {r['auroc_faithfulness']:>7.3f} "
            f"{r['faithful_flagged']:>12.0%} {r['hallucinated_flagged']:>11.0%}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
