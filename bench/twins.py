"""Hallucinated twins of the long faithful answers: the long-answer dev set.

``long_faithful_rag.jsonl`` (not shipped: ``--long PATH`` or ``data/`` under
``$RAGMON_DEV_DATA``, `scripts.devdata`; its README names the source and licence) holds
real RAG answers that people wrote from the passages retrieved for them, all faithful.
Each answer gets up to two hallucinated twins, made deterministically from its id:

- ``edit``: one fact of one sentence changed with the project's one-fact edits
  (`bench.edits`: a number, a name, or a negation), everything else kept;
- ``added``: one sentence added that its passages do not support: a sentence of another
  conversation's answer in the same domain, of which fewer than half the content words
  occur in this answer's passages or question (a plausible, on-topic-looking claim that
  nothing retrieved states).

The set is split by conversation (`fit_half`: a hash of the id before its last ``-``), so an
answer and its twins always fall in the same half: one half to fit on, one to report.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Sequence
from typing import Any

from bench.edits import change_name, change_negation, change_number
from monitor.judges.local.evidence import content
from monitor.text.sentences import sentences

#: an added sentence shares less than this share of its content words with the record
ADDED_OVERLAP = 0.5
#: an added sentence has at least this many content words (a fact, not a pleasantry)
ADDED_MIN_WORDS = 5


def conversation(record_id: str) -> str:
    return record_id.rsplit("-", 1)[0]


def fit_half(record: dict[str, Any]) -> bool:
    """Whether ``record`` (an answer or its twin) is in the half fitted on."""
    return hashlib.sha256(conversation(record["id"]).encode()).digest()[0] % 2 == 0


def _rng(record_id: str, salt: str) -> random.Random:
    return random.Random(hashlib.sha256(f"{salt}:{record_id}".encode()).digest())


def _edit(record: dict[str, Any]) -> tuple[str, str] | None:
    """The answer with one fact of one sentence changed, and the edit's kind."""
    contexts = list(record["retrieved_contexts"])
    rng = _rng(record["id"], "edit")
    said = sentences(record["response"])
    order = list(range(len(said)))
    rng.shuffle(order)
    for kind in rng.sample(("number", "name", "negation"), 3):
        for k in order:
            if kind == "number":
                edit = change_number(said[k], contexts, rng)
            elif kind == "name":
                edit = change_name(said[k], contexts, rng)
            else:
                edit = change_negation(said[k], rng)
            if edit is not None and edit.edited != said[k]:
                start = record["response"].find(said[k])
                if start < 0:
                    continue
                response = (
                    record["response"][:start]
                    + edit.edited
                    + record["response"][start + len(said[k]) :]
                )
                return response, f"edit_{edit.kind}"
    return None


def _added(record: dict[str, Any], donors: Sequence[dict[str, Any]]) -> str | None:
    """The answer with one sentence of another conversation's answer added."""
    rng = _rng(record["id"], "added")
    known = set(content(" ".join([record["user_input"], *record["retrieved_contexts"]])))
    mine = conversation(record["id"])
    pool = [d for d in donors if d["domain"] == record["domain"] and conversation(d["id"]) != mine]
    rng.shuffle(pool)
    for donor in pool:
        for sentence in sentences(donor["response"]):
            words = set(content(sentence))
            if (
                len(words) < ADDED_MIN_WORDS
                or not sentence[:1].isupper()
                or not sentence.rstrip().endswith(".")
            ):
                continue
            if len(words & known) / len(words) >= ADDED_OVERLAP:
                continue
            said = sentences(record["response"])
            at = rng.randint(1, len(said))
            return " ".join([*said[:at], sentence.strip(), *said[at:]])
    return None


def twins(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every faithful answer of ``rows`` (labelled ``faithful``) followed by its twins
    (labelled hallucinated, category ``edit_KIND`` or ``added``), each with ``fit``."""
    out: list[dict[str, Any]] = []
    for record in rows:
        base = {k: v for k, v in record.items() if k != "label_hallucinated"}
        out.append({**base, "label_hallucinated": False, "category": "faithful"})
        edited = _edit(record)
        if edited is not None:
            response, kind = edited
            out.append(
                {
                    **base,
                    "id": f"{record['id']}~edit",
                    "response": response,
                    "label_hallucinated": True,
                    "category": kind,
                }
            )
        added = _added(record, rows)
        if added is not None:
            out.append(
                {
                    **base,
                    "id": f"{record['id']}~added",
                    "response": added,
                    "label_hallucinated": True,
                    "category": "added",
                }
            )
    for row in out:
        row["fit"] = fit_half(row)
    return out
