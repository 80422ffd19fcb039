#!/usr/bin/env python3
"""Write bench/data/realistic.jsonl, the hand-written labelled set of bench/detection.py.

Every scenario (`DATA`, bench/data/realistic_scenarios.yaml) is a question with its
retrieved chunks (the relevant ones and some the retriever fetched by mistake) and
several answers written the way an LLM RAG service answers: fluent paraphrase, each
answer with its category. The label follows from the category:
``faithful_paraphrase``, ``multi_chunk`` and ``evasive`` answers are not hallucinated,
every other category is.

The split is by scenario, so the chunks of a holdout record are never seen while
tuning: scenarios are shuffled with ``SEED`` and taken into ``holdout`` in that
order while no category goes over 40 % of its records. ``SEED`` is the first of
1..999 that leaves every category within 3 points of 40 % (picked from the counts
alone, before any judge had scored the set). Running the script twice
writes the same bytes; ``--check`` fails when the committed file differs.

Usage: ``python3 bench/data/make_realistic.py [--check]``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SEED = 21
HOLDOUT_SHARE = 0.4
OUT = Path(__file__).resolve().parent / "realistic.jsonl"

FAITHFUL = frozenset({"faithful_paraphrase", "multi_chunk", "evasive"})
CATEGORIES = (
    "faithful_paraphrase",
    "multi_chunk",
    "swapped_entity",
    "swapped_number",
    "swapped_date",
    "swapped_role",
    "negation",
    "added_claim",
    "evasive",
)


@dataclass(frozen=True)
class Answer:
    category: str
    response: str
    #: a different question for this answer (same chunks); None: the scenario's
    question: str | None = None


@dataclass(frozen=True)
class Scenario:
    domain: str
    question: str
    contexts: tuple[str, ...]
    answers: tuple[Answer, ...]


#: the scenarios, as data (its opening comment says what each one holds)
DATA = Path(__file__).resolve().parent / "realistic_scenarios.yaml"


def _scenario(entry: dict[str, Any]) -> Scenario:
    """A `Scenario` from its entry in `DATA`."""
    answers = tuple(
        Answer(a["category"], a["response"], a.get("question")) for a in entry["answers"]
    )
    return Scenario(entry["domain"], entry["question"], tuple(entry["contexts"]), answers)


SCENARIOS: tuple[Scenario, ...] = tuple(
    _scenario(entry) for entry in yaml.safe_load(DATA.read_text(encoding="utf-8"))["scenarios"]
)


def records() -> list[dict[str, object]]:
    """Every answer as a record, with its split."""
    rows: list[tuple[int, dict[str, object]]] = []
    n = 0
    for index, scenario in enumerate(SCENARIOS):
        for answer in scenario.answers:
            if answer.category not in CATEGORIES:
                raise ValueError(f"scenario {index + 1}: unknown category {answer.category!r}")
            n += 1
            rows.append(
                (
                    index,
                    {
                        "id": f"realistic-{n:03d}",
                        "user_input": answer.question or scenario.question,
                        "retrieved_contexts": list(scenario.contexts),
                        "response": answer.response,
                        "label_hallucinated": answer.category not in FAITHFUL,
                        "category": answer.category,
                        "domain": scenario.domain,
                    },
                )
            )
    holdout = _holdout_scenarios()
    out = []
    for index, row in rows:
        row["split"] = "holdout" if index in holdout else "tune"
        out.append(row)
    return out


def _holdout_scenarios() -> set[int]:
    """Scenarios shuffled with SEED, taken while no category goes over its 40 %."""
    total = Counter(a.category for s in SCENARIOS for a in s.answers)
    cap = {c: HOLDOUT_SHARE * n for c, n in total.items()}
    taken: Counter[str] = Counter()
    order = list(range(len(SCENARIOS)))
    random.Random(SEED).shuffle(order)
    holdout = set()
    for index in order:
        counts = Counter(a.category for a in SCENARIOS[index].answers)
        if all(taken[c] + k <= cap[c] + 0.5 for c, k in counts.items()):
            holdout.add(index)
            taken.update(counts)
    return holdout


def render() -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="fail when the file is out of date")
    args = parser.parse_args()
    text = render()
    if args.check:
        if OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is out of date: run bench/data/make_realistic.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    counts = Counter((r["category"], r["split"]) for r in records())
    print(f"{'category':<22}{'tune':>6}{'holdout':>9}")
    for c in CATEGORIES:
        print(f"{c:<22}{counts[c, 'tune']:>6}{counts[c, 'holdout']:>9}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
