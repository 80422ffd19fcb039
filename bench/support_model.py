"""The support model on labelled answers it was never trained or tuned on, beside the rules.

    python bench/support_model.py [--halueval ../shared/data/halueval_qa_dev.jsonl]
        [--model-dir DIR]

Each answer goes through the learned local judge as the sidecar reads it (its
statements, a phrase answer after its question, each statement against its
nearest evidence windows: `LearnedJudge.screen`), and through the rule judge
(`LocalJudge.screen`) in the same run. Per data set: AUROC of the graded score (the
weakest statement's support probability) and of faithfulness (the share of
statements at >= 0.5, the metric as the judge reports it), the share of faithful
answers flagged (faithfulness < 0.5) and of hallucinated ones, next to word
overlap (the share of the answer's content words the contexts hold), all in
the same run. Evasive answers are left out (the judge makes them unscoreable
before any support decision). Then the realistic set per category (mean weakest
probability, and how many are flagged), and the three answers the local judge's
word rules got wrong.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for path in (ROOT, ROOT / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from detection import overlap  # noqa: E402
from ranking import auroc  # noqa: E402

from monitor.judges.local.embedder import MiniLMEmbedder  # noqa: E402
from monitor.judges.local.entailment import SupportModel  # noqa: E402
from monitor.judges.local.judge import LocalJudge  # noqa: E402
from monitor.judges.local.learned import LearnedJudge  # noqa: E402
from monitor.text import evasive  # noqa: E402

HALUEVAL = ROOT.parent / "shared" / "data" / "halueval_qa_dev.jsonl"

#: The local judge's old failures (context, answer, supported?).
EXAMPLES = [
    (
        "We accept credit cards and SEPA direct debit. Orders ship within two days. "
        "PayPal is not accepted.",
        "Sorry, we don't take PayPal. You can pay by credit card or by SEPA direct debit.",
        True,
    ),
    (
        "Local admin rights are not granted to employees. Software is installed by IT.",
        "You can ask for local admin rights.",
        False,
    ),
    (
        "Full-time employees are entitled to 25 days of paid annual leave.",
        "If you work full time you get twenty-five paid days off each year.",
        True,
    ),
    (
        "Full-time employees are entitled to 25 days of paid annual leave.",
        "If you work full time you get thirty paid days off each year.",
        False,
    ),
]


def _texts(record: dict[str, Any]) -> list[str]:
    return [c if isinstance(c, str) else str(c["text"]) for c in record["retrieved_contexts"]]


def records(name: str, halueval: Path) -> list[tuple[dict[str, Any], bool, str]]:
    """(record, hallucinated, category) of one data set."""
    if name == "halueval-qa":
        rows = [json.loads(x) for x in halueval.read_text().splitlines() if x.strip()]
        return [(r, bool(r["label_hallucinated"]), "") for r in rows]
    if name == "demo":
        path = ROOT / "monitor" / "demo" / "traffic.jsonl"
        rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
        labels = {"faithful": False, "hallucinated": True}
        return [
            (r, labels[r["metadata"]["label"]], r["metadata"]["label"])
            for r in rows
            if r["metadata"]["label"] in labels
        ]
    split = name.removeprefix("realistic-")
    rows = [json.loads(x) for x in (ROOT / "bench" / "data" / "realistic.jsonl").open()]
    return [
        (r, bool(r["label_hallucinated"]), r["category"])
        for r in rows
        if split in ("all", r["split"]) and r["category"] != "evasive"
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--halueval", type=Path, default=HALUEVAL)
    parser.add_argument(
        "--model-dir",
        type=Path,
        help="a model exported elsewhere (`python -m training.export --out DIR`; its SHA256SUMS "
        "are trusted) instead of the shipped one",
    )
    parser.add_argument(
        "--datasets", default="realistic-all,realistic-tune,realistic-holdout,halueval-qa,demo"
    )
    args = parser.parse_args()
    model = LearnedJudge()
    if args.model_dir is not None:
        sums = (args.model_dir / "SHA256SUMS").read_text().split()
        pinned = dict(zip(sums[1::2], sums[::2], strict=True))
        model = LearnedJudge(
            model=SupportModel(MiniLMEmbedder(), model_dir=args.model_dir, pinned=pinned)
        )
    model.support_model.warm_up()
    rules = LocalJudge()
    print(f"CPU: {_cpu_name()}\n")
    print(
        "| data set | judge | answers | AUROC graded | AUROC faithfulness | faithful flagged "
        "| hallucinated flagged | word overlap AUROC | CPU ms / answer |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    per_category: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for name in args.datasets.split(","):
        for label, judge in (("rules", rules), ("model", model)):
            graded, faith, words, ok = [], [], [], []
            started = time.process_time()
            for record, hallucinated, category in records(name, args.halueval):
                response = str(record["response"])
                if evasive.noncommittal(response):
                    continue
                contexts = _texts(record)
                if isinstance(judge, LearnedJudge):
                    question = str(record.get("user_input") or "")
                    screen = judge.screen(contexts, response, question)
                else:
                    screen = judge.screen(contexts, response)
                faithfulness = 0.0 if math.isnan(screen.faithfulness) else screen.faithfulness
                graded.append(1.0 - screen.risk)
                faith.append(faithfulness)
                share = overlap(record)
                words.append(1.0 if share is None else share)
                ok.append(not hallucinated)
                if name == "realistic-all" and judge is model:
                    per_category[category].append((1.0 - screen.risk, faithfulness))
            ms = (time.process_time() - started) * 1000 / max(1, len(ok))
            fl = [f < 0.5 for f in faith]
            faithful_flagged = sum(f for f, y in zip(fl, ok, strict=True) if y) / max(1, sum(ok))
            caught = sum(f for f, y in zip(fl, ok, strict=True) if not y) / max(
                1, len(ok) - sum(ok)
            )
            print(
                f"| {name} | {label} | {len(ok)} | {auroc(graded, ok):.3f} "
                f"| {auroc(faith, ok):.3f} | {faithful_flagged:.0%} | {caught:.0%} "
                f"| {auroc(words, ok):.3f} | {ms:.0f} |",
                flush=True,
            )
    if per_category:
        print("\n| realistic category (model) | answers | mean weakest probability | flagged |")
        print("|---|---:|---:|---:|")
        for category, found in sorted(per_category.items()):
            mean = sum(p for p, _ in found) / len(found)
            flagged = sum(f < 0.5 for _, f in found)
            print(f"| {category} | {len(found)} | {mean:.3f} | {flagged}/{len(found)} |")
    print("\n| context | answer | should be | model: support probability | rules: faithfulness |")
    print("|---|---|---|---:|---:|")
    for context, answer, supported in EXAMPLES:
        p = 1.0 - model.screen([context], answer).risk
        word = "supported" if supported else "not supported"
        said = rules.screen([context], answer).faithfulness
        print(f"| {context} | {answer} | {word} | {p:.3f} | {said:.2f} |")
    return 0


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


if __name__ == "__main__":
    sys.exit(main())
