"""The answer's probability: the shipped, pinned model and how it reads claims' supports."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.judges.local.answer import ANSWER_PATH, FEATURES, AnswerModel, features
from monitor.judges.local.embedder import ModelFileError


def test_the_shipped_model_is_pinned_and_loads() -> None:
    model = AnswerModel.load()
    assert len(model.weights) == len(FEATURES) and 0.5 < model.cut < 1.0
    sums = (ANSWER_PATH.parent / "SHA256SUMS").read_text(encoding="utf-8")
    assert "answer.json" in sums


def test_another_file_is_refused(tmp_path: Path) -> None:
    data = json.loads(ANSWER_PATH.read_text(encoding="utf-8"))
    changed = tmp_path / "answer.json"
    changed.write_text(json.dumps({**data, "cut": 0.5}), encoding="utf-8")
    with pytest.raises(ModelFileError, match="not the pinned file"):
        AnswerModel.load(changed)
    assert AnswerModel.load(changed, digest=None).cut == 0.5  # training and tests read any
    changed.write_text(json.dumps({**data, "features": ["weakest_logit"]}), encoding="utf-8")
    with pytest.raises(ModelFileError, match="other features"):
        AnswerModel.load(changed, digest=None)
    with pytest.raises(ModelFileError, match="missing"):
        AnswerModel.load(tmp_path / "none.json")


def test_a_weaker_claim_makes_the_answer_likelier_to_hold_an_unsupported_one() -> None:
    model = AnswerModel.load()
    supported = model.probability([0.97, 0.95, 0.96])
    one_weak = model.probability([0.97, 0.95, 0.30])
    one_invented = model.probability([0.97, 0.95, 0.001])
    assert supported < one_weak < one_invented
    assert not model.flags(supported) and model.flags(model.probability([0.0001]))


def test_features_need_a_claim() -> None:
    with pytest.raises(ValueError, match="without claims"):
        features([])
    weakest, second, mean, log_claims, _ = features([0.9])
    assert weakest == second and mean == 0.9 and log_claims == 0.0  # one claim is both
