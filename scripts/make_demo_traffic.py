#!/usr/bin/env python3
"""Generate monitor/demo/traffic.jsonl, the traffic set of `rag-monitor demo`.

Deterministic (fixed seed, no clock, no network): running it twice writes the
same bytes. Everything is invented: a small knowledge base of an imaginary
company's HR policies, IT helpdesk articles, billing terms and product
documentation (`DATA`, scripts/demo_traffic.yaml), and the templates here that
turn it into RAG interactions in the
record schema (docs/design.md, "The record"), each with a known label:

- ``faithful``      the answer restates the retrieved policy correctly, in its own
                    words as an LLM answers (paraphrase, not copied sentences);
- ``hallucinated``  the answer gets it wrong: one swapped amount, date, name or
                    product in an otherwise faithful answer, two parties' roles
                    exchanged (who gets what), every detail swapped, or an extra
                    claim found in no document;
- ``off_topic``     the answer is about something else (the retriever fetched
                    the wrong document and the model followed it, or the model
                    drifted to another topic);
- ``evasive``       the answer is noncommittal ("I don't know", "it depends").

``metadata.noisy_retrieval`` marks records whose contexts mix irrelevant
chunks in with the relevant one. Every record carries the reference answer
(``reference``) so the demo can annotate its backlog and run the offline
metrics. No PII except a few deliberate, fictitious e-mail addresses
(``example.com``) and phone numbers (the 555-01xx range) in questions, so
the demo shows redaction.

Usage: ``python3 scripts/make_demo_traffic.py [--out FILE] [--count N] [--seed S]``.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import uuid
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

SEED = 20261129
COUNT = 300
OUT = Path(__file__).resolve().parent.parent / "monitor" / "demo" / "traffic.jsonl"

#: labels in each block of 20 records (shuffled inside the block): any prefix of
#: 20·k records has exactly these proportions, so `--records 40` is still mixed.
BLOCK = ["faithful"] * 11 + ["hallucinated"] * 4 + ["off_topic"] * 2 + ["evasive"] * 3
NOISY_SHARE = 0.3

ROUTES = ("hr-policy", "it-helpdesk", "billing", "product-docs")
#: which team an evasive answer sends people to
TEAMS = {
    "hr-policy": "the People team",
    "it-helpdesk": "the IT service desk",
    "billing": "the billing team",
    "product-docs": "support",
}
MODELS = (("gpt-4o-mini-2024-07-18", 0.6), ("llama-3.1-8b-instruct", 0.4))
TENANTS = ("kestrel-internal", "tenant-eu-01", "tenant-us-02", "tenant-us-07")


@dataclass(frozen=True)
class Fact:
    """One policy or article: its chunks, how people ask about it, and answers."""

    route: str
    doc: str
    chunks: tuple[str, ...]
    questions: tuple[str, ...]
    #: for each question, the answers that address it (indexes into ``answers``)
    pairs: tuple[tuple[int, ...], ...]
    reference: str
    answers: tuple[str, ...]
    #: (true detail, invented detail): applied to an answer to make it hallucinated
    swaps: tuple[tuple[str, str], ...]
    #: a plausible claim found in no document
    invented: tuple[str, ...]
    #: two parties or slots of one answer whose roles can be exchanged ("primary" and
    #: "secondary" caregivers, "event data" and "audit logs"): who gets what, swapped
    exchanges: tuple[tuple[str, str], ...] = ()


#: the knowledge base and the phrasing the records are made of, as data (its comments say
#: what each part holds)
DATA = Path(__file__).resolve().parent / "demo_traffic.yaml"


def _fact(entry: dict[str, Any]) -> Fact:
    """A `Fact` from its entry in `DATA`."""
    return Fact(
        entry["route"],
        entry["doc"],
        tuple(entry["chunks"]),
        tuple(entry["questions"]),
        tuple(tuple(answers) for answers in entry["pairs"]),
        entry["reference"],
        tuple(entry["answers"]),
        tuple((true, invented) for true, invented in entry["swaps"]),
        tuple(entry["invented"]),
        tuple((a, b) for a, b in entry.get("exchanges", ())),
    )


_DATA = yaml.safe_load(DATA.read_text(encoding="utf-8"))
KB: tuple[Fact, ...] = tuple(_fact(entry) for entry in _DATA["facts"])
GREETINGS: tuple[str, ...] = tuple(_DATA["greetings"])
CLOSINGS: tuple[str, ...] = tuple(_DATA["closings"])
PII_PREFIXES: tuple[str, ...] = tuple(_DATA["pii_prefixes"])
EVASIVE: tuple[str, ...] = tuple(_DATA["evasive"])
OFF_TOPIC_DRIFT: tuple[str, ...] = tuple(_DATA["off_topic_drift"])


def _pick_model(rng: random.Random) -> str:
    x = rng.random()
    acc = 0.0
    for name, share in MODELS:
        acc += share
        if x < acc:
            return name
    return MODELS[-1][0]


def _hallucinate(rng: random.Random, fact: Fact, answer: str) -> str:
    """Make ``answer`` wrong the ways LLM answers go wrong, most often subtly.

    One swapped detail (an amount, a date, a name, a product) in an otherwise faithful
    answer; two parties' roles exchanged (who gets what); every checkable detail swapped;
    an invented claim added, alone or after a swapped detail.
    """
    swaps = [(t, w) for t, w in fact.swaps if _replace(answer, {t: w}) != answer]
    exchanges = [(a, b) for a, b in fact.exchanges if a in answer and b in answer]
    kinds = {"invented": 2.0}
    if swaps:
        kinds |= {"one swap": 4.0, "swap and invented": 1.0}
    if len(swaps) > 1:
        kinds["every swap"] = 1.0
    if exchanges:
        kinds["exchange"] = 8.0  # few answers name both parties: take them when they do
    kind = rng.choices(list(kinds), weights=list(kinds.values()))[0]
    if kind == "exchange":
        return _exchange(answer, *rng.choice(exchanges))
    if kind == "every swap":
        for true, wrong in swaps:
            answer = _replace(answer, {true: wrong})
        return answer
    if kind == "invented":
        return answer + " " + rng.choice(fact.invented)
    true, wrong = rng.choice(swaps)
    answer = _replace(answer, {true: wrong})
    return answer if kind == "one swap" else answer + " " + rng.choice(fact.invented)


def _exchange(text: str, a: str, b: str) -> str:
    """``text`` with ``a`` and ``b`` (or their capitalised forms) exchanged."""
    mapping = {a: b, b: a, a[:1].upper() + a[1:]: b[:1].upper() + b[1:]}
    mapping[b[:1].upper() + b[1:]] = a[:1].upper() + a[1:]
    return _replace(text, mapping)


def _replace(text: str, mapping: dict[str, str]) -> str:
    """Each key of ``mapping`` replaced where it stands alone ("6 weeks", not in "16 weeks")."""
    alternatives = "|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True))
    return re.sub(rf"(?<![\w$.,])({alternatives})(?!\w)", lambda m: mapping[m[1]], text)


def _contexts(
    rng: random.Random,
    chunks: list[tuple[str, str]],
    noise: list[tuple[str, str]],
    structured: bool,
) -> list[object]:
    items = list(chunks)
    for extra in noise:
        items.insert(rng.randint(0, len(items)), extra)
    out: list[object] = []
    score = 0.92 - rng.random() * 0.05
    for chunk_id, text in items:
        if structured:
            out.append({"text": text, "id": chunk_id, "score": round(score, 3)})
            score -= 0.04 + rng.random() * 0.06
        else:
            out.append(text)
    return out


def _chunks(fact: Fact) -> list[tuple[str, str]]:
    return [(f"{fact.doc}#{i}", text) for i, text in enumerate(fact.chunks)]


def generate(count: int = COUNT, seed: int = SEED) -> list[dict[str, object]]:
    for fact in KB:
        pairs = fact.pairs
        if len(pairs) != len(fact.questions) or not all(
            p and all(0 <= i < len(fact.answers) for i in p) for p in pairs
        ):
            raise AssertionError(f"{fact.doc}: pairs do not match its questions and answers")
    rng = random.Random(seed)
    labels: list[str] = []
    while len(labels) < count:
        block = list(BLOCK)
        rng.shuffle(block)
        labels.extend(block)
    labels = labels[:count]

    when = datetime(2026, 11, 23, 7, 58, 0, tzinfo=UTC)
    pii_slots = set(rng.sample(range(count), len(PII_PREFIXES)))
    pii = iter(PII_PREFIXES)
    records: list[dict[str, object]] = []
    for index, label in enumerate(labels):
        fact = rng.choice(KB)
        others = [f for f in KB if f is not fact]
        which = rng.randrange(len(fact.questions))
        question = fact.questions[which]
        prefix = next(pii) if index in pii_slots else rng.choice(GREETINGS)
        if prefix.endswith((", ", ": ")):
            question = question[0].lower() + question[1:]
        user_input = prefix + question + rng.choice(CLOSINGS)

        chunks = _chunks(fact)
        answer = fact.answers[rng.choice(fact.pairs[which])]
        if label == "faithful":
            response = answer
        elif label == "hallucinated":
            # its own stream: how an answer goes wrong moves no other record's draws
            response = _hallucinate(random.Random(f"{seed}:{index}"), fact, answer)
        elif label == "evasive":
            response = rng.choice(EVASIVE).format(team=TEAMS[fact.route])
        else:  # off_topic
            wrong = rng.choice([f for f in others if f.route != fact.route] or others)
            if rng.random() < 0.5:
                # the retriever fetched the wrong document and the model followed it
                chunks = _chunks(wrong)
                response = rng.choice(wrong.answers)
            else:
                # right documents, but the model drifted to another subject
                response = rng.choice(OFF_TOPIC_DRIFT + (rng.choice(wrong.answers),))

        noisy = rng.random() < NOISY_SHARE
        noise: list[tuple[str, str]] = []
        if noisy:
            present = {chunk_id.split("#")[0] for chunk_id, _ in chunks}
            candidates = [f for f in others if f.doc not in present]
            for other in rng.sample(candidates, rng.randint(1, 3)):
                i = rng.randrange(len(other.chunks))
                noise.append((f"{other.doc}#{i}", other.chunks[i]))

        structured = fact.route in ("hr-policy", "billing")
        contexts = _contexts(rng, chunks, noise, structured)

        metadata: dict[str, object] = {
            "route": fact.route,
            "model": _pick_model(rng),
            "tenant": rng.choice(TENANTS),
            "label": label,
            "noisy_retrieval": noisy,
            "source_doc": fact.doc,
        }
        bad = label != "faithful"
        x = rng.random()
        if (bad and x < 0.4) or (not bad and x < 0.03):
            metadata["feedback"] = "negative"
        elif not bad and x > 0.9:
            metadata["feedback"] = "positive"

        when += timedelta(seconds=rng.randint(3, 90))
        records.append(
            {
                "id": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "user_input": user_input,
                "retrieved_contexts": contexts,
                "response": response,
                "reference": fact.reference,
                "timestamp": when.isoformat().replace("+00:00", "Z"),
                "metadata": metadata,
            }
        )
        if label == "hallucinated" and response == answer:
            raise AssertionError(f"{fact.doc}: no detail to invent in {answer!r}")
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--count", type=int, default=COUNT)
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    records = generate(args.count, args.seed)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8", newline="\n") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    metadata = [r["metadata"] for r in records]
    labels = Counter(str(m["label"]) for m in metadata if isinstance(m, dict))
    noisy = sum(1 for m in metadata if isinstance(m, dict) and m["noisy_retrieval"])
    print(
        f"wrote {len(records)} records to {args.out}: {dict(sorted(labels.items()))}, "
        f"{noisy} with noisy retrieval"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
