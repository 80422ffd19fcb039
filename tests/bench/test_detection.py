"""The benchmarks' harness (data sets, word overlap) and the one detection bench."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from bench import detection
from bench.harness import (
    EVASIVE,
    FAITHFUL,
    HALLUCINATED,
    OTHER,
    alternating,
    contexts,
    load_dataset,
    overlap,
    swap_figure,
)
from scripts import devdata
from tests.support.devdata import dev_data

FIGURES = re.compile(r"\d+(?:,\d{3})*(?:\.\d+)?")


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


def test_a_swapped_figure_is_one_the_contexts_state_for_something_else() -> None:
    texts = ["The Basic plan costs $10 a month.", "The Pro plan costs $20 a month."]
    assert swap_figure("The Basic plan costs $10 a month.", texts) == (
        "The Basic plan costs $20 a month."
    )
    assert swap_figure("It was founded in 1990.", texts) is None  # no year to swap in


def test_the_long_answers_split_by_conversation_and_their_slices_pair_each_answer() -> None:
    path = dev_data(
        devdata.LONG, "no long-answer file", "the benches' dev data; a clone does not hold it"
    )
    long = load_dataset("long", long=path)
    faithful = [i for i in long if i.kind == FAITHFUL]
    assert len(faithful) == 285 and {i.kind for i in long} == {FAITHFUL, HALLUCINATED}
    halves: dict[str, set[bool]] = {}
    for i in long:  # an answer and its twins ("~edit", "~added") share their conversation
        conversation = str(i.record["id"]).split("~")[0].rsplit("-", 1)[0]
        halves.setdefault(conversation, set()).add(bool(i.record["fit"]))
    assert all(len(h) == 1 for h in halves.values()) and {True, False} == set().union(
        *halves.values()
    )
    fit, report = load_dataset("long-fit", long=path), load_dataset("long-report", long=path)
    assert len(fit) + len(report) == len(long)
    assert all(i.record["fit"] for i in fit) and not any(i.record["fit"] for i in report)
    swaps = load_dataset("other-subject", long=path)
    by_id = {str(i.record["id"]): i for i in swaps}
    twins = [i for i in swaps if i.kind == HALLUCINATED]
    assert twins and len(twins) * 2 == len(swaps)
    for twin in twins:
        original = by_id[str(twin.record["id"]).removesuffix("-swap")]
        assert original.kind == FAITHFUL and twin.category == original.category
        before, after = str(original.record["response"]), str(twin.record["response"])
        assert before != after and len(before.split()) == len(after.split())
        [new] = list(Counter(FIGURES.findall(after)) - Counter(FIGURES.findall(before)))
        assert any(new in FIGURES.findall(c) for c in contexts(twin.record))  # stated there
    dashes = load_dataset("em-dash", long=path)
    assert all("\u2014" in str(i.record["response"]) for i in dashes)
    assert {i.kind for i in dashes} == {FAITHFUL, HALLUCINATED}


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


def test_a_set_whose_dev_data_is_not_there_stops_the_command_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    absent = tmp_path / "absent.jsonl"
    with pytest.raises(SystemExit) as stopped:
        load_dataset("long-report", long=absent)
    assert stopped.value.code == 2
    [line] = capsys.readouterr().err.splitlines()
    assert line.endswith(
        f": no long-answer set at {absent}: pass --long PATH or set {devdata.VARIABLE} to a "
        "folder holding data/long_faithful_rag.jsonl"
    )


def test_the_default_run_leaves_out_the_sets_whose_dev_data_is_not_there(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(devdata.VARIABLE, str(tmp_path))  # a folder without the files
    assert detection.main(["--detectors", "overlap", "--limit", "4"]) == 0
    captured = capsys.readouterr()
    assert (
        f"leaving out halueval, halueval-unfitted: no HaluEval QA dev set at "
        f"{tmp_path / 'data' / 'halueval_qa_dev.jsonl'}: pass --halueval PATH"
    ) in captured.err
    cells = [line.strip("| ").split(" | ") for line in captured.out.splitlines()]
    rows = [c[0] for c in cells if len(c) > 1 and c[1] == "word overlap"]
    assert rows == ["realistic-tune", "realistic-holdout", "demo"]
