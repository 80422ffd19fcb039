"""The trainer's transfer check reads a labelled answer as the local judge reads it: the same
claims, as the answer wrote them, against the same windows, scored by the same rule. The
shipped models, no stand-ins."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from monitor.judges.local import entailment
from monitor.judges.local.claims import as_read, claims
from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.entailment import reads_joined
from monitor.judges.local.judge import LocalJudge
from training.windows import SURE, Windows, best, flat, texts, weakest

REALISTIC = Path(__file__).resolve().parents[2] / "bench" / "data" / "realistic.jsonl"
#: a phrase answer read after its question (129, 014), numbers and durations the contexts
#: write otherwise (028: "two weeks" for "14 days", read as written; 129),
#: claims no window alone supports (028, 040, 132: the joined pair then decides 132's)
DIGITS = re.compile(r"\d+")
RECORDS = ("realistic-014", "realistic-028", "realistic-040", "realistic-129", "realistic-132")


def _records() -> list[dict[str, Any]]:
    rows = [json.loads(x) for x in REALISTIC.read_text().splitlines() if x.strip()]
    return [r for r in rows if r["id"] in RECORDS]


def test_the_trainer_stops_at_the_judges_sure_window() -> None:
    assert SURE == entailment.SURE
    assert best([3.5, 5.0], []) == 3.5 and best([2.0, 5.0], []) == 5.0


def test_the_transfer_check_reads_each_answer_as_the_judge_does() -> None:
    judge = LocalJudge(embedder=MiniLMEmbedder(threads=1), threads=1)
    model = judge.support_model
    records = _records()
    assert len(records) == len(RECORDS)
    readings = []
    for r in records:
        cut = claims(r["response"], r["user_input"])
        [found] = judge.reader.read(cut, texts(r["retrieved_contexts"]))
        readings.append(found)
    read_by_judge = model.pairs  # a fresh model: every pair the judge read, once

    windows = Windows(judge)
    found_by_training = [windows.candidates(r) for r in records]
    needed: set[tuple[str, str]] = set()
    for read in found_by_training:
        for c in read:
            for w in c["windows"]:  # in order, up to the first sure window
                needed.add((c["statement"], w))
                if model.logits([(c["statement"], w)]).tolist()[0] >= SURE:
                    break
            else:
                alone = model.logits([(c["statement"], w) for w in c["windows"]]).tolist()
                if alone and reads_joined(alone):
                    needed |= {(c["statement"], w) for w in c["joined"]}
    model.logits(sorted(needed))
    assert model.pairs == read_by_judge, "the training code reads pairs the judge never reads"
    assert len(needed) == read_by_judge, "the judge reads pairs the training code leaves out"

    phrase = joined = figures = 0
    for r, read, found in zip(records, found_by_training, readings, strict=True):
        assert len(read) == len(found)
        for c, reading in zip(read, found, strict=True):
            alone = model.logits([(c["statement"], w) for w in c["windows"]]).tolist()
            both = model.logits([(c["statement"], w) for w in c["joined"]]).tolist()
            assert best(alone, both) == reading.support.logit
            joined += best(alone, both) > max(alone)
        # the trainer's own path: every pair read in one call, the weakest claim kept
        z = model.logits(flat(read)).tolist()
        assert weakest(read, z) == min(f.support.logit for f in found)
        # the model reads each claim as the answer wrote it (a phrase answer after the turn
        # it answers), a spelled number the contexts state in figures in their figures
        # ("two" → "2") and nothing else rewritten
        cut = claims(r["response"], r["user_input"])
        assert len(cut.said) == len(read)
        for c, claim, asked in zip(read, cut.said, cut.asked, strict=True):
            if c["statement"] != as_read(claim, asked):
                figures += 1
                assert DIGITS.sub("", c["statement"]) != c["statement"]
                assert DIGITS.findall(c["statement"]) != DIGITS.findall(claim)
            phrase += asked is not None
    assert phrase and joined and figures  # each way the judge reads is exercised


def test_best_joins_only_where_the_judge_does() -> None:
    assert best([1.5, -2.0], [4.0]) == 1.5  # a window alone supports: no join read
    assert best([-1.0, -2.0], [0.5]) == 0.5
    assert best([-1.0, -2.0], [-3.0]) == -1.0
    assert best([-1.0], []) == -1.0
    assert best([], []) == -math.inf
    # windows are read in order up to the first sure one (the best by words, then the nearest)
    assert best([1.0, SURE + 0.5, 7.0], []) == SURE + 0.5
    assert best([-1.0, -2.0, 2.0], [9.0]) == 2.0
    assert best([-1.0, -2.0, -0.5], [9.0]) == 9.0
    for alone in ([0.0], [-0.01], [-3.0, 2.0], [-3.0, -0.5]):
        assert (best(alone, [9.0]) == 9.0) == reads_joined(alone)
