"""The support model's training mix: every source loads, labels map, nothing evaluated leaks in."""

from __future__ import annotations

import random
from collections import Counter
from pathlib import Path

import pytest

from scripts import devdata
from tests.support.devdata import dev_data
from training import nli
from training.cross_encoder import DEFAULT_MIX, batches, held_out


@pytest.fixture(autouse=True)
def pairs_root() -> Path:
    """The licensed NLI sets' folder (every test here skips without it)."""
    return dev_data(
        devdata.NLI,
        "the support model's training pairs are not",
        "only retraining the support model reads them; a clone does not hold them",
        f", one folder per source: {', '.join(nli.FOLDERS)} (training/README.md, where each "
        "comes from)",
    )


@pytest.mark.parametrize(
    ("source", "at_least"),
    [
        ("vitaminc_real", 30000),
        ("vitaminc_synthetic", 20000),
        ("fever_symmetric", 1000),
        ("fever_adversarial", 700),
        ("fever-nli", 18000),
        ("mnli", 19000),
        ("factcheck-gpt", 3000),
        ("wice", 600),
        ("snli", 19000),
    ],
)
def test_each_source_loads_with_both_labels(source: str, at_least: int, pairs_root: Path) -> None:
    pairs = nli.SOURCES[source](pairs_root)
    assert len(pairs) >= at_least
    labels = Counter(p.label for p in pairs)
    assert set(labels) == {0, 1}
    assert all(p.premise.strip() and p.hypothesis.strip() for p in pairs)
    # FEVER's tokenised brackets are turned back into text
    assert not any("-LRB-" in p.premise or "-LRB-" in p.hypothesis for p in pairs)


def test_only_full_support_is_supported(pairs_root: Path) -> None:
    stances = {p.hypothesis: p.label for p in nli.factcheck_gpt(pairs_root)}
    assert 0 < sum(stances.values()) < len(stances)
    wice = nli.wice(pairs_root)
    # partially supported claims are the "added claim" case: not supported
    assert sum(p.label for p in wice) < len(wice) / 2


def test_the_default_mix_names_known_sources_and_no_evaluation_set() -> None:
    weights = dict(x.split("=") for x in DEFAULT_MIX.split(","))
    assert set(weights) <= set(nli.SOURCES)
    for name in nli.SOURCES:
        assert "halueval" not in name and "realistic" not in name and "demo" not in name


def test_held_out_claims_never_train(pairs_root: Path) -> None:
    pairs = nli.vitaminc(pairs_root, "vitaminc_real")
    dev = {p.hypothesis for p in pairs if held_out(p)}
    train = {p.hypothesis for p in pairs if not held_out(p)}
    assert dev and not dev & train
    assert 0.01 < len(dev) / len(dev | train) < 0.04


def test_contrastive_edits_change_one_fact_against_the_same_premise() -> None:
    pairs = [
        nli.Pair("The park opened in 1998 and has 40 rides.", "The park opened in 1998.", 1, "x"),
        nli.Pair("Ada Lovelace met Charles Babbage in London.", "Ada met Babbage.", 0, "x"),
    ]
    made = nli.contrastive_edits(pairs, random.Random(3), share=1.0)
    assert len(made) == 1
    [edit] = made
    assert edit.label == 0 and edit.premise == pairs[0].premise
    assert edit.hypothesis != pairs[0].hypothesis
    assert edit.hypothesis.replace("1998", "") != edit.hypothesis or "40" in edit.hypothesis


def test_batches_cover_every_pair_once() -> None:
    pairs = [nli.Pair("p" * (k % 7 + 1), "h", k % 2, "x") for k in range(100)]
    found = batches(pairs, 16, random.Random(1))
    assert sorted(i for b in found for i in b) == list(range(100))
    assert all(len(b) <= 16 for b in found)
