"""The benchmarks' harness (data sets, word overlap) and the one detection bench."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import detection
from bench.harness import (
    EVASIVE,
    FAITHFUL,
    HALLUCINATED,
    OTHER,
    alternating,
    load_dataset,
    overlap,
)


def test_the_realistic_splits_make_the_whole_set() -> None:
    tune, holdout = load_dataset("realistic-tune"), load_dataset("realistic-holdout")
    whole = load_dataset("realistic")
    assert len(tune) + len(holdout) == len(whole) == 202
    assert {i.record["split"] for i in holdout} == {"holdout"}
    assert all(i.kind == EVASIVE for i in whole if i.category == "evasive")
    assert {i.kind for i in whole} == {FAITHFUL, HALLUCINATED, EVASIVE}


def test_the_demo_labels_come_from_the_metadata() -> None:
    items = load_dataset("demo")
    assert {i.kind for i in items} == {FAITHFUL, HALLUCINATED, EVASIVE, OTHER}
    assert all(i.category == i.record["metadata"]["label"] for i in items)


def test_a_set_taken_in_turn_holds_both_labels_from_the_start() -> None:
    items = alternating(load_dataset("realistic-holdout"))
    assert [i.kind == HALLUCINATED for i in items[:4]] == [True, False, True, False]
    assert len(items) == len(load_dataset("realistic-holdout"))


def test_word_overlap_is_the_share_of_content_words_in_the_contexts() -> None:
    contexts = ["Refunds are issued to the original card within seven days."]
    # refunds, go, original, card: "go" is in no context
    assert overlap("Refunds go to the original card.", contexts) == pytest.approx(3 / 4)
    assert overlap("Refunds are issued to the original card.", contexts) == 1.0
    assert overlap("It is.", contexts) == 1.0  # no content word: nothing unsupported


def test_the_overlap_bench_writes_its_verdicts_and_reports_them_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    prefix = tmp_path / "run"
    argv = ["--detectors", "overlap", "--datasets", "realistic-holdout", "--limit", "12"]
    assert detection.main([*argv, "--out", str(prefix)]) == 0
    first = capsys.readouterr().out
    lines = (tmp_path / "run.realistic-holdout.overlap.jsonl").read_text().splitlines()
    assert len(lines) == 12
    row = next(line for line in first.splitlines() if line.startswith("| realistic-holdout |"))
    assert "| word overlap |" in row
    assert detection.main([*argv, "--out", str(prefix), "--report"]) == 0
    again = capsys.readouterr().out
    assert row.rsplit("|", 2)[0] in again  # the same figures, bar the CPU time
