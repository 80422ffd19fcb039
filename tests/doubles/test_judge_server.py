"""The embedded OpenAI-compatible judge server, over real HTTP (stdlib client: the raw protocol)."""

from __future__ import annotations

import base64
import json
import struct
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest

from monitor.judges import Prompt
from monitor.judges.steps import Statements, StatementsInput
from monitor.judges.wire import render_messages
from monitor.tokens import count_tokens, estimate_prompt_tokens
from tests.support.judge_server import Fault, JudgeServer

MODEL = "gpt-4o-mini"


def answer(step: str, inputs: dict[str, Any], n: int) -> list[dict[str, Any]]:
    return [{"statements": [f"{inputs['text']} #{i}"]} for i in range(n)]


def embed(texts: list[str]) -> list[list[float]]:
    return [[float(len(t)), 0.5, -1.0] for t in texts]


@pytest.fixture
def server() -> Iterator[JudgeServer]:
    with JudgeServer(answer, embed) as s:
        yield s


def _messages(text: str = "Receipts over $100.") -> list[dict[str, str]]:
    prompt = Prompt(
        step="statements",
        metric="faithfulness",
        instruction="Split the text into statements.",
        inputs=StatementsInput(text=text),
        output=Statements,
    )
    return render_messages(prompt, schema_in_text=False)


def _schema_format() -> dict[str, Any]:
    return {
        "type": "json_schema",
        "json_schema": {"name": "statements", "schema": Statements.model_json_schema()},
    }


def _post(
    server: JudgeServer, path: str, body: dict[str, Any], timeout: float = 10
) -> tuple[int, dict[str, str], dict[str, Any]]:
    request = urllib.request.Request(
        server.base_url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as resp:
            return resp.status, dict(resp.headers), json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, dict(exc.headers), json.loads(exc.read())


def _chat(server: JudgeServer, **extra: Any) -> tuple[int, dict[str, str], dict[str, Any]]:
    body: dict[str, Any] = {"model": MODEL, "messages": _messages()}
    body.update(extra)
    return _post(server, "/chat/completions", body)


def test_constructor_has_no_side_effects() -> None:
    s = JudgeServer(answer, embed)
    with pytest.raises(RuntimeError):
        _ = s.base_url
    s.stop()  # stopping a server that never started is harmless


def test_base_url_and_models(server: JudgeServer) -> None:
    assert server.base_url == f"http://127.0.0.1:{server.port}/v1"
    with urllib.request.urlopen(server.base_url + "/models", timeout=5) as resp:
        listing = json.loads(resp.read())
    assert listing["data"][0]["id"] == server.model


def test_chat_completion_with_n_and_usage(server: JudgeServer) -> None:
    status, _, body = _chat(server, n=3, response_format=_schema_format())
    assert status == 200
    contents = [c["message"]["content"] for c in body["choices"]]
    assert [json.loads(c) for c in contents] == [
        {"statements": [f"Receipts over $100. #{i}"]} for i in range(3)
    ]
    prompt_tokens = estimate_prompt_tokens(_messages(), MODEL)
    completion_tokens = sum(count_tokens(c, MODEL) for c in contents)
    assert body["usage"] == {
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": prompt_tokens + completion_tokens,
    }
    stats = server.stats.snapshot()
    assert stats.chat_requests == 1
    step = stats.steps["statements"]
    assert (step.requests, step.answered, step.choices) == (1, 1, 3)
    assert (step.prompt_tokens, step.completion_tokens) == (prompt_tokens, completion_tokens)
    assert stats.response_formats == ["json_schema"]


def test_json_object_and_reset(server: JudgeServer) -> None:
    status, _, body = _chat(server, response_format={"type": "json_object"})
    assert status == 200 and len(body["choices"]) == 1
    assert server.stats.snapshot().response_formats == ["json_object"]
    server.stats.reset()
    assert server.stats.snapshot().chat_requests == 0


def test_http_faults_in_order(server: JudgeServer) -> None:
    server.inject(Fault.RATE_LIMIT)
    server.inject(Fault.SERVER_ERROR)
    status, headers, body = _chat(server)
    assert status == 429 and headers["Retry-After"] == "0"
    assert body["error"]["type"] == "rate_limit_error"
    status, _, _ = _chat(server)
    assert status == 500
    status, _, _ = _chat(server)
    assert status == 200
    stats = server.stats.snapshot()
    assert stats.faults_applied == ["rate_limit", "server_error"]
    assert stats.steps["statements"].requests == 3
    assert stats.steps["statements"].answered == 1


def test_content_faults(server: JudgeServer) -> None:
    server.inject(Fault.INVALID_JSON)
    server.inject(Fault.SCHEMA_MISMATCH)
    server.inject(Fault.IGNORE_N)
    _, _, body = _chat(server)
    with pytest.raises(json.JSONDecodeError):
        json.loads(body["choices"][0]["message"]["content"])
    _, _, body = _chat(server)
    assert json.loads(body["choices"][0]["message"]["content"]) == {"unexpected": "field"}
    _, _, body = _chat(server, n=4)
    assert len(body["choices"]) == 1
    _, _, body = _chat(server, n=4)
    assert len(body["choices"]) == 4


def test_reject_json_schema(server: JudgeServer) -> None:
    server.reject_json_schema = True
    status, _, body = _chat(server, response_format=_schema_format())
    assert status == 400 and body["error"]["param"] == "response_format"
    status, _, _ = _chat(server, response_format={"type": "json_object"})
    assert status == 200
    server.reject_json_schema = False
    server.inject(Fault.REJECT_JSON_SCHEMA)
    status, _, _ = _chat(server, response_format=_schema_format())
    assert status == 400
    status, _, _ = _chat(server, response_format=_schema_format())
    assert status == 200


def test_an_answer_is_cut_at_its_cap(server: JudgeServer) -> None:
    _, _, whole = _chat(server)
    content = whole["choices"][0]["message"]["content"]
    tokens = count_tokens(content, MODEL)
    assert whole["choices"][0]["finish_reason"] == "stop"
    for name in ("max_tokens", "max_completion_tokens"):
        _, _, fits = _chat(server, **{name: tokens})
        assert fits["choices"][0]["message"]["content"] == content
        _, _, cut = _chat(server, **{name: tokens - 3})
        [choice] = cut["choices"]
        assert choice["finish_reason"] == "length"
        assert content.startswith(choice["message"]["content"])
        assert (
            cut["usage"]["completion_tokens"]
            == count_tokens(choice["message"]["content"], MODEL)
            <= tokens - 3
        )
    stats = server.stats.snapshot()
    assert [name for _, name, _ in stats.caps] == [
        None,
        "max_tokens",
        "max_tokens",
        "max_completion_tokens",
        "max_completion_tokens",
    ]
    assert [why for _, _, why in stats.finished] == ["stop", "stop", "length", "stop", "length"]
    status, _, body = _chat(server, max_tokens=0)
    assert status == 400 and body["error"]["param"] == "max_tokens"


def test_a_runaway_answer_runs_to_its_cap_or_to_the_context(server: JudgeServer) -> None:
    server.inject(Fault.RUNAWAY)
    _, _, capped = _chat(server, max_tokens=50)
    assert capped["choices"][0]["finish_reason"] == "length"
    assert capped["usage"]["completion_tokens"] == 50
    server.loop_steps = {"statements"}
    server.context_tokens = 2_000
    _, _, uncapped = _chat(server)  # nothing stops it but the context
    [choice] = uncapped["choices"]
    assert choice["finish_reason"] == "length"
    assert choice["message"]["content"].startswith('{"statements": ["What does the policy')
    usage = uncapped["usage"]
    assert usage["prompt_tokens"] + usage["completion_tokens"] == 2_000


def test_a_prompt_longer_than_the_context_is_refused(server: JudgeServer) -> None:
    prompt_tokens = estimate_prompt_tokens(_messages(), MODEL)
    server.context_tokens = prompt_tokens
    status, _, body = _chat(server)
    assert status == 400
    assert body["error"] == {
        "code": 400,
        "message": f"request ({prompt_tokens} tokens) exceeds the available context size "
        f"({prompt_tokens} tokens), try increasing it",
        "type": "exceed_context_size_error",
        "param": None,
        "n_prompt_tokens": prompt_tokens,
        "n_ctx": prompt_tokens,
    }
    server.context_error = "openai"
    status, _, body = _chat(server)
    assert status == 400
    assert (body["error"]["code"], body["error"]["param"]) == (
        "context_length_exceeded",
        "messages",
    )
    server.context_tokens = prompt_tokens + 1
    assert _chat(server)[0] == 200


def test_refuse_max_tokens(server: JudgeServer) -> None:
    server.refuse_max_tokens = True
    status, _, body = _chat(server, max_tokens=100)
    assert status == 400
    assert (body["error"]["param"], body["error"]["code"]) == (
        "max_tokens",
        "unsupported_parameter",
    )
    assert _chat(server, max_completion_tokens=100)[0] == 200


def test_slow_fault_and_latency(server: JudgeServer) -> None:
    server.inject(Fault.SLOW, seconds=0.4)
    started = time.monotonic()
    assert _chat(server)[0] == 200
    assert time.monotonic() - started >= 0.4
    server.latency_seconds = 0.2
    started = time.monotonic()
    assert _chat(server)[0] == 200
    assert 0.2 <= time.monotonic() - started < 2
    # embeddings take the same delay unless they have their own
    started = time.monotonic()
    assert _post(server, "/embeddings", {"model": "emb", "input": ["ab"]})[0] == 200
    assert time.monotonic() - started >= 0.2
    server.latency_seconds = 0.0
    server.embedding_latency_seconds = 0.3
    started = time.monotonic()
    assert _chat(server)[0] == 200
    assert time.monotonic() - started < 0.3
    started = time.monotonic()
    assert _post(server, "/embeddings", {"model": "emb", "input": ["ab"]})[0] == 200
    assert 0.3 <= time.monotonic() - started < 2


def test_down_503_and_refuse(server: JudgeServer) -> None:
    server.down("503")
    assert _chat(server)[0] == 503
    server.up()
    assert _chat(server)[0] == 200
    port = server.port
    server.down("refuse")
    with pytest.raises(urllib.error.URLError):
        _chat(server)
    server.up()
    assert server.port == port
    assert _chat(server)[0] == 200


def test_embeddings_float_and_base64(server: JudgeServer) -> None:
    status, _, body = _post(server, "/embeddings", {"model": "emb", "input": ["ab", "cde"]})
    assert status == 200
    assert [d["embedding"] for d in body["data"]] == [[2.0, 0.5, -1.0], [3.0, 0.5, -1.0]]
    assert body["usage"]["prompt_tokens"] == count_tokens("ab", "emb") + count_tokens("cde", "emb")
    _, _, body = _post(
        server, "/embeddings", {"model": "emb", "input": "ab", "encoding_format": "base64"}
    )
    raw = base64.b64decode(body["data"][0]["embedding"])
    assert list(struct.unpack("<3f", raw)) == [2.0, 0.5, -1.0]
    stats = server.stats.snapshot()
    assert (stats.embedding_requests, stats.embedded_texts) == (2, 3)


def test_bad_requests(server: JudgeServer) -> None:
    assert _post(server, "/chat/completions", {"model": MODEL, "messages": []})[0] == 400
    not_a_prompt = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}]}
    status, _, body = _post(server, "/chat/completions", not_a_prompt)
    assert status == 400 and "rag-monitor prompt" in body["error"]["message"]
    assert _post(server, "/nope", {})[0] == 404
    server.inject(Fault.BAD_REQUEST)
    assert _chat(server)[0] == 400


def test_default_answers_are_used() -> None:
    with JudgeServer() as s:
        status, _, body = _chat(s)
    assert status == 200
    value = Statements.model_validate_json(body["choices"][0]["message"]["content"])
    assert value.statements


def test_two_servers_share_a_port_with_reuse_port() -> None:
    first = JudgeServer(answer, embed, reuse_port=True).start()
    try:
        second = JudgeServer(answer, embed, port=first.port, reuse_port=True).start()
        try:
            assert second.port == first.port
            for _ in range(40):  # new connections each: the kernel spreads them
                assert _chat(first)[0] == 200
            served = (first.stats.snapshot().chat_requests, second.stats.snapshot().chat_requests)
            assert sum(served) == 40 and min(served) > 0
        finally:
            second.stop()
        with pytest.raises(OSError):  # without the option the port stays taken
            JudgeServer(answer, embed, port=first.port).start()
    finally:
        first.stop()
