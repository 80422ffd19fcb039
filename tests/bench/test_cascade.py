"""bench.cascade's resampling on a synthetic pool: at equal expected tokens both samplers
stay unbiased and cover the truth, an informative screen brings more hallucinations per
token, a useless one none; and the label judge errs exactly where it is told to. The full
bench screens the real pools with the shipped local judge (by hand)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from bench.cascade import Endpoint, Screened, judge_pool_real, label_answer, probabilities, run
from bench.harness import FAITHFUL, HALLUCINATED, Item
from monitor.judges.steps import GROUNDING


def pool(informative: bool, n: int = 400, seed: int = 3) -> Screened:
    rng = np.random.default_rng(seed)
    labels = (rng.random(n) < 0.3).astype(float)
    if informative:
        risk = np.clip(rng.normal(np.where(labels == 1, 0.7, 0.2), 0.15), 0, 1)
    else:
        risk = rng.random(n)
    return Screened([f"a{k}" for k in range(n)], labels, risk, risk, risk, 0.1, 0.001)


def test_probabilities_spend_the_same_expected_tokens_with_a_floor() -> None:
    rng = np.random.default_rng(1)
    risk, tokens = rng.random(1000), rng.integers(300, 3000, 1000).astype(float)
    p = probabilities(risk, tokens, 0.05)
    assert float((p * tokens).sum()) == pytest.approx(0.05 * float(tokens.sum()), rel=1e-6)
    assert p.min() >= 0.005 - 1e-12 and p.max() <= 1.0
    assert p[np.argmax(risk)] > p[np.argmin(risk)]


@pytest.mark.parametrize("informative", [True, False])
def test_both_samplers_cover_the_truth_and_only_a_real_screen_pays(informative: bool) -> None:
    s = pool(informative)
    tokens = np.full(len(s.labels), 1000.0)
    tallies = run(s, tokens, s.labels.copy(), base=0.05, rate=0.05, seeds=60, population=4000)
    uniform, risk = tallies["uniform"], tallies["risk"]
    for t in (uniform, risk):
        assert t.runs == 60
        spread = float(np.std(t.bias_labels)) / np.sqrt(t.runs)
        assert abs(float(np.mean(t.bias_labels))) < 4 * spread
        assert t.cover_labels / t.runs >= 0.85  # 95 % intervals, 60 runs
        assert t.tokens / t.runs == pytest.approx(0.05 * 4000 * 1000, rel=0.1)
    ratio = risk.per_1k() / uniform.per_1k()
    if informative:
        assert ratio > 2.0
    else:
        assert 0.7 < ratio < 1.3


def test_the_label_judge_flags_the_last_claim_of_what_it_judges_hallucinated() -> None:
    answer = label_answer({"Refunds take 5 days. Amounts over $500 need sign-off.": True})
    inputs: dict[str, Any] = {
        "answer": "Refunds take 5 days. Amounts over $500 need sign-off.",
        "contexts": ["Refunds take 5 days."],
        "question": "How long do refunds take?",
    }
    (out,) = answer(GROUNDING, inputs, 1)
    assert [v["verdict"] for v in out["statements"]] == [1, 0]
    honest = label_answer({inputs["answer"]: False})
    (out,) = honest(GROUNDING, inputs, 1)
    assert [v["verdict"] for v in out["statements"]] == [1, 1]


async def test_a_real_judge_scores_each_answer_once_and_an_interrupted_run_goes_on(
    tmp_path: Path,
) -> None:
    """`--judge-url`: the scorer against an OpenAI-compatible endpoint (here the judge server
    answering from labels), each answer's verdict and tokens kept; a second run asks the
    endpoint nothing for what is kept, and only the answers not kept yet."""
    from tests.support.judge_server import JudgeServer

    texts = {
        "a": ("Refunds take 5 days.", False),
        "b": ("Refunds take 5 days. Amounts over $500 need sign-off.", True),
        "c": ("Shipping is free over $50.", False),
    }
    items = [
        Item(
            {
                "id": rid,
                "user_input": "What is the policy?",
                "retrieved_contexts": ["Refunds take 5 days. Shipping is free over $50."],
                "response": text,
            },
            HALLUCINATED if bad else FAITHFUL,
            "test",
        )
        for rid, (text, bad) in texts.items()
    ]
    labels = {text: bad for text, bad in texts.values()}
    cache = tmp_path / "judge.json"
    with JudgeServer(answer=label_answer(labels)) as server:
        endpoint = Endpoint(server.base_url, "gpt-4o-mini", cache)
        tokens, verdicts = await judge_pool_real("p", items[:2], ["a", "b"], endpoint)
        assert verdicts.tolist() == [0.0, 1.0] and (tokens > 0).all()
        asked = server.stats.snapshot().chat_requests
        tokens2, verdicts2 = await judge_pool_real("p", items, ["a", "b", "c"], endpoint)
        assert verdicts2.tolist() == [0.0, 1.0, 0.0]
        assert tokens2[:2].tolist() == tokens.tolist()
        more = server.stats.snapshot().chat_requests - asked
    assert 0 < more <= asked, "only the answer not kept was judged"
    assert set(json.loads(cache.read_text())["p/gpt-4o-mini"]) == {"a", "b", "c"}
