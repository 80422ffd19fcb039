"""OpenAIJudge against the real embedded judge server over HTTP; the judge factory."""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from pydantic import SecretStr

from monitor.config import Settings
from monitor.judges import BudgetExhausted, JudgeError, Prompt, steps
from monitor.judges.caps import answer_cap
from monitor.judges.factory import JudgeConfigError, LocalEmbedding, build_judge
from monitor.judges.llm import OpenAIJudge
from monitor.judges.wire import render_messages, strict_schema
from monitor.logging import NOISY_LOGGERS
from monitor.tokens import estimate_prompt_tokens
from tests.support import answers
from tests.support.judge_server import ContextError, Fault, JudgeServer
from tests.support.logs import captured_logs
from tests.support.prompts import statements_prompt
from tests.support.waits import wait_until

MODEL = "gpt-4o-mini"
SECRET = "sk-test-DO-NOT-LEAK-4f1c2b"


def questions_prompt() -> Prompt[steps.GeneratedQuestion]:
    return Prompt(
        step="questions",
        metric="response_relevancy",
        instruction="Generate a question the response answers.",
        inputs=steps.QuestionsInput(response="Receipts are required over $100."),
        output=steps.GeneratedQuestion,
    )


@dataclass
class Observer:
    requests: list[tuple[str, float]] = field(default_factory=list)
    tokens: list[tuple[str, int, int]] = field(default_factory=list)

    def on_request(self, outcome: str, seconds: float) -> None:
        self.requests.append((outcome, seconds))

    def on_tokens(self, metric: str, prompt_tokens: int, completion_tokens: int) -> None:
        self.tokens.append((metric, prompt_tokens, completion_tokens))

    @property
    def outcomes(self) -> list[str]:
        return [o for o, _ in self.requests]


@dataclass
class Gate:
    available: int
    reserved: list[int] = field(default_factory=list)
    reconciled: list[tuple[int, int]] = field(default_factory=list)

    def reserve(self, tokens: int) -> None:
        if tokens > self.available:
            raise BudgetExhausted(tokens, self.available)
        self.available -= tokens
        self.reserved.append(tokens)

    def reconcile(self, reserved: int, used: int) -> None:
        self.available += reserved - used
        self.reconciled.append((reserved, used))

    async def room(self, tokens: int) -> None:
        return None  # a gate that never waits: each case sees `reserve` decide at once


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer() as s:
        yield s


MakeJudge = Callable[..., OpenAIJudge]


@pytest.fixture
async def make_judge(server: JudgeServer) -> AsyncIterator[MakeJudge]:
    judges: list[OpenAIJudge] = []

    def make(**overrides: Any) -> OpenAIJudge:
        options: dict[str, Any] = {
            "base_url": server.base_url,
            "model": MODEL,
            "api_key": SecretStr(SECRET),
            "embedding_model": "test-embedding",
            "timeout_seconds": 5.0,
            "max_retries": 2,
            "concurrency": 4,
        }
        options.update(overrides)
        judge = OpenAIJudge(**options)
        judges.append(judge)
        return judge

    yield make
    for judge in judges:
        await judge.aclose()


async def test_generate_validates_and_records_usage(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    observer = Observer()
    judge = make_judge(observer=observer)
    judged = await judge.generate(statements_prompt())
    assert judged.value == steps.Statements(
        statements=["Receipts are required over $100", "Lodging always"]
    )
    stats = server.stats.snapshot()
    step = stats.steps["statements"]
    assert judged.usage.calls == 1 == stats.chat_requests
    assert judged.usage.prompt_tokens == step.prompt_tokens > 0
    assert judged.usage.completion_tokens == step.completion_tokens > 0
    assert stats.response_formats == ["json_schema"]
    assert observer.outcomes == ["ok"]
    assert observer.tokens == [("faithfulness", step.prompt_tokens, step.completion_tokens)]
    assert judge.kind == "llm"


async def test_usage_per_metric_and_kind(server: JudgeServer, make_judge: MakeJudge) -> None:
    observer = Observer()
    judge = make_judge(observer=observer)
    first = await judge.generate(statements_prompt())
    second = await judge.generate(questions_prompt(), n=3)
    by_metric = {metric: (p, c) for metric, p, c in observer.tokens}
    assert by_metric == {
        "faithfulness": (first.usage.prompt_tokens, first.usage.completion_tokens),
        "response_relevancy": (second.usage.prompt_tokens, second.usage.completion_tokens),
    }
    stats = server.stats.snapshot()
    assert stats.steps["questions"].completion_tokens == second.usage.completion_tokens
    assert stats.steps["questions"].choices == 3


@pytest.mark.parametrize("fault", [Fault.RATE_LIMIT, Fault.SERVER_ERROR])
async def test_a_retryable_failure_is_retried_once_then_succeeds(
    server: JudgeServer, make_judge: MakeJudge, fault: Fault
) -> None:
    observer = Observer()
    judge = make_judge(observer=observer, max_retries=2)
    server.inject(fault)
    judged = await judge.generate(statements_prompt())
    assert judged.value.statements
    stats = server.stats.snapshot()
    assert stats.chat_requests == 2  # one retry layer: ours (the SDK's is off)
    assert stats.faults_applied == [fault.value]
    assert judged.usage.calls == 1  # one answered request
    assert observer.outcomes == ["ok"]


def watched(make_judge: MakeJudge, available: int) -> tuple[OpenAIJudge, Observer, Gate]:
    """A judge with an observer and a budget gate of ``available`` tokens; all three."""
    observer = Observer()
    gate = Gate(available=available)
    return make_judge(observer=observer, gate=gate), observer, gate


async def statements_then_close(judge: OpenAIJudge) -> None:
    """A statements call that gets its statements; the judge is closed after, either way."""
    try:
        judged = await judge.generate(statements_prompt())
    finally:
        await judge.aclose()
    assert judged.value.statements


async def fails(
    server: JudgeServer, make_judge: MakeJudge, fault: Fault, times: int, **settings: Any
) -> tuple[JudgeError, Observer, OpenAIJudge]:
    """A statements call whose requests meet ``fault`` ``times`` in a row, on a judge made
    with ``settings``: the error it fails with, what the observer saw, the judge."""
    observer = Observer()
    judge = make_judge(observer=observer, **settings)
    server.inject(fault, times=times)
    with pytest.raises(JudgeError) as caught:
        await judge.generate(statements_prompt())
    return caught.value, observer, judge


@pytest.mark.parametrize(
    ("fault", "reason"), [(Fault.RATE_LIMIT, "rate_limited"), (Fault.SERVER_ERROR, "server_error")]
)
async def test_the_retries_give_up_and_the_class_becomes_the_reason(
    server: JudgeServer, make_judge: MakeJudge, fault: Fault, reason: str
) -> None:
    error, observer, _ = await fails(server, make_judge, fault, 2, max_retries=1)
    assert error.reason == reason
    assert error.retryable is True
    assert server.stats.snapshot().chat_requests == 2
    assert observer.outcomes == [reason]


async def test_a_retry_waits_as_long_as_the_endpoint_asked(server: JudgeServer) -> None:
    server.retry_after_ms = 600
    judge = OpenAIJudge(base_url=server.base_url, model=MODEL, max_retries=1)
    server.inject(Fault.RATE_LIMIT)
    started = time.monotonic()
    await statements_then_close(judge)
    assert server.stats.snapshot().chat_requests == 2
    assert time.monotonic() - started >= 0.6  # its retry-after-ms, not a shorter wait of ours


async def test_a_refused_key_says_which_setting_and_keeps_the_servers_words(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    error, observer, _ = await fails(server, make_judge, Fault.UNAUTHORIZED, 3, max_retries=2)
    assert error.reason == "auth" and error.retryable is False
    assert error.detail == (
        "HTTP 401: Incorrect API key provided: ***.; check RAG_MONITOR_JUDGE_API_KEY"
    )
    assert SECRET not in str(error)
    assert server.stats.snapshot().chat_requests == 1  # a refused key is not retried
    assert observer.outcomes == ["auth"]


async def test_invalid_output_twice_fails_for_good(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    error, observer, _ = await fails(server, make_judge, Fault.INVALID_JSON, 2)
    assert error.reason == "invalid_output"
    assert error.retryable is False
    stats = server.stats.snapshot()
    assert stats.chat_requests == 2  # the request and one re-ask, never more
    assert observer.outcomes == ["invalid_output", "invalid_output"]
    assert len(observer.tokens) == 2  # the tokens were spent, and are counted


@pytest.mark.parametrize("fault", [Fault.INVALID_JSON, Fault.SCHEMA_MISMATCH])
async def test_invalid_output_once_is_re_asked(
    server: JudgeServer, make_judge: MakeJudge, fault: Fault
) -> None:
    judge = make_judge()
    server.inject(fault)
    judged = await judge.generate(statements_prompt())
    assert judged.value.statements == ["Receipts are required over $100", "Lodging always"]
    assert judged.usage.calls == 2
    stats = server.stats.snapshot()
    assert stats.chat_requests == 2
    assert stats.prompt_tokens == judged.usage.prompt_tokens


async def test_timeout(server: JudgeServer, make_judge: MakeJudge) -> None:
    observer = Observer()
    judge = make_judge(observer=observer, timeout_seconds=0.3, max_retries=0)
    server.inject(Fault.SLOW, seconds=5)
    with pytest.raises(JudgeError) as caught:
        await asyncio.wait_for(judge.generate(statements_prompt()), timeout=4)
    assert caught.value.reason == "timeout"
    assert caught.value.retryable is True
    assert observer.outcomes == ["timeout"]
    assert observer.requests[0][1] < 2


async def test_connection_refused(server: JudgeServer, make_judge: MakeJudge) -> None:
    judge = make_judge(max_retries=0)
    server.down("refuse")
    with pytest.raises(JudgeError) as caught:
        await judge.generate(statements_prompt())
    assert (caught.value.reason, caught.value.retryable) == ("connection", True)


async def test_bad_request_is_permanent_and_not_a_fallback(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    error, observer, judge = await fails(server, make_judge, Fault.BAD_REQUEST, 2)
    assert (error.reason, error.retryable) == ("bad_request", False)
    assert error.detail == "HTTP 400: bad request (injected)"  # the server's words
    assert observer.outcomes == ["fallback", "bad_request"]
    assert judge.response_mode == "json_schema"  # the fallback did not work: not remembered


async def test_server_ignoring_n_is_topped_up(server: JudgeServer, make_judge: MakeJudge) -> None:
    server.ignore_n = True
    judge = make_judge()
    judged = await judge.generate(questions_prompt(), n=3)
    assert len(judged.values) == 3
    assert all(v.question for v in judged.values)
    stats = server.stats.snapshot()
    assert stats.chat_requests == 3  # n=3 answered with one choice, then two n=1 calls
    assert judged.usage.calls == 3


async def test_n_choices_in_one_request(server: JudgeServer, make_judge: MakeJudge) -> None:
    judge = make_judge()
    judged = await judge.generate(questions_prompt(), n=3)
    assert len(judged.values) == 3
    assert server.stats.snapshot().chat_requests == 1


async def test_json_schema_rejected_falls_back_to_json_object(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    server.reject_json_schema = True
    observer = Observer()
    judge = make_judge(observer=observer)
    first = await judge.generate(statements_prompt())
    assert first.value.statements
    assert judge.response_mode == "json_object"
    second = await judge.generate(statements_prompt("Lodging only for 3+ nights."))
    assert second.value.statements == ["Lodging only for 3+ nights"]
    stats = server.stats.snapshot()
    # rejected once, then json_object for this call and every later one
    assert stats.response_formats == ["json_schema", "json_object", "json_object"]
    assert observer.outcomes == ["fallback", "ok", "ok"]
    # the fallback spells the schema out in the prompt
    fallback = render_messages(statements_prompt(), schema_in_text=True)
    assert first.usage.prompt_tokens == estimate_prompt_tokens(fallback, MODEL)


async def test_budget_too_small_sends_nothing(server: JudgeServer, make_judge: MakeJudge) -> None:
    gate = Gate(available=50)
    judge = make_judge(gate=gate)
    with pytest.raises(BudgetExhausted) as caught:
        await judge.generate(statements_prompt())
    assert caught.value.reason == "budget"
    assert server.stats.snapshot().chat_requests == 0
    assert gate.reserved == [] and gate.available == 50


async def test_budget_reserve_then_reconcile(server: JudgeServer, make_judge: MakeJudge) -> None:
    gate = Gate(available=100_000)
    judge = make_judge(gate=gate)
    judged = await judge.generate(statements_prompt())
    messages = render_messages(statements_prompt(), schema_in_text=False)
    [(_, _, cap)] = server.stats.snapshot().caps
    assert cap == judge.cap_of(statements_prompt())
    expected_reserve = estimate_prompt_tokens(messages, MODEL) + cap  # exactly the cap
    assert gate.reserved == [expected_reserve]
    assert gate.reconciled == [(expected_reserve, judged.usage.total_tokens)]
    assert gate.available == 100_000 - judged.usage.total_tokens


async def test_budget_reconciled_with_zero_on_failure(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    gate = Gate(available=100_000)
    judge = make_judge(gate=gate, max_retries=0)
    server.inject(Fault.SERVER_ERROR)
    with pytest.raises(JudgeError):
        await judge.generate(statements_prompt())
    assert len(gate.reconciled) == 1 and gate.reconciled[0][1] == 0
    assert gate.available == 100_000


def _reservation(judge: OpenAIJudge) -> int:
    messages = render_messages(statements_prompt(), schema_in_text=False)
    return estimate_prompt_tokens(messages, MODEL) + judge.cap_of(statements_prompt())


async def test_an_attempt_that_timed_out_is_charged_its_reservation(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    """The endpoint finished (and billed) the attempt its client gave up on: the budget is
    charged for it before the retry is sent, so it never counts less than was billed."""
    gate = Gate(available=100_000)
    judge = make_judge(gate=gate, timeout_seconds=0.4, max_retries=1)
    server.inject(Fault.SLOW, seconds=1.0)
    judged = await judge.generate(statements_prompt())
    await wait_until(
        lambda: server.stats.in_flight == 0, 10, "the abandoned attempt answered (and counted)"
    )
    stats = server.stats.snapshot()
    assert stats.chat_requests == 2
    reserve = _reservation(judge)
    assert gate.reserved == [reserve, reserve]
    assert gate.reconciled == [(reserve, reserve), (reserve, judged.usage.total_tokens)]
    assert stats.prompt_tokens + stats.completion_tokens <= 100_000 - gate.available


async def test_no_retry_after_a_timeout_the_budget_cannot_cover(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    reserve = _reservation(make_judge())
    gate = Gate(available=reserve + reserve // 2)
    judge = make_judge(gate=gate, timeout_seconds=0.4, max_retries=1)
    server.inject(Fault.SLOW, seconds=1.0)
    with pytest.raises(BudgetExhausted):
        await judge.generate(statements_prompt())
    assert server.stats.snapshot().chat_requests == 1  # the retry was not sent
    assert gate.reconciled == [(reserve, reserve)]  # the abandoned attempt is charged
    assert gate.available == reserve // 2


async def test_a_last_attempt_that_timed_out_is_charged_too(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    gate = Gate(available=100_000)
    judge = make_judge(gate=gate, timeout_seconds=0.3, max_retries=0)
    server.inject(Fault.SLOW, seconds=1.0)
    with pytest.raises(JudgeError) as caught:
        await judge.generate(statements_prompt())
    assert caught.value.reason == "timeout"
    assert gate.reconciled == [(_reservation(judge), _reservation(judge))]


async def test_concurrency_limit_holds(server: JudgeServer, make_judge: MakeJudge) -> None:
    server.latency_seconds = 0.15
    judge = make_judge(concurrency=2)
    prompts = [statements_prompt(f"Fact number {i}.") for i in range(6)]
    results = await asyncio.gather(*(judge.generate(p) for p in prompts))
    assert [r.value.statements for r in results] == [[f"Fact number {i}"] for i in range(6)]
    assert server.stats.snapshot().max_concurrent == 2


async def test_api_key_never_in_repr_or_logs(
    server: JudgeServer, make_judge: MakeJudge, caplog: pytest.LogCaptureFixture
) -> None:
    judge = make_judge()
    caplog.set_level(logging.DEBUG)
    # the SDK's own loggers too: a command run in this process earlier (`monitor.cli.main`)
    # quietens them, as `monitor.logging` does for every command
    for noisy in NOISY_LOGGERS:
        caplog.set_level(logging.DEBUG, logger=noisy)
    server.inject(Fault.RATE_LIMIT)
    server.inject(Fault.INVALID_JSON)
    await judge.generate(statements_prompt())
    await judge.embed(["receipt"])
    assert caplog.records  # the SDK and httpx did log at DEBUG
    assert SECRET not in caplog.text
    assert SECRET not in repr(judge) and SECRET not in str(judge.__dict__.get("_api_key"))


async def test_embed_batches_in_order(server: JudgeServer, make_judge: MakeJudge) -> None:
    from tests.support import answers

    judge = make_judge(embed_batch_size=2)
    texts = ["receipt over $100", "lodging", "", "travel expenses", "hotel"]
    embedded = await judge.embed(texts)
    expected = answers.embed([t for t in texts])
    assert len(embedded.vectors) == 5
    for got, want in zip(embedded.vectors, expected, strict=True):
        assert all(math.isclose(a, b, abs_tol=1e-6) for a, b in zip(got, want, strict=True))
    assert embedded.vectors[2] == [0.0] * len(expected[0])  # empty text: zero vector, not sent
    stats = server.stats.snapshot()
    assert stats.embedding_requests == 3 == embedded.usage.calls
    assert stats.embedded_texts == 4
    assert embedded.usage.prompt_tokens == stats.embedding_tokens


def test_strict_schema() -> None:
    schema = strict_schema(steps.Verdicts)
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["verdicts"]
    item = schema["$defs"]["StatementVerdict"]
    assert item["additionalProperties"] is False
    assert item["required"] == ["statement", "reason", "verdict"]
    # what only the local judge writes is never asked of an LLM
    assert "hallucination_probability" not in str(schema)
    assert strict_schema(steps.GeneratedQuestion)["required"] == ["question", "noncommittal"]
    assert strict_schema(steps.Statements)["required"] == ["statements", "noncommittal"]
    # nor rendered into its prompt: a verify input without what statements are read after
    # renders as it always has
    plain = steps.VerifyInput(context="c", statements=["s"])
    assert plain.model_dump_json() == '{"context":"c","statements":["s"],"source":"context"}'
    optional = strict_schema(steps.StatementsInput)  # defaults and optional fields
    assert optional["required"] == ["question", "text", "atomicity", "coverage"]
    assert "default" not in str(optional)


# --- the judge factory


def test_factory_llm_without_url_names_the_setting() -> None:
    with pytest.raises(JudgeConfigError, match="RAG_MONITOR_JUDGE_BASE_URL"):
        build_judge(Settings(judge_base_url=None), kind="llm")


async def test_factory_auto_with_url_is_the_llm_judge(server: JudgeServer) -> None:
    settings = Settings(
        judge_base_url=server.base_url,
        judge_api_key=SecretStr(SECRET),
        judge_timeout_seconds=7.5,
        judge_max_retries=1,
        judge_concurrency=3,
    )
    observer = Observer()
    gate = Gate(available=1_000_000)
    judge = build_judge(settings, gate=gate, observer=observer)
    assert isinstance(judge, OpenAIJudge)
    try:
        assert (judge.timeout_seconds, judge.max_retries, judge.concurrency) == (7.5, 1, 3)
        assert judge.embedder is None
        judged = await judge.generate(statements_prompt())
        assert judged.value.statements
        assert gate.reconciled and observer.outcomes == ["ok"]
    finally:
        await judge.aclose()


async def test_factory_local_embedding(server: JudgeServer) -> None:
    settings = Settings(judge_base_url=server.base_url, embedding_model="local")
    judge = build_judge(settings, kind="llm")
    assert isinstance(judge, OpenAIJudge)
    try:
        assert isinstance(judge.embedder, LocalEmbedding)
        embedded = await judge.embed(["Receipts are required over $100.", "lodging"])
        assert [len(v) for v in embedded.vectors] == [384, 384]
        assert embedded.usage.total_tokens == 0
        assert server.stats.snapshot().embedding_requests == 0  # never the endpoint
    finally:
        await judge.aclose()


def test_factory_auto_without_url_is_the_local_judge() -> None:
    judge = build_judge(Settings(judge_base_url=None))
    assert judge.kind == "local"


def test_usage_trusts_the_response_but_not_one_choice_counts() -> None:
    from monitor.judges.replies import token_usage
    from monitor.tokens import count_tokens

    one = '{"question": "What is a receipt?", "noncommittal": 0}'
    reported = {"prompt_tokens": 40, "completion_tokens": 3, "total_tokens": 43}
    assert token_usage(reported, 99, [one], MODEL) == (40, 3)
    # llama-server with n>1 reports one choice's completion tokens: count them all
    counted = 3 * count_tokens(one, MODEL)
    assert token_usage(reported, 99, [one, one, one], MODEL) == (40, counted)
    # no usage at all: our own estimate and count
    assert token_usage(None, 99, [one], MODEL) == (99, count_tokens(one, MODEL))


async def test_embeddings_are_budgeted_and_reported(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    judge, observer, gate = watched(make_judge, 100_000)
    embedded = await judge.embed(["receipt over $100", "lodging for three nights"])
    used = embedded.usage.prompt_tokens
    assert used > 0
    assert len(gate.reserved) == 1 and gate.reconciled == [(gate.reserved[0], used)]
    assert gate.available == 100_000 - used
    assert observer.tokens == [("embeddings", used, 0)]

    starved = make_judge(gate=Gate(available=1))
    before = server.stats.snapshot().embedding_requests
    with pytest.raises(BudgetExhausted):
        await starved.embed(["receipt over $100"])
    assert server.stats.snapshot().embedding_requests == before


def test_answers_that_are_not_completions_or_embeddings_are_invalid_output() -> None:
    """The bodies are read as plain JSON: every shape the SDK models would reject fails cleanly."""
    import base64
    import struct

    from monitor.judges.replies import chat_contents, embedding_vectors

    not_completions: tuple[object, ...] = (
        None,
        [],
        {"choices": "x"},
        {"choices": [1]},
        {"id": "no choices"},
    )
    for body in not_completions:
        with pytest.raises(JudgeError) as caught:
            chat_contents(body)
        assert caught.value.reason == "invalid_output"
    reply = chat_contents(
        {
            "choices": [
                {"index": 1, "message": {"content": "b"}, "finish_reason": "length"},
                {"index": 0, "message": {"content": "a"}, "finish_reason": "stop"},
                {"index": 2, "message": {"content": None}},
            ],
            "usage": {"prompt_tokens": 5},
        }
    )
    assert reply.contents == ["a", "b", None] and reply.usage == {"prompt_tokens": 5}
    assert reply.finish_reasons == ["stop", "length", None]

    packed = base64.b64encode(struct.pack("<2f", 0.5, -1.0)).decode()
    vectors, tokens = embedding_vectors(
        {"data": [{"index": 1, "embedding": [1, 2]}, {"index": 0, "embedding": packed}]}, 2
    )
    assert vectors == [[0.5, -1.0], [1.0, 2.0]] and tokens is None
    not_embeddings: tuple[tuple[object, int], ...] = (
        ({"data": [{"embedding": "not base64!"}]}, 1),
        ({"data": [{"embedding": ["x"]}]}, 1),
        ({"data": [{"embedding": [1.0]}, {"embedding": [1.0, 2.0]}]}, 2),
        ({"data": [{"embedding": [1.0]}]}, 2),
        ({"data": []}, 0),
        ({"object": "list"}, 1),
    )
    for body, expected in not_embeddings:
        with pytest.raises(JudgeError) as caught:
            embedding_vectors(body, expected)
        assert caught.value.reason == "invalid_output"


# --- pinned list lengths, per-step timeouts, backing off after a timeout


def verify_prompt(statements: list[str], **extra: Any) -> Prompt[steps.Verdicts]:
    return Prompt(
        step="verify",
        metric="faithfulness",
        instruction="Check each statement against the context.",
        inputs=steps.VerifyInput(context="Receipts are required over $100.", statements=statements),
        output=steps.Verdicts,
        lengths={"verdicts": len(statements)},
        **extra,
    )


def _strict_valid(node: object) -> None:
    """What OpenAI's strict json_schema mode demands of every object: all properties
    required, no others allowed, no defaults."""
    if isinstance(node, dict):
        assert "default" not in node
        if node.get("type") == "object":
            assert node["additionalProperties"] is False
            assert sorted(node["required"]) == sorted(node["properties"])
        for value in node.values():
            _strict_valid(value)
    elif isinstance(node, list):
        for value in node:
            _strict_valid(value)


async def test_pinned_lengths_are_in_the_schema_sent(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    judge = make_judge()
    await judge.generate(verify_prompt(["Receipts are required over $100", "Lodging always"]))
    await judge.generate(verify_prompt(["Receipts are required over $100"]))
    await judge.generate(statements_prompt())
    sent = server.stats.snapshot().schemas
    assert [step for step, _ in sent] == ["verify", "verify", "statements"]
    for (_, schema), count in zip(sent[:2], (2, 1), strict=True):
        verdicts = schema["properties"]["verdicts"]
        assert (verdicts["minItems"], verdicts["maxItems"]) == (count, count)
    assert "minItems" not in json.dumps(sent[2][1])  # nothing pinned: nothing sent
    # valid for strict mode, the new default field (noncommittal) included
    for _, schema in sent:
        _strict_valid(schema)
    assert sent[2][1]["required"] == ["statements", "noncommittal"]
    _strict_valid(strict_schema(steps.Grounding))
    # the json_object fallback spells the pinned schema out in the prompt
    text = render_messages(verify_prompt(["a", "b", "c"]), schema_in_text=True)[0]["content"]
    assert '"minItems":3' in text and '"maxItems":3' in text


def _one_verdict(step: str, inputs: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """Default answers, but verify always returns a single verdict."""
    out = answers.answer(step, inputs, n)
    if step == "verify":
        for one in out:
            one["verdicts"] = one["verdicts"][:1]
    return out


async def test_an_answer_with_another_count_is_invalid() -> None:
    observer = Observer()
    with JudgeServer(answer=_one_verdict) as server:
        judge = OpenAIJudge(base_url=server.base_url, model=MODEL, observer=observer)
        try:
            with pytest.raises(JudgeError) as caught:
                await judge.generate(verify_prompt(["Receipts are required", "Lodging always"]))
            assert caught.value.reason == "invalid_output"
            assert "expected exactly 2" in caught.value.detail
            assert observer.outcomes == ["invalid_output", "invalid_output"]  # one re-ask
            # not re-asked when the prompt says so: it fails at once, counted as a fallback
            with pytest.raises(JudgeError, match="expected exactly 2"):
                await judge.generate(verify_prompt(["a b", "c d"], reask=False))
            assert observer.outcomes[2:] == ["fallback_steps"]
            assert server.stats.snapshot().chat_requests == 3
            # the right count passes
            judged = await judge.generate(verify_prompt(["Receipts are required"]))
            assert len(judged.value.verdicts) == 1
        finally:
            await judge.aclose()


async def test_each_step_has_its_own_timeout(server: JudgeServer, make_judge: MakeJudge) -> None:
    observer = Observer()
    judge = make_judge(
        observer=observer, timeout_seconds=5.0, step_timeouts={"statements": 0.3}, max_retries=0
    )
    assert judge.timeout_of("statements") == 0.3 and judge.timeout_of("questions") == 5.0
    server.inject(Fault.SLOW, seconds=1.5)
    with pytest.raises(JudgeError) as caught:
        await asyncio.wait_for(judge.generate(statements_prompt()), timeout=4)
    assert caught.value.reason == "timeout"
    assert observer.requests[0][1] < 1.2  # its own 0.3 s, not the judge's 5 s
    # another step keeps the judge's timeout: 1.5 s is within it
    server.inject(Fault.SLOW, seconds=1.5)
    judged = await judge.generate(questions_prompt())
    assert judged.value.question
    assert observer.outcomes == ["timeout", "ok"]
    with pytest.raises(ValueError):
        OpenAIJudge(base_url=server.base_url, model=MODEL, step_timeouts={"verify": 0})


async def test_no_retry_is_sent_at_once_after_a_timeout() -> None:
    """The endpoint is still working on the abandoned request: the retry waits as long
    as the timeout first, and the wait is counted (outcome timeout_backoff)."""
    arrivals: list[float] = []

    def slow_first(step: str, inputs: dict[str, Any], n: int) -> list[dict[str, Any]]:
        arrivals.append(time.monotonic())
        if len(arrivals) == 1:
            time.sleep(1.5)  # the server keeps working after the client gave up
        return answers.answer(step, inputs, n)

    observer = Observer()
    with JudgeServer(answer=slow_first) as server:
        judge = OpenAIJudge(
            base_url=server.base_url,
            model=MODEL,
            timeout_seconds=0.4,
            max_retries=1,
            observer=observer,
        )
        started = time.monotonic()
        await statements_then_close(judge)
    assert len(arrivals) == 2
    # timed out at 0.4 s, then waited at least three quarters of 0.4 s before re-sending
    assert arrivals[1] - started >= 0.4 + 0.75 * 0.4
    assert observer.outcomes == ["timeout_backoff", "ok"]
    assert observer.requests[0][1] == 0.4


async def test_a_refused_connection_is_retried_without_the_long_wait(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    observer = Observer()
    judge = make_judge(observer=observer, timeout_seconds=30.0, max_retries=1)
    server.down("refuse")
    started = time.monotonic()
    with pytest.raises(JudgeError) as caught:
        await judge.generate(statements_prompt())
    assert caught.value.reason == "connection"
    assert time.monotonic() - started < 5  # the usual half second, not 30 s
    assert "timeout_backoff" not in observer.outcomes


def _one_paragraph(step: str, inputs: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """A small model's statements answer: the whole text as one statement."""
    if step == "statements":
        return [{"statements": [inputs["text"]], "noncommittal": 0} for _ in range(n)]
    return answers.answer(step, inputs, n)


async def test_a_paragraph_returned_as_one_statement_is_cut_into_sentences() -> None:
    text = (
        "Refunds are paid within 14 days. The fee is $25, and Dr. Lee signs them off. "
        "Lodging always."
    )
    with JudgeServer(answer=_one_paragraph) as server:
        judge = OpenAIJudge(base_url=server.base_url, model=MODEL)
        try:
            judged = await judge.generate(statements_prompt(text))
            # "Dr." is not a sentence end; each sentence is verified on its own
            assert judged.value.statements == [
                "Refunds are paid within 14 days.",
                "The fee is $25, and Dr. Lee signs them off.",
                "Lodging always.",
            ]
            # other steps come back as answered
            questions = await judge.generate(questions_prompt())
            assert questions.value.question
        finally:
            await judge.aclose()


# --- the output cap on every answer, cut-off answers, refusals by what the server says


def long_text(sentences: int = 20) -> str:
    return " ".join(
        f"Item {i}: expenses over {100 + i} dollars need a receipt signed by a manager."
        for i in range(sentences)
    )


async def test_every_chat_request_carries_its_steps_cap(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    gate = Gate(available=1_000_000)
    judge = make_judge(gate=gate)
    short, longer = statements_prompt(), statements_prompt(long_text())
    verify = verify_prompt(["Receipts are required over $100", "Lodging always"])
    await judge.generate(short)
    await judge.generate(longer)
    await judge.generate(verify)
    await judge.generate(questions_prompt(), n=3)
    caps = server.stats.snapshot().caps
    assert [(step, name) for step, name, _ in caps] == [
        ("statements", "max_tokens"),
        ("statements", "max_tokens"),
        ("verify", "max_tokens"),
        ("questions", "max_tokens"),
    ]
    sent = [cap or 0 for _, _, cap in caps]
    wanted = [
        judge.cap_of(short),
        judge.cap_of(longer),
        judge.cap_of(verify),
        judge.cap_of(questions_prompt()),
    ]
    assert sent == wanted
    assert sent[1] > sent[0]  # a statements list grows with its text
    # the budget reserves exactly the cap of each answer: n of them for n choices
    prompts: list[list[dict[str, str]]] = [
        render_messages(short, schema_in_text=False),
        render_messages(longer, schema_in_text=False),
        render_messages(verify, schema_in_text=False),
        render_messages(questions_prompt(), schema_in_text=False),
    ]
    for reserved, messages, cap, n in zip(gate.reserved, prompts, sent, (1, 1, 1, 3), strict=True):
        assert reserved == estimate_prompt_tokens(messages, MODEL) + cap * n


async def test_the_cap_is_bounded_by_the_setting(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    judge = make_judge(max_completion_tokens=200)
    assert judge.cap_of(statements_prompt(long_text())) == 200
    assert judge.cap_of(statements_prompt()) < 200  # a short answer's own size is less
    await judge.generate(statements_prompt(long_text(4)))
    assert all(cap is not None and cap <= 200 for _, _, cap in server.stats.snapshot().caps)
    with pytest.raises(ValueError):
        make_judge(max_completion_tokens=0)


async def test_a_runaway_answer_is_cut_at_its_cap_and_re_asked_without_it(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    judge, observer, gate = watched(make_judge, 1_000_000)
    prompt = statements_prompt(long_text())
    cap = judge.cap_of(prompt)
    assert cap > 300  # the runaway answer is longer than the excerpt the re-ask may carry
    server.inject(Fault.RUNAWAY)
    judged = await judge.generate(prompt)
    assert len(judged.value.statements) == 20
    stats = server.stats.snapshot()
    assert [why for _, _, why in stats.finished] == ["length", "stop"]
    assert stats.finished[0][1] <= cap
    assert observer.outcomes == ["truncated", "ok"]
    # the re-ask is the prompt, a bounded excerpt of the cut-off answer and a short
    # correction: far from the cap's worth of runaway text
    first = estimate_prompt_tokens(render_messages(prompt, schema_in_text=False), MODEL)
    second = stats.steps["statements"].prompt_tokens - first
    assert 0 < second - first < 150
    # no answer cost more than the budget set aside for it
    assert all(used <= reserved for reserved, used in gate.reconciled)


async def test_an_answer_cut_off_twice_fails_as_truncated(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    server.loop_steps = {"statements"}
    judge, observer, gate = watched(make_judge, 1_000_000)
    prompt = statements_prompt("Two weeks.")
    with pytest.raises(JudgeError) as caught:
        await judge.generate(prompt)
    assert caught.value.reason == "truncated" and not caught.value.retryable
    cap = judge.cap_of(prompt)
    assert caught.value.detail == (
        f"step statements: cut off at its cap of {cap} tokens (after one re-ask)"
    )
    stats = server.stats.snapshot()
    assert [(step, name, sent) for step, name, sent in stats.caps] == [
        ("statements", "max_tokens", cap)
    ] * 2
    assert [why for _, _, why in stats.finished] == ["length", "length"]
    assert stats.completion_tokens <= 2 * cap
    assert observer.outcomes == ["truncated", "truncated"]
    assert all(used <= reserved for reserved, used in gate.reconciled)


@pytest.mark.parametrize("style", ["llama.cpp", "openai"])
async def test_a_context_size_refusal_keeps_the_servers_words_and_is_no_fallback(
    server: JudgeServer, make_judge: MakeJudge, style: ContextError
) -> None:
    server.context_tokens = 30
    server.context_error = style
    observer = Observer()
    judge = make_judge(observer=observer)
    with captured_logs("info") as logs, pytest.raises(JudgeError) as caught:
        await judge.generate(statements_prompt())
    assert (caught.value.reason, caught.value.retryable) == ("too_long", False)
    words = {
        "llama.cpp": "exceeds the available context size (30 tokens), try increasing it",
        "openai": "This model's maximum context length is 30 tokens.",
    }[style]
    assert caught.value.detail.startswith("HTTP 400: ") and words in caught.value.detail
    # one request: not taken for a json_schema refusal, not sent again as json_object
    assert server.stats.snapshot().response_formats == ["json_schema"]
    assert judge.response_mode == "json_schema"
    assert observer.outcomes == ["too_long"]
    events = [e["event"] for e in logs]
    assert not any("response_format" in e for e in events), events
    [refused] = [e for e in logs if e["event"] == "judge endpoint refused the request"]
    assert (refused["reason"], refused["status"], refused["step"]) == (
        "too_long",
        400,
        "statements",
    )
    assert refused["said"] == caught.value.detail


async def test_a_refusal_keeps_a_bounded_message_without_the_key(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    judge = make_judge()
    judge.response_mode = "json_object"  # nothing to fall back to: the 400 is final
    server.inject(Fault.BAD_REQUEST_ECHO)
    with pytest.raises(JudgeError) as caught:
        await judge.generate(statements_prompt())
    assert caught.value.reason == "bad_request"
    detail = caught.value.detail
    assert detail.startswith("HTTP 400: Invalid request from key ***: this request")
    assert SECRET not in detail and len(detail) <= len("HTTP 400: ") + 300


async def test_a_refused_max_tokens_is_sent_as_max_completion_tokens(
    server: JudgeServer, make_judge: MakeJudge
) -> None:
    server.refuse_max_tokens = True
    observer = Observer()
    judge = make_judge(observer=observer, max_completion_tokens=700)
    with captured_logs("info") as logs:
        first = await judge.generate(statements_prompt())
        second = await judge.generate(statements_prompt("Lodging only for 3+ nights."))
    assert first.value.statements and second.value.statements
    caps = [(name, cap) for _, name, cap in server.stats.snapshot().caps]
    short = answer_cap(statements_prompt(), 700, MODEL)
    # refused by name, then the whole setting: a reasoning model's thinking counts against it
    assert caps == [
        ("max_tokens", short),
        ("max_completion_tokens", 700),
        ("max_completion_tokens", 700),
    ]
    assert judge.cap_param == "max_completion_tokens" and judge.response_mode == "json_schema"
    assert observer.outcomes == ["fallback_cap", "ok", "ok"]
    [switch] = [e for e in logs if e["event"].startswith("judge endpoint refused max_tokens")]
    assert "max_completion_tokens" in switch["said"]
