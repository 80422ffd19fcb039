"""The local judge's run time: a verdict does not depend on what is scored beside it."""

from __future__ import annotations

import asyncio
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from monitor.judges.local import entailment
from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.entailment import SupportModel
from monitor.judges.local.judge import LocalJudge, cpu_budget, default_threads
from monitor.judges.local.windows import TOP
from monitor.records import Interaction
from monitor.scoring import Scorer
from tests.support.local_judge import TOPIC_CLAIMS, TOPIC_FACTS, FixedLogit
from tests.support.records import validate_record

TRAFFIC = Path(__file__).resolve().parents[3] / "monitor" / "demo" / "traffic.jsonl"

#: a short pair, and a long one that would pad it (and widen its activations' range)
SHORT = ("Refunds go to the original card.", "Refunds are issued to the original card.")
LONG = (
    "The Pro plan costs $20 a month and includes priority support, single sign-on and audit "
    "logs for every workspace.",
    " ".join(
        [
            "The Pro plan costs $20 per month, billed yearly, and adds priority support.",
            "Single sign-on and audit logs are part of the Enterprise plan only.",
            "Workspaces on the Basic plan keep 90 days of history; Pro keeps a year.",
        ]
        * 3
    ),
)


def _records(n: int) -> list[Interaction]:
    rows: list[dict[str, Any]] = []
    with TRAFFIC.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            if row["metadata"]["label"] in ("faithful", "hallucinated"):
                rows.append(row)
            if len(rows) == n:
                break
    fields = ("id", "user_input", "retrieved_contexts", "response")
    return [validate_record({k: r[k] for k in fields}) for r in rows]


def _model() -> SupportModel:
    return SupportModel(MiniLMEmbedder(cache_size=0), cache_size=0)


def test_a_pairs_logit_is_the_same_alone_and_beside_a_long_pair() -> None:
    model = _model()
    alone = model.logits([SHORT])
    beside = model.logits([LONG, SHORT, LONG])
    assert beside[1] == alone[0]  # bit for bit
    assert beside[0] == beside[2] == model.logits([LONG])[0]


def test_a_claims_probabilities_do_not_depend_on_concurrent_records() -> None:
    """The same claims decided by a fresh judge alone, and by another one while eight
    threads decide other records' claims (the model's cache is shared between them),
    among them a neighbour that reads the same pairs beside a long one first."""
    records = _records(24)
    target = records[0]
    contexts = list(target.context_texts)
    neighbour = validate_record(
        {
            "id": "neighbour",
            "user_input": target.user_input,
            "retrieved_contexts": [*contexts, LONG[1]],
            "response": f"{target.response} {LONG[0]}",
        }
    )
    others = [neighbour, *records[1:]]

    def probabilities(judge: LocalJudge, record: Interaction) -> list[tuple[float, float]]:
        said = judge.claims(record.response, record.user_input)
        found = judge.reader.decide(said, list(record.context_texts))[0]
        return [(d.probability, d.model_probability) for d in found]

    alone = probabilities(LocalJudge(), target)
    assert alone and contexts

    busy = LocalJudge()
    probabilities(busy, neighbour)  # its pairs, the target's among them, now in the cache
    with ThreadPoolExecutor(8) as pool:
        # the other records first, so the cache holds their pairs when the target is read
        jobs = [pool.submit(probabilities, busy, r) for r in others]
        mid = pool.submit(probabilities, busy, target)
        jobs += [pool.submit(probabilities, busy, r) for r in reversed(others)]
        beside = mid.result()
        for job in jobs:
            job.result()
    assert beside == alone
    assert probabilities(busy, target) == alone  # now from the cache


async def test_a_record_scores_the_same_alone_and_among_64_at_once() -> None:
    """Through the Scorer, as ``rag-monitor score`` runs it (64 records at once)."""
    records = _records(40)
    metrics = ["faithfulness", "context_utility"]
    target = records[7]

    alone = await Scorer(LocalJudge(), metrics).score(target)

    scorer = Scorer(LocalJudge(), metrics)
    crowd = [*records, *records[:24]]  # the target twice, among 63 others
    scored = await asyncio.gather(*(scorer.score(r) for r in crowd))
    for got in (scored[7], scored[40 + 7]):
        for name in metrics:
            assert got.results[name].score == alone.results[name].score
            assert got.results[name].details == alone.results[name].details


def test_the_embedders_vectors_do_not_depend_on_the_batch() -> None:
    embedder = MiniLMEmbedder(cache_size=0)
    alone = embedder.embed([SHORT[1]])
    beside = embedder.embed([LONG[1], SHORT[1]])
    assert np.array_equal(beside[1], alone[0])


def test_the_next_window_is_read_only_when_the_nearest_is_not_sure() -> None:
    contexts, said = TOPIC_FACTS, TOPIC_CLAIMS
    sure = FixedLogit(entailment.SURE)
    sure.support(said, contexts)
    # the best window of each by its words, nothing more, and no vector embedded
    assert sure.seen == [(s, w) for s, w in zip(said, sure.first(said, contexts), strict=True)]
    assert sure.embedder.encoded == 0
    unsure = FixedLogit(entailment.SURE - 0.01)
    unsure.support(said, contexts)
    # supported, not surely: that window first, then the two nearest (it is one of them)
    assert unsure.seen[: len(said)] == sure.seen
    assert len(unsure.seen) == len(said) * TOP
    assert unsure.embedder.encoded > 0
    # without the first window by words: each claim's nearest, ranked by the embedder
    off = FixedLogit(entailment.SURE)
    off.words_first = False
    off.support(said, contexts)
    assert len(off.seen) == len(said) and off.embedder.encoded > 0
    # context utility reads every nearest window: what a context gives is never left unread
    split = FixedLogit(entailment.SURE)
    split.support_by_context(said, contexts)
    assert len(split.seen) == len(said) * TOP


def test_the_judges_threads_follow_the_containers_cpu_limit(tmp_path: Path) -> None:
    cpu_max = tmp_path / "cpu.max"
    cores = len(os.sched_getaffinity(0))
    cpu_max.write_text("max 100000\n")
    assert cpu_budget(cpu_max) == cores
    cpu_max.write_text("50000 100000\n")  # limits.cpu: 500m
    assert cpu_budget(cpu_max) == 1
    cpu_max.write_text("150000 100000\n")  # 1.5 cores: two threads may run at once
    assert cpu_budget(cpu_max) == min(cores, 2)
    assert cpu_budget(tmp_path / "absent") == cores
    assert 2 <= default_threads() <= 8
    assert LocalJudge().threads == default_threads()
