"""What both judges said about a backlog answer: which flagged it, the queue's order by it, and
each judge's flag precision from the reviewers' verdicts (issue 42, item 5)."""

from __future__ import annotations

from typing import Any

import pytest

from monitor.backlog.calibration import (
    MIN_JUDGE_VERDICTS,
    Cell,
    JudgePrecision,
    judge_precision,
)
from monitor.backlog.reviews import VerdictInput
from monitor.backlog.rows import JudgeFlags, judge_flags
from monitor.commands.backlog import calibration_lines
from monitor.metrics.faithfulness import HALLUCINATION_PROBABILITY, LOCAL_FLAGGED
from monitor.records import ScoredRecord
from monitor.sinks.backlog import BacklogSink
from tests.fixtures.postgres import BacklogFactory
from tests.support.backlog import scored


def judged(
    rid: str,
    *,
    probability: float | None = None,
    local_flagged: bool | None = None,
    judge: str = "llm",
    faithfulness: float = 0.2,
) -> ScoredRecord:
    """A record ``judge`` scored; an LLM judge's with the local screen's reading beside it."""
    details: dict[str, Any] = {"statements": [{"statement": f"answer {rid}", "verdict": 0}]}
    if probability is not None:
        details[HALLUCINATION_PROBABILITY] = probability
    if local_flagged is not None:
        details[LOCAL_FLAGGED] = local_flagged
    record = scored(
        rid, f"question {rid}", faithfulness=faithfulness, response=f"answer {rid}", details=details
    )
    for result in record.results.values():
        result.judge = judge
    return record


def test_judge_flags_read_the_verdict_and_the_local_screen() -> None:
    screened = {"faithfulness": {LOCAL_FLAGGED: True}}
    assert judge_flags("llm", ["hallucination"], screened) == JudgeFlags(llm=True, local=True)
    assert judge_flags("llm", ["hallucination"], {}) == JudgeFlags(llm=True, local=False)
    assert judge_flags("llm", ["control"], screened) == JudgeFlags(llm=False, local=True)
    # the local judge's own answer: its flag is its hallucination reason, never the screen's
    assert judge_flags("local", ["hallucination"], {}) == JudgeFlags(llm=False, local=True)
    assert judge_flags("local", ["control"], screened) == JudgeFlags()
    # more than one judge scored it: whose flag it is is not known
    assert judge_flags(None, ["hallucination"], {}) == JudgeFlags()
    assert JudgeFlags(llm=True, local=True).describe() == "both judges"
    assert JudgeFlags(local=True).describe() == "the local judge"
    assert JudgeFlags().as_json() == {"llm": False, "local": False, "both": False}


@pytest.mark.postgres
async def test_the_queue_puts_answers_both_judges_flagged_first_keyset_paged(
    backlog: BacklogSink,
) -> None:
    records = [
        judged("both-low", probability=0.3, local_flagged=True),
        judged("llm-high", probability=0.95, local_flagged=False),
        judged("none-given"),  # not screened: no probability, no local flag
        judged("both-high", probability=0.9, local_flagged=True),
        judged("local-own", probability=0.99, judge="local"),
    ]
    for record in records:
        await backlog.write([record])
    seen: list[tuple[str, str]] = []
    after = None
    pages = 0
    while True:
        page = await backlog.store.queue(limit=2, after=after)
        seen += [(i.id, i.flagged_by()) for i in page]
        pages += 1
        if len(page) < 2:
            break
        after = (page[-1].sort_key("risk"), page[-1].id)
    assert seen == [
        ("both-high", "both"),
        ("both-low", "both"),
        ("local-own", "local"),
        ("llm-high", "LLM"),
        ("none-given", "LLM"),
    ]
    assert pages == 3
    # the other orders ignore the flags
    newest = await backlog.store.queue(order="newest")
    assert [i.id for i in newest] == [r.interaction.id for r in reversed(records)]


@pytest.mark.postgres
async def test_flag_precision_per_judge_and_of_both_from_the_verdicts(
    make_backlog: BacklogFactory,
) -> None:
    async with make_backlog(control_share=1.0) as sink:
        both = [judged(f"b{i}", probability=0.9, local_flagged=True) for i in range(10)]
        llm_only = [judged(f"l{i}", probability=0.2, local_flagged=False) for i in range(2)]
        # answers only the local judge flagged: the LLM judge passed them, so they are queued
        # as control answers (the control share is 1 here)
        local_only = [
            judged(f"c{i}", probability=0.9, local_flagged=True, faithfulness=1.0) for i in range(3)
        ]
        own = judged("own", probability=0.95, judge="local")
        await sink.write([*both, *llm_only, *local_only, own])
        unreviewed = await sink.store.calibration()
        assert {k: (v.reviewed, v.precision) for k, v in unreviewed.judge_precision.items()} == {
            "llm": (0, None),
            "local": (0, None),
            "both": (0, None),
        }
        assert calibration_lines(unreviewed)[-3:] == [
            "flag precision, the LLM judge:         not enough verdicts (0 of 10 needed)",
            "flag precision, the local judge:       not enough verdicts (0 of 10 needed)",
            "flag precision, both judges:           not enough verdicts (0 of 10 needed)",
        ]

        async def review(record: ScoredRecord, reason: str, verdict: str) -> None:
            await sink.store.review(
                record.interaction.id,
                version=1,
                reviewer="ana",
                verdicts=[VerdictInput(reason, verdict)],
            )

        for i, record in enumerate(both):
            await review(record, "hallucination", "confirmed" if i < 9 else "false_alarm")
        for record in llm_only:
            await review(record, "hallucination", "false_alarm")
        for i, record in enumerate(local_only):
            await review(record, "control", "confirmed" if i == 0 else "false_alarm")
        await review(own, "hallucination", "confirmed")
        reviewed = await sink.store.calibration()
        found = reviewed.judge_precision

    # every answer weighs 1/0.1 (the control share is 1): the shares are plain counts
    assert_precision(found["llm"], 12, 9 / 12)
    assert_precision(found["local"], 14, 11 / 14)
    assert_precision(found["both"], 10, 9 / 10)
    # `backlog stats` prints each with its interval and verdicts
    assert calibration_lines(reviewed)[-3].startswith(
        "flag precision, the LLM judge:         75.0%  (95% interval "
    )
    assert calibration_lines(reviewed)[-1].endswith(", 10 reviewed)")
    for precision in found.values():
        assert precision.lower is not None and precision.upper is not None
        assert precision.precision is not None
        assert precision.lower <= precision.precision <= precision.upper


def assert_precision(found: JudgePrecision, reviewed: int, share: float) -> None:
    assert found.reviewed == reviewed
    assert found.precision == pytest.approx(share)


def cell(n: int, verdict: str | None, *, llm: bool, local: bool, weight: float = 1.0) -> Cell:
    reasons = ("hallucination",) if llm else ("control",)
    verdicts = {} if verdict is None else {reasons[0]: verdict}
    return Cell(
        reasons,
        verdicts,
        n,
        n * weight,
        n * weight**2,
        n * weight**2,
        llm_flagged=llm,
        local_flagged=local,
    )


def test_judge_precision_needs_enough_verdicts_and_weighs_each_answer() -> None:
    few = judge_precision([cell(MIN_JUDGE_VERDICTS - 1, "confirmed", llm=True, local=True)])
    # below the minimum: the count, and no figure (never a 0 that means "unknown")
    assert few["llm"].reviewed == MIN_JUDGE_VERDICTS - 1 and few["llm"].precision is None
    assert few["llm"].as_json()["needed"] == MIN_JUDGE_VERDICTS
    # unsure and unreviewed answers count for nothing; weights decide the share
    cells = [
        cell(10, "confirmed", llm=True, local=True),
        cell(10, "false_alarm", llm=True, local=False),
        cell(5, "unsure", llm=True, local=True),
        cell(7, None, llm=True, local=False),
        cell(10, "false_alarm", llm=False, local=True, weight=3.0),
    ]
    found = judge_precision(cells)
    assert_precision(found["llm"], 20, 0.5)
    assert_precision(found["both"], 10, 1.0)
    # the local judge's control answers stand for 3 interactions each
    assert_precision(found["local"], 20, 10 / 40)
    assert found["both"].lower is not None and found["both"].lower < 1.0
    assert found["both"].upper == pytest.approx(1.0)
