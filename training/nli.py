"""Licensed NLI and fact-verification pairs, each mapped to supported (1) or not (0).

One loader per source folder of the NLI folder (``--nli PATH``, or ``nli/`` under
``$RAGMON_DEV_DATA``, `scripts.devdata`; its README names each source, its licence and
its label mapping). A pair is (premise, hypothesis, label,
source): the premise is the evidence, the hypothesis the claim it may support.
Only the label that means "the evidence supports the whole claim" maps to 1;
partial support, contradiction, neutral and "not enough info" map to 0, since a
monitor must flag a statement that says more than its context.

None of these is an evaluation set of this project (training/README.md names those).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench import edits

#: the folders of the NLI folder the loaders below read, one per source
FOLDERS = ("vitaminc", "docnli-fever-mnli", "factcheck-gpt", "wice", "esnli-snli")


@dataclass(frozen=True)
class Pair:
    premise: str
    hypothesis: str
    label: int
    source: str


def _jsonl(path: Path) -> Iterator[dict[str, object]]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


def _clean(text: str) -> str:
    """FEVER's tokenised Wikipedia text back to plain text (-LRB- → '(', ' , ' → ', ')."""
    for coded, plain in (("-LRB-", "("), ("-RRB-", ")"), ("-LSB-", "["), ("-RSB-", "]")):
        text = text.replace(coded, plain)
    for mark in (" ,", " .", " ;", " :", " 's", " '", " )", " %"):
        text = text.replace(mark, mark.lstrip())
    text = text.replace("( ", "(").replace("`` ", '"').replace(" ''", '"')
    return " ".join(text.split())


def vitaminc(root: Path, part: str) -> list[Pair]:
    """VitaminC (CC BY-SA 3.0): ``vitaminc_real``, ``vitaminc_synthetic``, ``fever_*``."""
    pairs = []
    for path in sorted((root / "vitaminc" / part).glob("*.jsonl")):
        for row in _jsonl(path):
            evidence, claim = str(row["evidence"]), str(row["claim"])
            pairs.append(
                Pair(_clean(evidence), _clean(claim), int(row["label"] == "SUPPORTS"), part)
            )
    return pairs


def docnli(root: Path, part: str) -> list[Pair]:
    """DocNLI's binary FEVER-NLI and MNLI (BSD-3-Clause; FEVER CC BY-SA 3.0, MNLI OANC/CC)."""
    pairs = []
    for path in sorted((root / "docnli-fever-mnli" / f"binary-{part}").glob("*.txt")):
        for line in path.read_text(encoding="utf-8").splitlines():
            label, premise, hypothesis = line.split("\t")[:3]
            pairs.append(
                Pair(_clean(premise), _clean(hypothesis), int(label == "entailment"), part.lower())
            )
    return pairs


def factcheck_gpt(root: Path) -> list[Pair]:
    """Factcheck-GPT's claim-evidence stance (Apache-2.0): real ChatGPT claims, web evidence."""
    path = root / "factcheck-gpt" / "subtasks" / "subtask3_claim_evidence_stance.jsonl"
    return [
        Pair(
            str(r["evidence"]),
            str(r["claim"]),
            int(r["stance"] == "completely-support"),
            "factcheck-gpt",
        )
        for r in _jsonl(path)
    ]


def wice(root: Path) -> list[Pair]:
    """WiCE (ODC-BY 1.0): a claim against the article sentences annotated as its evidence.

    Partially supported claims against their evidence are the "added claim" case: the
    evidence says part of the claim, not all of it (label 0).
    """
    pairs = []
    for path in sorted((root / "wice" / "data" / "entailment_retrieval" / "claim").glob("*.jsonl")):
        for r in _jsonl(path):
            sentences = r["evidence"]
            support = r["supporting_sentences"]
            assert isinstance(sentences, list) and isinstance(support, list)
            if not support:
                continue
            premise = " ".join(str(sentences[i]) for i in sorted(set(support[0])))
            pairs.append(Pair(premise, str(r["claim"]), int(r["label"] == "supported"), "wice"))
    return pairs


def snli(root: Path) -> list[Pair]:
    """e-SNLI's copy of SNLI (MIT; SNLI CC BY-SA 4.0): image captions."""
    base = root / "esnli-snli" / "dataset" / "eSNLI"
    pairs = []
    for split in ("dev", "test"):
        s1 = (base / f"s1.{split}").read_text(encoding="utf-8").splitlines()
        s2 = (base / f"s2.{split}").read_text(encoding="utf-8").splitlines()
        labels = (base / f"labels.{split}").read_text(encoding="utf-8").splitlines()
        for a, b, label in zip(s1, s2, labels, strict=True):
            pairs.append(Pair(_clean(a), _clean(b), int(label.strip() == "entailment"), "snli"))
    return pairs


def _complete(load: Callable[[Path], list[Pair]]) -> Callable[[Path], list[Pair]]:
    """``load``, without the few pairs whose evidence or claim is empty."""
    return lambda root: [p for p in load(root) if p.premise.strip() and p.hypothesis.strip()]


SOURCES: dict[str, Callable[[Path], list[Pair]]] = {
    "vitaminc_real": _complete(lambda r: vitaminc(r, "vitaminc_real")),
    "vitaminc_synthetic": _complete(lambda r: vitaminc(r, "vitaminc_synthetic")),
    "fever_symmetric": _complete(lambda r: vitaminc(r, "fever_symmetric")),
    "fever_adversarial": _complete(lambda r: vitaminc(r, "fever_adversarial")),
    "fever-nli": _complete(lambda r: docnli(r, "FEVER-NLI")),
    "mnli": _complete(lambda r: docnli(r, "MNLI")),
    "factcheck-gpt": _complete(factcheck_gpt),
    "wice": _complete(wice),
    "snli": _complete(snli),
}


def contrastive_edits(pairs: list[Pair], rng: random.Random, share: float) -> list[Pair]:
    """For a share of the supported pairs, the hypothesis with one number or name changed.

    The edit takes the replacement from the premise where it can, so both sides of
    the new pair keep every word but the one fact (what VitaminC teaches, made from
    the mix's own supported claims; `bench.edits`).
    """
    made = []
    for p in pairs:
        if p.label != 1 or rng.random() >= share:
            continue
        edit = edits.change_number(p.hypothesis, [p.premise], rng) or edits.change_name(
            p.hypothesis, [p.premise], rng
        )
        if edit is not None:
            made.append(Pair(p.premise, edit.edited, 0, f"edit-{edit.kind}"))
    return made


def load(root: Path, weights: dict[str, float], rng: random.Random) -> list[Pair]:
    """Each source's pairs, repeated (``weight`` > 1) or subsampled (< 1) by its weight."""
    out: list[Pair] = []
    for name, weight in weights.items():
        found = SOURCES[name](root)
        whole, part = int(weight), weight - int(weight)
        out.extend(found * whole)
        if part:
            out.extend(rng.sample(found, round(len(found) * part)))
    return out
