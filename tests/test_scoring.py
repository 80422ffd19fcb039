"""monitor.scoring: the Scorer against the real judge server over HTTP (and an in-process judge)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pytest

from bench import judge_tokens
from monitor.config import Settings
from monitor.flags import HALLUCINATION, NONCOMMITTAL, flag_reasons, is_hallucination
from monitor.judges import BUILTIN_MODEL, Embedded, Judged, OutT, Prompt, model_name
from monitor.judges.factory import build_judge
from monitor.judges.llm import OpenAIJudge
from monitor.judges.steps import GROUNDING, QUESTIONS, STATEMENTS, USEFULNESS, VERIFY
from monitor.records import Interaction, ScoredRecord, Usage
from monitor.scoring import (
    ALL_METRICS,
    OFFLINE_METRICS,
    ONLINE_METRICS,
    Scorer,
    UnknownMetric,
    fuses_grounding,
    parse_metric_names,
)
from tests.support import answers
from tests.support.judge_server import AnswerFn, Fault, JudgeServer

RECORDS = [
    {
        "id": "leave",
        "user_input": "How many vacation days do employees get?",
        "retrieved_contexts": [
            "Employees accrue 25 days of paid vacation per year.",
            "The office is closed on public holidays.",
            "Unused vacation days expire on 31 March of the following year.",
            "Parking permits are issued by the facilities team.",
        ],
        "response": "Employees accrue 25 days of paid vacation per year. "
        "Unused days can be sold back to the company.",
        "reference": "Employees get 25 days of paid vacation per year; "
        "unused vacation days expire on 31 March.",
    },
    {
        "id": "vpn",
        "user_input": "How do I connect to the VPN from home?",
        "retrieved_contexts": [
            "Install the WireGuard client and import the profile from the IT portal.",
            "The VPN requires multi-factor authentication with the company app.",
            "Printers on floor 3 use the guest network.",
        ],
        "response": "Install the WireGuard client and import the profile from the IT portal. "
        "Approve the login in the company app.",
        "reference": "Install WireGuard, import the profile from the IT portal "
        "and confirm multi-factor authentication in the company app.",
    },
    {
        "id": "evasive",
        "user_input": "What is the maximum hotel rate in Paris?",
        "retrieved_contexts": ["Hotel rates are capped per city; see the travel annex."],
        "response": "I don't know the exact rate; I'm not sure it is published.",
    },
    {
        "id": "empty-contexts",
        "user_input": "Who approves expense claims?",
        "retrieved_contexts": [],
        "response": "Your line manager approves expense claims.",
        "reference": "The line manager approves expense claims.",
    },
]


def interactions() -> list[Interaction]:
    return [Interaction.model_validate(r) for r in RECORDS]


def same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def test_metric_names() -> None:
    assert set(ALL_METRICS) == set(ONLINE_METRICS) | set(OFFLINE_METRICS)
    assert len(ALL_METRICS) == 9
    assert parse_metric_names(" faithfulness,context_recall,faithfulness ") == [
        "faithfulness",
        "context_recall",
    ]
    with pytest.raises(UnknownMetric, match="'faithfullness'.*known: faithfulness"):
        parse_metric_names("faithfullness,context_recall")


async def test_unknown_metric_is_a_clear_error(http_judge: OpenAIJudge) -> None:
    with pytest.raises(UnknownMetric, match="answer_relevancy"):
        Scorer(http_judge, ["faithfulness", "answer_relevancy"])
    with pytest.raises(ValueError, match="no metric"):
        Scorer(http_judge, [])


async def test_constructor_makes_no_call(
    judge_server: JudgeServer, http_judge: OpenAIJudge
) -> None:
    Scorer(http_judge, ALL_METRICS)
    stats = judge_server.stats.snapshot()
    assert stats.chat_requests == 0 and stats.embedding_requests == 0


async def test_frugal_and_per_call_agree_and_frugal_is_cheaper(
    judge_server: JudgeServer, http_judge: OpenAIJudge
) -> None:
    usage = {}
    scores = {}
    for pattern in ("per_call", "frugal"):
        judge_server.stats.reset()
        scorer = Scorer(http_judge, ALL_METRICS, call_pattern=pattern)
        records = [await scorer.score(i) for i in interactions()]
        total = Usage()
        for record in records:
            total.add(record.usage)
            assert record.error is None
        stats = judge_server.stats.snapshot()
        assert stats.calls + stats.embedding_requests == total.calls
        assert stats.prompt_tokens + stats.embedding_tokens == total.prompt_tokens
        assert stats.completion_tokens == total.completion_tokens
        usage[pattern] = total
        scores[pattern] = [{m: r.score for m, r in rec.results.items()} for rec in records]
    for per_call, frugal in zip(scores["per_call"], scores["frugal"], strict=True):
        assert per_call.keys() == frugal.keys()
        assert all(same(per_call[m], frugal[m]) for m in per_call), (per_call, frugal)
    assert usage["frugal"].calls < usage["per_call"].calls
    assert usage["frugal"].prompt_tokens < usage["per_call"].prompt_tokens
    assert usage["frugal"].total_tokens < usage["per_call"].total_tokens


async def test_frugal_batches_contexts_and_questions(
    judge_server: JudgeServer, http_judge: OpenAIJudge
) -> None:
    record = interactions()[0]  # four contexts
    await Scorer(http_judge, ONLINE_METRICS, call_pattern="per_call").score(record)
    per_call = judge_server.stats.snapshot()
    assert {step: s.requests for step, s in per_call.steps.items()} == {
        STATEMENTS: 1,
        VERIFY: 1,
        USEFULNESS: 4,
        QUESTIONS: 3,
    }
    judge_server.stats.reset()
    await Scorer(http_judge, ["context_utility", "response_relevancy"]).score(record)
    frugal = judge_server.stats.snapshot()
    assert {step: s.requests for step, s in frugal.steps.items()} == {USEFULNESS: 1, QUESTIONS: 1}
    assert frugal.steps[QUESTIONS].choices == 3


async def test_frugal_fuses_faithfulness_and_context_utility(
    judge_server: JudgeServer, http_judge: OpenAIJudge
) -> None:
    record = interactions()[0]
    scored = await Scorer(http_judge, ONLINE_METRICS, call_pattern="frugal").score(record)
    frugal = judge_server.stats.snapshot()
    # statements, verify and usefulness in one request; the questions stay apart
    assert {step: s.requests for step, s in frugal.steps.items()} == {GROUNDING: 1, QUESTIONS: 1}
    assert frugal.embedding_requests == 1
    assert scored.usage.calls == 3
    # the shared grounding call is billed once, to the metric that asked first
    assert scored.usage_by_metric["faithfulness"].calls == 1
    assert "context_utility" not in scored.usage_by_metric
    billed = Usage()
    for usage in scored.usage_by_metric.values():
        billed.add(usage)
    assert billed == scored.usage
    assert scored.results["faithfulness"].score == 0.5
    assert [s["verdict"] for s in scored.results["faithfulness"].details["statements"]] == [1, 0]
    assert [c["verdict"] for c in scored.results["context_utility"].details["contexts"]] == [
        1,
        0,
        0,
        0,
    ]


async def test_no_fusion_without_both_metrics_an_llm_judge_contexts_or_a_response(
    judge_server: JudgeServer, http_judge: OpenAIJudge
) -> None:
    assert fuses_grounding("llm", "frugal", ["context_utility", "faithfulness"])
    assert not fuses_grounding("llm", "per_call", ONLINE_METRICS)
    assert not fuses_grounding("local", "frugal", ONLINE_METRICS)
    assert not fuses_grounding("llm", "frugal", ["faithfulness", "response_relevancy"])
    # noise_sensitivity shares the response's statements with faithfulness: no fusion
    assert not fuses_grounding("llm", "frugal", [*ONLINE_METRICS, "noise_sensitivity"])

    no_contexts, empty_response = interactions()[3], interactions()[0]
    empty_response = empty_response.model_copy(update={"response": " "})
    scorer = Scorer(http_judge, ["faithfulness", "context_utility"])
    for record in (no_contexts, empty_response):
        await scorer.score(record)
    assert GROUNDING not in judge_server.stats.snapshot().steps

    judge = OneChoiceJudge()  # kind "local": answers only the basic steps
    await Scorer(judge, ONLINE_METRICS).score(interactions()[0])
    assert judge.steps.count(GROUNDING) == 0
    assert judge.steps.count(USEFULNESS) == 1


async def test_fusion_keeps_offline_metrics_sharing_statements(
    judge_server: JudgeServer, http_judge: OpenAIJudge
) -> None:
    record = interactions()[0]
    metrics = [*ONLINE_METRICS, "noise_sensitivity", "context_recall"]
    await Scorer(http_judge, metrics).score(record)
    steps = judge_server.stats.snapshot().steps
    assert GROUNDING not in steps
    # the response once (faithfulness + noise_sensitivity), the reference once
    assert steps[STATEMENTS].requests == 2
    judge_server.stats.reset()
    scored = await Scorer(http_judge, [*ONLINE_METRICS, "context_recall"]).score(record)
    steps = judge_server.stats.snapshot().steps
    assert steps[GROUNDING].requests == 1
    assert steps[STATEMENTS].requests == 1  # the reference, for context_recall
    assert scored.error is None


@dataclass
class Outcomes:
    """A judge observer that keeps the outcome of every request."""

    seen: list[str] = field(default_factory=list)

    def on_request(self, outcome: str, seconds: float) -> None:
        self.seen.append(outcome)

    def on_tokens(self, metric: str, prompt_tokens: int, completion_tokens: int) -> None:
        return None


def _mismatched_grounding(step: str, inputs: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """The default answers, but the fused step's answer is not of its schema."""
    if step == GROUNDING:
        return [{"statements": "all supported", "contexts": []} for _ in range(n)]
    return answers.answer(step, inputs, n)


def _short_grounding(step: str, inputs: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """The default answers, but the fused step comes back with one context verdict too few
    (what a small model did: one verdict where five were expected)."""
    out = answers.answer(step, inputs, n)
    if step == GROUNDING:
        for one in out:
            one["contexts"] = one["contexts"][:-1]
    return out


async def _score_online(
    server: JudgeServer, record: Interaction, outcomes: Outcomes, *, retries: int
) -> ScoredRecord:
    """``record``'s online metrics by an LLM judge on ``server``, its outcomes counted."""
    judge = OpenAIJudge(
        base_url=server.base_url,
        model="gpt-4o-mini",
        embedding_model="text-embedding-3-small",
        max_retries=retries,
        observer=outcomes,
    )
    try:
        return await Scorer(judge, ONLINE_METRICS).score(record)
    finally:
        await judge.aclose()


@pytest.mark.parametrize(
    "malformed", [_short_grounding, _mismatched_grounding], ids=["wrong-count", "not-schema"]
)
async def test_malformed_grounding_falls_back_to_the_basic_steps(
    judge_server: JudgeServer, http_judge: OpenAIJudge, malformed: AnswerFn
) -> None:
    record = interactions()[0]
    basic = await Scorer(http_judge, ONLINE_METRICS, fuse_grounding=False).score(record)
    outcomes = Outcomes()
    with JudgeServer(answer=malformed) as server:
        scored = await _score_online(server, record, outcomes, retries=0)
        steps = {step: s.requests for step, s in server.stats.snapshot().steps.items()}
    # both metrics scored, as the basic steps score them; nothing failed
    assert scored.error is None
    for name in ONLINE_METRICS:
        assert scored.results[name].error is None
        assert scored.results[name].score == basic.results[name].score
    assert scored.results["faithfulness"].score == 0.5
    assert scored.results["faithfulness"].details == basic.results["faithfulness"].details
    # the fused step once (not re-asked), then each basic step once
    assert steps == {GROUNDING: 1, STATEMENTS: 1, VERIFY: 1, USEFULNESS: 1, QUESTIONS: 1}
    # counted: judge_requests_total{outcome="fallback_steps"}
    assert outcomes.seen.count("fallback_steps") == 1
    assert "invalid_output" not in outcomes.seen


async def test_a_looping_judge_costs_a_record_at_most_three_capped_answers() -> None:
    """A small model that restates its input until it is stopped, asked to split the answer
    (fused or not): the fused answer is cut at its cap and falls back, the statements answer
    is cut, re-asked once, cut again; the record fails as ``truncated``, the rest scores."""
    record = interactions()[0]
    outcomes = Outcomes()
    with JudgeServer() as server:
        server.loop_steps = {GROUNDING, STATEMENTS}
        scored = await _score_online(server, record, outcomes, retries=0)
        stats = server.stats.snapshot()
    # every chat request carried a cap; each cut-off answer stopped at its own
    assert stats.caps and all(name == "max_tokens" for _, name, _ in stats.caps)
    cap = {step: sent or 0 for step, _, sent in stats.caps if step is not None}
    cut = [(step, tokens) for step, tokens, why in stats.finished if why == "length"]
    assert [step for step, _ in cut] == [GROUNDING, STATEMENTS, STATEMENTS]
    assert all(0 < tokens <= cap[step] for step, tokens in cut)
    spent = sum(tokens for _, tokens in cut)
    assert spent <= cap[GROUNDING] + 2 * cap[STATEMENTS]
    # uncapped, each of the three would have run on until the stand-in's context was full
    assert spent < server.context_tokens // 10
    assert outcomes.seen.count("truncated") == 3
    # the record's reason says the answer was cut off; the other metrics scored
    faithfulness = scored.results["faithfulness"]
    assert scored.error == "truncated" == faithfulness.error
    assert math.isnan(faithfulness.score)
    assert faithfulness.details["detail"] == (
        f"step statements: cut off at its cap of {cap[STATEMENTS]} tokens (after one re-ask)"
    )
    assert scored.results["context_utility"].error is None
    assert scored.results["response_relevancy"].error is None


async def test_a_record_too_long_for_the_judges_context_keeps_the_servers_words() -> None:
    record = interactions()[0]
    outcomes = Outcomes()
    with JudgeServer() as server:
        server.context_tokens = 60  # less than any of this record's prompts
        scored = await _score_online(server, record, outcomes, retries=2)
        stats = server.stats.snapshot()
    assert scored.error == "too_long"
    for name in ONLINE_METRICS:
        result = scored.results[name]
        assert result.error == "too_long" and math.isnan(result.score)
        assert result.details["detail"].startswith("HTTP 400: request (")
        assert "exceeds the available context size (60 tokens)" in result.details["detail"]
    # each step asked once: not retried, not sent again as json_object, no fallback
    assert stats.response_formats == ["json_schema"] * 2
    assert sorted(stats.steps) == [GROUNDING, QUESTIONS]
    assert outcomes.seen == ["too_long"] * 2


async def test_a_judge_that_ignores_pinned_lengths_still_falls_back() -> None:
    """The count is checked by `ground` too: a judge other than the LLM judge may not."""
    judge = OneChoiceJudge(kind="llm", short_grounding=True)
    scored = await Scorer(judge, ONLINE_METRICS).score(interactions()[0])
    assert scored.error is None
    assert scored.results["faithfulness"].score == 0.5
    assert judge.steps.count(GROUNDING) == 1 and judge.steps.count(USEFULNESS) == 1


async def test_grounding_timeout_is_not_a_fallback(judge_server: JudgeServer) -> None:
    """Only a malformed answer falls back: a timed-out server is not sent three more requests."""
    judge = OpenAIJudge(
        base_url=judge_server.base_url,
        model="gpt-4o-mini",
        embedding_model="text-embedding-3-small",
        timeout_seconds=5.0,
        step_timeouts={GROUNDING: 0.3},
        max_retries=0,
    )
    judge_server.inject(Fault.SLOW, seconds=3)
    try:
        scored = await Scorer(judge, ["faithfulness", "context_utility"]).score(interactions()[0])
    finally:
        await judge.aclose()
    assert scored.results["faithfulness"].error == "timeout"
    assert scored.results["context_utility"].error == "timeout"
    assert set(judge_server.stats.snapshot().steps) == {GROUNDING}


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "basic"])
async def test_noncommittal_answer_has_no_faithfulness_and_is_flagged(
    judge_server: JudgeServer, http_judge: OpenAIJudge, fuse: bool
) -> None:
    evasive = interactions()[0].model_copy(
        update={"response": "I'm not sure about that. I'd suggest checking with HR."}
    )
    scorer = Scorer(http_judge, ONLINE_METRICS, fuse_grounding=fuse)
    record = await scorer.score(evasive)
    result = record.results["faithfulness"]
    assert math.isnan(result.score) and result.error is None
    assert result.details == {"reason": "noncommittal answer", "noncommittal": True}
    assert record.output_line()["scores"]["faithfulness"] is None  # null, never 0
    assert is_hallucination(record, {}) is None
    assert flag_reasons(record, {}).count(NONCOMMITTAL) == 1
    assert HALLUCINATION not in flag_reasons(record, {})
    steps = judge_server.stats.snapshot().steps
    assert VERIFY not in steps  # nothing to verify in an answer that asserts nothing
    assert (GROUNDING in steps) is fuse
    # faithfulness alone (relevancy not scored) still flags it
    alone = await Scorer(http_judge, ["faithfulness"]).score(evasive)
    assert flag_reasons(alone, {}) == [NONCOMMITTAL]


@pytest.mark.parametrize("fuse", [True, False], ids=["fused", "basic"])
async def test_an_evasion_the_judge_misses_is_noncommittal_by_the_shared_rule(
    judge_server: JudgeServer, http_judge: OpenAIJudge, fuse: bool
) -> None:
    """One rule for both judges (`monitor.text.evasive`): an answer that only defers is
    unscoreable even when the LLM judge would turn it into statements, as small models do."""
    response = "I don't have details on how that works. Please check with the billing team."
    # the test judge does not see this evasion: it would return one statement, not noncommittal
    said = answers.answer(STATEMENTS, {"question": None, "text": response}, 1)[0]
    assert said["noncommittal"] == 0 and said["statements"]
    evasive = interactions()[0].model_copy(update={"response": response})
    record = await Scorer(http_judge, ["faithfulness"], fuse_grounding=fuse).score(evasive)
    result = record.results["faithfulness"]
    assert math.isnan(result.score) and result.error is None
    assert result.details == {"reason": "noncommittal answer", "noncommittal": True}
    assert flag_reasons(record, {}) == [NONCOMMITTAL]
    assert judge_server.stats.snapshot().steps == {}  # decided before any judge call


async def test_factual_correctness_reasons_name_the_side_checked(
    judge_server: JudgeServer, http_judge: OpenAIJudge
) -> None:
    record = interactions()[0]  # one response claim not in the reference, and vice versa
    result = (await Scorer(http_judge, ["factual_correctness"]).score(record)).results[
        "factual_correctness"
    ]
    forward = [c for c in result.details["response_claims"] if c["verdict"] == 0]
    backward = [c for c in result.details["reference_claims"] if c["verdict"] == 0]
    assert forward and backward
    assert all(c["reason"].startswith("not in the reference: ") for c in forward)
    assert all(c["reason"].startswith("not in the response: ") for c in backward)
    assert not any("context" in c["reason"] for c in forward + backward)
    faithfulness = await Scorer(http_judge, ["faithfulness"], fuse_grounding=False).score(record)
    reasons = [s["reason"] for s in faithfulness.results["faithfulness"].details["statements"]]
    assert reasons[1].startswith("not in the context: ")


async def test_relevancy_details_list_the_distinct_questions(http_judge: OpenAIJudge) -> None:
    record = await Scorer(http_judge, ["response_relevancy"]).score(interactions()[0])
    details = record.results["response_relevancy"].details
    assert len(details["questions"]) == 3
    assert details["distinct_questions"] == [
        "What is Employees accrue 25 days of paid vacation per year?"
    ]
    assert details["response_as_question"] is False


async def test_every_result_names_the_judge_and_its_model(http_judge: OpenAIJudge) -> None:
    """Kind and model travel with each result to the backlog, which names them to reviewers."""
    record = await Scorer(http_judge, ["faithfulness", "context_utility"]).score(interactions()[0])
    assert {(r.judge, r.judge_model) for r in record.results.values()} == {
        ("llm", http_judge.model)
    }
    local = build_judge(Settings(), kind="local")
    try:
        record = await Scorer(local, ["faithfulness"]).score(interactions()[0])
    finally:
        await local.aclose()
    (result,) = record.results.values()
    assert (result.judge, result.judge_model) == ("local", model_name(local))


def test_a_judge_that_names_no_model_is_builtin() -> None:
    @dataclass
    class Named:
        kind: str = "local"
        model_name: str = "support-model"

    @dataclass
    class Unnamed:
        kind: str = "local"

    assert model_name(Named()) == "support-model"  # type: ignore[arg-type]
    assert model_name(Unnamed()) == BUILTIN_MODEL  # type: ignore[arg-type]


async def test_frugal_token_and_call_ratios_on_bench_records(judge_server: JudgeServer) -> None:
    """The ratios `bench.judge_tokens` reports (0.27x calls, 0.48x tokens on 60 records)."""
    bench = judge_tokens
    records = bench.generate_records(12, 7)
    per_call = await bench.score_all(judge_server, records, "per_call")
    frugal = await bench.score_all(judge_server, records, "frugal")
    for a, b in zip(per_call.records, frugal.records, strict=True):
        assert a.error is None and b.error is None
        assert all(same(a.results[m].score, b.results[m].score) for m in ONLINE_METRICS)
    calls = frugal.usage.calls / per_call.usage.calls
    tokens = frugal.usage.total_tokens / per_call.usage.total_tokens
    assert calls <= 0.30, calls
    assert tokens <= 0.50, tokens
    assert frugal.stats.steps[GROUNDING].requests == len(records)


async def test_statements_shared_between_metrics(
    judge_server: JudgeServer, http_judge: OpenAIJudge
) -> None:
    record = interactions()[0]
    metrics = [
        "faithfulness",
        "noise_sensitivity",
        "context_recall",
        "context_precision",
        "precision_at_k",
    ]
    await Scorer(http_judge, metrics, call_pattern="per_call").score(record)
    per_call = judge_server.stats.snapshot()
    judge_server.stats.reset()
    scored = await Scorer(http_judge, metrics, call_pattern="frugal").score(record)
    frugal = judge_server.stats.snapshot()
    # response decomposed once for faithfulness + noise_sensitivity; reference once for
    # context_recall + noise_sensitivity (per_call: four decompositions)
    assert per_call.steps[STATEMENTS].requests == 4
    assert frugal.steps[STATEMENTS].requests == 2
    # context_precision and precision_at_k share one usefulness call
    assert frugal.steps[USEFULNESS].requests == 1
    assert per_call.steps[USEFULNESS].requests == 8
    billed = Usage()
    for usage in scored.usage_by_metric.values():
        billed.add(usage)
    assert billed == scored.usage
    assert set(scored.usage_by_metric) <= set(metrics)


async def test_lru_cache_across_records(judge_server: JudgeServer, http_judge: OpenAIJudge) -> None:
    record = interactions()[1]
    scorer = Scorer(http_judge, ONLINE_METRICS)
    first = await scorer.score(record)
    again = await scorer.score(record)
    assert first.usage.calls > 0
    assert again.usage == Usage()
    assert scorer.cache_hits > 0
    assert {m: r.score for m, r in again.results.items()} == {
        m: r.score for m, r in first.results.items()
    }
    uncached = Scorer(http_judge, ONLINE_METRICS, cache_size=0)
    await uncached.score(record)
    assert (await uncached.score(record)).usage == first.usage
    per_call = Scorer(http_judge, ONLINE_METRICS, call_pattern="per_call")
    await per_call.score(record)
    assert (await per_call.score(record)).usage.calls > first.usage.calls


async def test_server_ignoring_n_still_gives_n_questions(
    judge_server: JudgeServer, http_judge: OpenAIJudge
) -> None:
    judge_server.ignore_n = True
    record = await Scorer(http_judge, ["response_relevancy"], relevancy_questions=4).score(
        interactions()[0]
    )
    assert len(record.results["response_relevancy"].details["questions"]) == 4
    assert judge_server.stats.snapshot().steps[QUESTIONS].requests == 4


async def test_judge_failure_is_nan_with_reason_never_zero(
    judge_server: JudgeServer, http_judge: OpenAIJudge
) -> None:
    # the first chat request (faithfulness' statements) answers garbage twice: the re-ask fails too
    judge_server.inject(Fault.INVALID_JSON, times=2)
    scorer = Scorer(http_judge, ["faithfulness"])
    record = await scorer.score(interactions()[0])
    result = record.results["faithfulness"]
    assert math.isnan(result.score)
    assert result.error == "invalid_output"
    assert record.error == "invalid_output"
    line = record.output_line()
    assert line["scores"] == {"faithfulness": None}
    assert line["error"] == "invalid_output"


async def test_one_failing_metric_leaves_the_others(judge_server: JudgeServer) -> None:
    from tests.fixtures.judge import http_judge_for

    judge = http_judge_for(judge_server)
    try:
        judge_server.inject(Fault.SERVER_ERROR, times=1, endpoint="embeddings")
        record = await Scorer(judge, ONLINE_METRICS).score(interactions()[0])
    finally:
        await judge.aclose()
    assert record.results["response_relevancy"].error == "server_error"
    assert math.isnan(record.results["response_relevancy"].score)
    assert record.results["faithfulness"].score == 0.5
    assert record.results["context_utility"].error is None
    assert record.error == "server_error"


async def test_judge_down_fails_every_metric(
    judge_server: JudgeServer, http_judge: OpenAIJudge
) -> None:
    judge_server.down("503")
    record = await Scorer(http_judge, ONLINE_METRICS).score(interactions()[0])
    assert record.error == "server_error"
    assert all(r.error == "server_error" and math.isnan(r.score) for r in record.results.values())


async def test_missing_reference_is_unscoreable_not_an_error(http_judge: OpenAIJudge) -> None:
    record = await Scorer(http_judge, ["faithfulness", *OFFLINE_METRICS]).score(interactions()[2])
    for name in OFFLINE_METRICS:
        result = record.results[name]
        assert math.isnan(result.score)
        assert result.error is None
        assert result.details == {"reason": "no reference"}
    assert record.error is None
    assert record.output_line()["scores"]["context_recall"] is None


async def test_unscoreable_cases(judge_server: JudgeServer, http_judge: OpenAIJudge) -> None:
    no_contexts = interactions()[3]
    scorer = Scorer(http_judge, ["context_utility", "context_precision", "faithfulness"])
    record = await scorer.score(no_contexts)
    assert math.isnan(record.results["context_utility"].score)
    assert record.results["context_utility"].details == {"reason": "no contexts"}
    assert math.isnan(record.results["context_precision"].score)
    # faithfulness against no context: the statement is unsupported, a real 0
    assert record.results["faithfulness"].score == 0.0
    judge_server.stats.reset()
    empty = no_contexts.model_copy(update={"response": "  "})
    record = await Scorer(http_judge, ["faithfulness"]).score(empty)
    assert math.isnan(record.results["faithfulness"].score)
    assert record.results["faithfulness"].error is None
    assert judge_server.stats.snapshot().chat_requests == 0


async def test_all_noncommittal_relevancy(http_judge: OpenAIJudge) -> None:
    record = await Scorer(http_judge, ["response_relevancy"]).score(interactions()[2])
    result = record.results["response_relevancy"]
    assert result.score == 0.0
    assert result.details["all_noncommittal"] is True
    assert all(q["noncommittal"] is True for q in result.details["questions"])
    assert NONCOMMITTAL in flag_reasons(record, {})
    committal = await Scorer(http_judge, ["response_relevancy"]).score(interactions()[0])
    assert committal.results["response_relevancy"].details["all_noncommittal"] is False
    assert committal.results["response_relevancy"].score > 0.3


async def test_results_carry_judge_kind_and_metric_order(http_judge: OpenAIJudge) -> None:
    record = await Scorer(http_judge, ["context_utility", "faithfulness"]).score(interactions()[1])
    assert list(record.results) == ["context_utility", "faithfulness"]
    assert {r.judge for r in record.results.values()} == {"llm"}
    assert list(record.output_line()["scores"]) == ["context_utility", "faithfulness"]


class OneChoiceJudge:
    """An in-process judge (no HTTP) that answers one choice per request, whatever n."""

    fuse_grounding = True
    #: a sampling judge whose server ignores n: the scorer asks again for what is missing
    varies_choices = True
    reads_metric = False

    def __init__(self, kind: str = "local", *, short_grounding: bool = False) -> None:
        self.kind = kind
        #: answer the fused step with one context verdict too few
        self.short_grounding = short_grounding
        self.requests: list[int] = []
        self.steps: list[str] = []

    async def generate(self, prompt: Prompt[OutT], n: int = 1) -> Judged[OutT]:
        self.requests.append(n)
        self.steps.append(prompt.step)
        answer = _short_grounding if self.short_grounding else answers.answer
        [value] = answer(prompt.step, prompt.inputs.model_dump(), 1)
        return Judged(values=[prompt.output.model_validate(value)], usage=Usage(calls=1))

    async def embed(self, texts: Sequence[str]) -> Embedded:
        return Embedded(vectors=answers.embed(texts), usage=Usage(calls=1))

    async def aclose(self) -> None:
        """Nothing to close: no connection, no thread."""


async def test_missing_choices_are_requested_again() -> None:
    judge = OneChoiceJudge()
    record = await Scorer(judge, ["response_relevancy"], relevancy_questions=3).score(
        interactions()[0]
    )
    assert judge.requests == [3, 2, 1]
    assert len(record.results["response_relevancy"].details["questions"]) == 3
    assert record.results["response_relevancy"].judge == "local"
    assert record.usage.calls == 4  # three generate requests and one embedding request


async def test_fusion_can_be_turned_off_on_the_judge(judge_server: JudgeServer) -> None:
    """RAG_MONITOR_JUDGE_FUSE_GROUNDING=false: the basic steps, the same scores."""
    from monitor.config import Settings
    from monitor.judges.factory import build_judge

    settings = Settings(judge_base_url=judge_server.base_url, judge_fuse_grounding=False)
    judge = build_judge(settings)
    try:
        record = await Scorer(judge, ONLINE_METRICS).score(interactions()[0])
    finally:
        await judge.aclose()
    steps = judge_server.stats.snapshot().steps
    assert GROUNDING not in steps and steps[USEFULNESS].requests == 1
    assert record.results["faithfulness"].score == 0.5
