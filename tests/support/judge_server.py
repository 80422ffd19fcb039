"""A real, deterministic OpenAI-compatible judge server on 127.0.0.1 (tests and benchmarks).

It speaks just enough of the OpenAI HTTP API for `judge.OpenAIJudge`:

- ``POST /v1/chat/completions``: honours ``n``, ``response_format``
  (``json_schema`` and ``json_object``) and the output cap (``max_tokens`` or
  ``max_completion_tokens``: an answer longer than the cap is cut there, with
  ``finish_reason`` ``length``, as a real server does); the step and its inputs
  are read back from the user message (`monitor.judges.wire.parse_user_message`)
  and handed to an *answer function* ``answer(step, inputs, n) -> list[dict]``;
  each dict becomes one choice's JSON content.
- ``POST /v1/embeddings``: ``embed(texts) -> list[list[float]]``
  (``encoding_format`` ``float`` or ``base64``).
- ``GET /v1/models``.

Responses carry realistic ``usage``: prompt tokens counted with
`monitor.tokens` over the messages, completion tokens over the returned JSON
text, summed over choices. A thread-safe `JudgeStats` counts requests, calls
and tokens per step and the peak number of concurrent requests.

Fault injection, settable while running: `JudgeServer.inject` queues faults
applied to the next requests (one per request, in order); `latency_seconds`
delays every request (`embedding_latency_seconds`, when set, the embeddings
requests instead); `down("503")` answers everything with 503,
`down("refuse")` closes the listening socket (connections are refused) and
`up()` reopens it on the same port; `ignore_n`, `reject_json_schema`,
`refuse_max_tokens` (OpenAI's refusal of ``max_tokens`` for its reasoning models),
`loop_steps` (the steps whose answers run away: a small model that restates its
input until it is stopped, at the request's cap or at the end of the context) and
`context_tokens` (the model's context: a longer prompt is refused with HTTP 400, as
llama.cpp or OpenAI word it, see `context_error`) are persistent switches.

The constructor has no side effects: `start` binds a free port and serves in a
background thread; `stop` (or leaving the ``with`` block) shuts it down.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import StrEnum
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from monitor.demo.servers import Server
from monitor.judges.wire import parse_user_message

AnswerFn = Callable[[str, dict[str, Any], int], list[dict[str, Any]]]
EmbedFn = Callable[[list[str]], list[list[float]]]

DownMode = Literal["503", "refuse"]
Endpoint = Literal["chat", "embeddings"]
#: whose words a context-size refusal is in: llama.cpp's ``llama-server`` or OpenAI's API
ContextError = Literal["llama.cpp", "openai"]

#: what the server says when a test does not name a model
DEFAULT_MODEL = "rag-monitor-test-judge"


class Fault(StrEnum):
    """Faults the server can apply to one request."""

    #: HTTP 429 with ``Retry-After: 0`` (and ``retry-after-ms``): the judge retries
    RATE_LIMIT = "rate_limit"
    #: HTTP 500: the judge retries
    SERVER_ERROR = "server_error"
    #: a 200 whose content is not JSON
    INVALID_JSON = "invalid_json"
    #: a 200 whose content is JSON that fails the step's schema
    SCHEMA_MISMATCH = "schema_mismatch"
    #: wait ``seconds`` (longer than the client's timeout), then answer normally
    SLOW = "slow"
    #: answer with one choice whatever ``n`` asked for
    IGNORE_N = "ignore_n"
    #: HTTP 400 if the request asks for ``response_format`` ``json_schema``
    REJECT_JSON_SCHEMA = "reject_json_schema"
    #: HTTP 400 whatever the request (a permanent client error)
    BAD_REQUEST = "bad_request"
    #: HTTP 401 whose message echoes the key it was sent, as a careless server might
    UNAUTHORIZED = "unauthorized"
    #: an answer that runs away (as with `JudgeServer.loop_steps`), for one request
    RUNAWAY = "runaway"
    #: HTTP 400 with a long message that echoes the key it was sent
    BAD_REQUEST_ECHO = "bad_request_echo"


@dataclass(frozen=True)
class InjectedFault:
    fault: Fault
    seconds: float = 0.0


@dataclass
class StepStats:
    """Per step: every request naming it, and the tokens of those answered."""

    requests: int = 0
    answered: int = 0
    choices: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


@dataclass
class StatsSnapshot:
    chat_requests: int = 0
    embedding_requests: int = 0
    embedded_texts: int = 0
    embedding_tokens: int = 0
    max_concurrent: int = 0
    faults_applied: list[str] = field(default_factory=list)
    steps: dict[str, StepStats] = field(default_factory=dict)
    #: ``response_format`` types seen on chat requests (``json_schema``, ``json_object``, ``none``)
    response_formats: list[str] = field(default_factory=list)
    #: (step, the JSON schema sent) of every chat request with ``response_format`` json_schema
    schemas: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    #: (step, the cap's field, its value) of every chat request; (step, None, None): no cap
    caps: list[tuple[str | None, str | None, int | None]] = field(default_factory=list)
    #: (step, completion tokens, finish_reason) of every answered choice
    finished: list[tuple[str, int, str]] = field(default_factory=list)

    @property
    def calls(self) -> int:
        """Chat requests that named a step (faulted ones included)."""
        return sum(s.requests for s in self.steps.values())

    @property
    def prompt_tokens(self) -> int:
        return sum(s.prompt_tokens for s in self.steps.values())

    @property
    def completion_tokens(self) -> int:
        return sum(s.completion_tokens for s in self.steps.values())


class JudgeStats:
    """Thread-safe counters; `snapshot` returns a copy, `reset` zeroes everything."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data = StatsSnapshot()
        self._in_flight = 0

    def snapshot(self) -> StatsSnapshot:
        with self._lock:
            d = self._data
            return replace(
                d,
                faults_applied=list(d.faults_applied),
                steps={k: replace(v) for k, v in d.steps.items()},
                response_formats=list(d.response_formats),
                schemas=list(d.schemas),
                caps=list(d.caps),
                finished=list(d.finished),
            )

    def reset(self) -> None:
        with self._lock:
            self._data = StatsSnapshot()

    @property
    def in_flight(self) -> int:
        """Requests being answered now (counted once their answer is sent)."""
        with self._lock:
            return self._in_flight

    # --- used by the handler

    def enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self._data.max_concurrent = max(self._data.max_concurrent, self._in_flight)

    def leave(self) -> None:
        with self._lock:
            self._in_flight -= 1

    def chat_request(
        self,
        step: str | None,
        response_format: str,
        schema: dict[str, Any] | None = None,
        cap: tuple[str, int] | None = None,
    ) -> None:
        with self._lock:
            self._data.chat_requests += 1
            self._data.response_formats.append(response_format)
            self._data.caps.append((step, *cap) if cap is not None else (step, None, None))
            if step is not None and schema is not None:
                self._data.schemas.append((step, schema))
            if step is not None:
                self._data.steps.setdefault(step, StepStats()).requests += 1

    def fault(self, fault: Fault) -> None:
        with self._lock:
            self._data.faults_applied.append(fault.value)

    def answered(self, step: str, choices: int, prompt_tokens: int, completion_tokens: int) -> None:
        with self._lock:
            s = self._data.steps.setdefault(step, StepStats())
            s.answered += 1
            s.choices += choices
            s.prompt_tokens += prompt_tokens
            s.completion_tokens += completion_tokens

    def finished(self, step: str, tokens: int, finish_reason: str) -> None:
        """One answered choice: its completion tokens and why it ended."""
        with self._lock:
            self._data.finished.append((step, tokens, finish_reason))

    def embedding_request(self, texts: int, tokens: int) -> None:
        with self._lock:
            self._data.embedding_requests += 1
            self._data.embedded_texts += texts
            self._data.embedding_tokens += tokens


def _default_answer(step: str, inputs: dict[str, Any], n: int) -> list[dict[str, Any]]:
    """The deterministic default answer (step → verdicts; `tests.support.answers`, imported
    on first use)."""
    from tests.support.answers import answer

    return answer(step, inputs, n)


def _default_embed(texts: list[str]) -> list[list[float]]:
    """The deterministic default embeddings (`tests.support.answers`, on first use)."""
    from tests.support.answers import embed

    return embed(texts)


class JudgeServer(Server):
    """An OpenAI-compatible judge on ``127.0.0.1``; see the module docstring."""

    def __init__(
        self,
        answer: AnswerFn | None = None,
        embed: EmbedFn | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = DEFAULT_MODEL,
        retry_after_ms: int = 1,
        reuse_port: bool = False,
    ) -> None:
        self.answer: AnswerFn = answer if answer is not None else _default_answer
        self.embed: EmbedFn = embed if embed is not None else _default_embed
        self.model = model
        self.stats = JudgeStats()
        #: ``retry-after-ms`` sent with 429/500/503, so the judge's retries are quick in tests
        self.retry_after_ms = retry_after_ms
        #: persistent switches (faults in the queue apply to one request each)
        self.ignore_n = False
        self.reject_json_schema = False
        self.refuse_max_tokens = False
        self.loop_steps: set[str] = set()
        #: the model's context in tokens: the prompt must be shorter, and an answer stops
        #: where the prompt and the answer fill it
        self.context_tokens = 32_768
        self.context_error: ContextError = "llama.cpp"
        self._host = host
        self._port = port
        #: SO_REUSEPORT: several server processes share one port (benchmarks), the kernel
        #: spreads the connections
        self._reuse_port = reuse_port
        self._lock = threading.Lock()
        self._faults: dict[Endpoint, deque[InjectedFault]] = {
            "chat": deque(),
            "embeddings": deque(),
        }
        self._latency = 0.0
        self._embedding_latency: float | None = None
        self._down: DownMode | None = None
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._counter = 0

    # --- lifecycle

    def start(self) -> JudgeServer:
        if self._server is not None:
            raise RuntimeError("judge server already started")
        self._stopping.clear()
        self._listen()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._close_listener()

    def close(self) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if not self._port:
            raise RuntimeError("judge server not started")
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self.port}/v1"

    def _listen(self) -> None:
        server = _Server((self._host, self._port), _Handler, bind_and_activate=False)
        server.allow_reuse_port = self._reuse_port
        try:
            server.server_bind()
            server.server_activate()
        except OSError:
            server.server_close()
            raise
        server.owner = self
        self._port = server.server_address[1]
        thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"judge-server-{self._port}",
            daemon=True,
        )
        self._server, self._thread = server, thread
        thread.start()

    def _close_listener(self) -> None:
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is not None:
            server.shutdown()
            server.server_close()
        if thread is not None:
            thread.join(timeout=5)

    # --- runtime controls

    def inject(
        self, fault: Fault, times: int = 1, *, seconds: float = 30.0, endpoint: Endpoint = "chat"
    ) -> None:
        """Apply ``fault`` to the next ``times`` requests of ``endpoint`` (after those queued)."""
        with self._lock:
            for _ in range(times):
                self._faults[endpoint].append(InjectedFault(fault, seconds))

    def clear_faults(self) -> None:
        with self._lock:
            for queue in self._faults.values():
                queue.clear()

    def pending_faults(self, endpoint: Endpoint = "chat") -> int:
        with self._lock:
            return len(self._faults[endpoint])

    @property
    def latency_seconds(self) -> float:
        """A fixed delay before every answer (benchmarks: e.g. 0.3)."""
        return self._latency

    @latency_seconds.setter
    def latency_seconds(self, value: float) -> None:
        self._latency = max(0.0, float(value))

    @property
    def embedding_latency_seconds(self) -> float | None:
        """The delay of embeddings requests; None (default): `latency_seconds`, like the rest."""
        return self._embedding_latency

    @embedding_latency_seconds.setter
    def embedding_latency_seconds(self, value: float | None) -> None:
        self._embedding_latency = None if value is None else max(0.0, float(value))

    def _latency_of(self, path: str) -> float:
        if self._embedding_latency is not None and path.endswith("/embeddings"):
            return self._embedding_latency
        return self._latency

    def down(self, mode: DownMode = "503") -> None:
        """``503``: answer every request with 503; ``refuse``: stop accepting connections."""
        self._down = mode
        if mode == "refuse":
            self._close_listener()

    def up(self) -> None:
        """Undo `down`; a refused listener is reopened on the same port."""
        mode, self._down = self._down, None
        if mode == "refuse" and not self._stopping.is_set() and self._server is None:
            self._listen()

    @property
    def is_down(self) -> DownMode | None:
        return self._down

    # --- used by the handler

    def _next_fault(self, endpoint: Endpoint) -> InjectedFault | None:
        with self._lock:
            queue = self._faults[endpoint]
            return queue.popleft() if queue else None

    def _next_id(self) -> int:
        with self._lock:
            self._counter += 1
            return self._counter

    def _sleep(self, seconds: float) -> None:
        """Interruptible by `stop`, so a slow answer never outlives the server."""
        if seconds > 0:
            self._stopping.wait(seconds)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    #: listen backlog (socketserver's default is 5): benchmarks open 64+ connections at once
    request_queue_size = 256
    owner: JudgeServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away mid-request (a replica killed by a bench) is no error."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _HTTPError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        *,
        kind: str = "invalid_request_error",
        param: str | None = None,
        code: str | int | None = None,
        retry: bool = False,
        extra: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind
        self.param = param
        self.code = code
        self.retry = retry
        #: more fields of the error object (llama.cpp's ``n_prompt_tokens``, ``n_ctx``)
        self.extra = dict(extra or {})


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "rag-monitor-judge/1"
    #: TCP_NODELAY: headers and body are two writes; with Nagle's algorithm the body waits
    #: for the client's delayed ACK (40 ms on Linux) on every keep-alive request
    disable_nagle_algorithm = True
    #: idle keep-alive connections are dropped after this many seconds
    timeout = 10
    server: _Server

    # --- plumbing

    def log_message(self, format: str, *args: Any) -> None:
        return  # quiet: tests run with warnings as errors and read their own stats

    def _refusing(self) -> bool:
        owner = self.server.owner
        if owner.is_down == "refuse" or owner._stopping.is_set():
            self.close_connection = True
            return True
        return False

    def do_GET(self) -> None:
        if self._refusing():
            return
        owner = self.server.owner
        if owner.is_down == "503":
            self._error(_HTTPError(503, "judge is down", kind="server_error", retry=True))
            return
        if self.path.rstrip("/") in {"/v1/models", "/models"}:
            self._json(
                200,
                {
                    "object": "list",
                    "data": [
                        {
                            "id": owner.model,
                            "object": "model",
                            "created": 0,
                            "owned_by": "rag-monitor",
                        }
                    ],
                },
            )
            return
        self._error(_HTTPError(404, f"no route {self.path}", kind="not_found_error"))

    def do_POST(self) -> None:
        if self._refusing():
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        owner = self.server.owner
        owner.stats.enter()
        try:
            body = self._read_body()
            owner._sleep(owner._latency_of(path))
            if owner.is_down == "503":
                raise _HTTPError(503, "judge is down", kind="server_error", retry=True)
            if path in {"/v1/chat/completions", "/chat/completions"}:
                self._json(200, self._chat(body))
            elif path in {"/v1/embeddings", "/embeddings"}:
                self._json(200, self._embeddings(body))
            else:
                raise _HTTPError(404, f"no route {self.path}", kind="not_found_error")
        except _HTTPError as exc:
            self._error(exc)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True
        except Exception as exc:  # a bug in an answer function: a server error, not a hang
            self._error(_HTTPError(500, f"{type(exc).__name__}: {exc}", kind="server_error"))
        finally:
            owner.stats.leave()

    def _read_body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"null")
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise _HTTPError(400, "request body is not JSON") from None
        if not isinstance(body, dict):
            raise _HTTPError(400, "request body must be a JSON object")
        return body

    def _json(
        self, status: int, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None
    ) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up (timeout): nothing to say

    def _error(self, exc: _HTTPError) -> None:
        headers: dict[str, str] = {}
        if exc.retry:
            headers = {
                "Retry-After": "0",
                "retry-after-ms": str(self.server.owner.retry_after_ms),
            }
        payload = {
            "error": {
                "message": exc.message,
                "type": exc.kind,
                "param": exc.param,
                "code": exc.code,
                **exc.extra,
            }
        }
        self._json(exc.status, payload, headers)

    # --- chat completions

    def _chat(self, body: dict[str, Any]) -> dict[str, Any]:
        from monitor.tokens import estimate_prompt_tokens

        owner = self.server.owner
        model = body.get("model")
        messages = body.get("messages")
        if not isinstance(model, str) or not model:
            raise _HTTPError(400, "model is required", param="model")
        if not isinstance(messages, list) or not messages:
            raise _HTTPError(400, "messages must be a non-empty list", param="messages")
        texts = [_message(m) for m in messages]
        n = body.get("n", 1)
        if n is None:
            n = 1
        if not isinstance(n, int) or isinstance(n, bool) or n < 1 or n > 128:
            raise _HTTPError(400, "n must be an integer between 1 and 128", param="n")
        fmt = _response_format(body.get("response_format"))
        cap = _cap(body)
        step, inputs_text = _find_prompt(texts)
        spec = body["response_format"].get("json_schema") if fmt == "json_schema" else None
        owner.stats.chat_request(step, fmt, spec["schema"] if isinstance(spec, dict) else None, cap)
        if owner.refuse_max_tokens and "max_tokens" in body:
            raise _HTTPError(
                400,
                "Unsupported parameter: 'max_tokens' is not supported with this model. "
                "Use 'max_completion_tokens' instead.",
                param="max_tokens",
                code="unsupported_parameter",
            )
        prompt_tokens = estimate_prompt_tokens(
            [
                {"role": str(m.get("role", "user")), "content": t}
                for m, t in zip(messages, texts, strict=True)
            ],
            model,
        )
        if prompt_tokens >= owner.context_tokens:
            raise _context_error(owner.context_error, prompt_tokens, owner.context_tokens)

        injected = owner._next_fault("chat")
        fault = injected.fault if injected is not None else None
        if fault is not None:
            owner.stats.fault(fault)
        if fault is Fault.RATE_LIMIT:
            raise _HTTPError(429, "rate limited (injected)", kind="rate_limit_error", retry=True)
        if fault is Fault.SERVER_ERROR:
            raise _HTTPError(500, "server error (injected)", kind="server_error", retry=True)
        if fault is Fault.BAD_REQUEST:
            raise _HTTPError(400, "bad request (injected)")
        if fault is Fault.BAD_REQUEST_ECHO:
            key = self.headers.get("Authorization", "").removeprefix("Bearer ")
            raise _HTTPError(
                400, f"Invalid request from key {key}: " + "this request is not valid. " * 40
            )
        if fault is Fault.UNAUTHORIZED:
            key = self.headers.get("Authorization", "").removeprefix("Bearer ")
            raise _HTTPError(401, f"Incorrect API key provided: {key}.", kind="invalid_api_key")
        if fault is Fault.SLOW and injected is not None:
            owner._sleep(injected.seconds)
        if fmt == "json_schema" and (owner.reject_json_schema or fault is Fault.REJECT_JSON_SCHEMA):
            raise _HTTPError(
                400,
                "response_format json_schema is not supported by this server",
                param="response_format",
            )
        if step is None or inputs_text is None:
            raise _HTTPError(
                400, "not a rag-monitor prompt (no 'Step:' user message)", param="messages"
            )
        try:
            inputs = json.loads(inputs_text)
        except json.JSONDecodeError:
            raise _HTTPError(400, "the prompt's inputs are not JSON", param="messages") from None
        if not isinstance(inputs, dict):
            raise _HTTPError(400, "the prompt's inputs must be a JSON object", param="messages")

        wanted = 1 if owner.ignore_n or fault is Fault.IGNORE_N else n
        if fault is Fault.RUNAWAY or step in owner.loop_steps:
            contents = [_runaway(step) for _ in range(wanted)]
        elif fault is Fault.INVALID_JSON:
            contents = [
                'Sure! Here is the JSON you asked for: {"statements": [' for _ in range(wanted)
            ]
        elif fault is Fault.SCHEMA_MISMATCH:
            contents = [json.dumps({"unexpected": "field"}) for _ in range(wanted)]
        else:
            answers = owner.answer(step, inputs, wanted)
            contents = [json.dumps(a, ensure_ascii=False) for a in answers[:wanted]]

        # an answer ends at the cap, or where it fills the context: cut there
        room = owner.context_tokens - prompt_tokens
        limit = min(cap[1], room) if cap is not None else room
        choices = [_cut(c, limit, model) for c in contents]
        completion_tokens = sum(tokens for _, tokens, _ in choices)
        for _, tokens, why in choices:
            owner.stats.finished(step, tokens, why)
        owner.stats.answered(step, len(choices), prompt_tokens, completion_tokens)
        return {
            "id": f"chatcmpl-{owner._next_id()}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "system_fingerprint": "rag-monitor-test",
            "choices": [
                {
                    "index": i,
                    "message": {"role": "assistant", "content": c, "refusal": None},
                    "finish_reason": why,
                    "logprobs": None,
                }
                for i, (c, _, why) in enumerate(choices)
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }

    # --- embeddings

    def _embeddings(self, body: dict[str, Any]) -> dict[str, Any]:
        from monitor.tokens import count_tokens

        owner = self.server.owner
        model = body.get("model")
        if not isinstance(model, str) or not model:
            raise _HTTPError(400, "model is required", param="model")
        raw = body.get("input")
        texts = [raw] if isinstance(raw, str) else raw
        if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
            raise _HTTPError(
                400, "input must be a string or a non-empty list of strings", param="input"
            )
        encoding = body.get("encoding_format") or "float"
        if encoding not in {"float", "base64"}:
            raise _HTTPError(
                400, "encoding_format must be float or base64", param="encoding_format"
            )
        injected = owner._next_fault("embeddings")
        if injected is not None:
            owner.stats.fault(injected.fault)
            if injected.fault is Fault.RATE_LIMIT:
                raise _HTTPError(
                    429, "rate limited (injected)", kind="rate_limit_error", retry=True
                )
            if injected.fault is Fault.SERVER_ERROR:
                raise _HTTPError(500, "server error (injected)", kind="server_error", retry=True)
            if injected.fault is Fault.SLOW:
                owner._sleep(injected.seconds)
        vectors = owner.embed(list(texts))
        if len(vectors) != len(texts):
            raise _HTTPError(
                500, "embed function returned the wrong number of vectors", kind="server_error"
            )
        tokens = sum(count_tokens(t, model) for t in texts)
        owner.stats.embedding_request(len(texts), tokens)
        data: list[dict[str, Any]] = []
        for i, vector in enumerate(vectors):
            floats = [float(x) for x in vector]
            encoded: object = floats
            if encoding == "base64":
                encoded = base64.b64encode(struct.pack(f"<{len(floats)}f", *floats)).decode()
            data.append({"object": "embedding", "index": i, "embedding": encoded})
        return {
            "object": "list",
            "data": data,
            "model": model,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }


def _message(message: object) -> str:
    """The text of one chat message (string content or text parts)."""
    if not isinstance(message, dict):
        raise _HTTPError(400, "each message must be an object", param="messages")
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        ]
        return "".join(str(p) for p in parts)
    raise _HTTPError(400, "message content must be a string or a list of parts", param="messages")


def _response_format(value: object) -> str:
    if value is None:
        return "none"
    if not isinstance(value, dict) or value.get("type") not in {
        "json_schema",
        "json_object",
        "text",
    }:
        raise _HTTPError(
            400,
            "response_format.type must be json_schema, json_object or text",
            param="response_format",
        )
    kind = str(value["type"])
    if kind == "json_schema":
        spec = value.get("json_schema")
        if (
            not isinstance(spec, dict)
            or not isinstance(spec.get("name"), str)
            or not isinstance(spec.get("schema"), dict)
        ):
            raise _HTTPError(400, "json_schema needs a name and a schema", param="response_format")
    return kind


def _cap(body: dict[str, Any]) -> tuple[str, int] | None:
    """The request's output cap: (its field, its value), ``max_completion_tokens`` first."""
    for name in ("max_completion_tokens", "max_tokens"):
        value = body.get(name)
        if value is None:
            continue
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise _HTTPError(400, f"{name} must be a positive integer", param=name)
        return name, value
    return None


#: what a runaway answer repeats: a small model restating its input
_RUNAWAY_PHRASE = "What does the policy say about the refund of the fee?"


def _runaway(step: str) -> str:
    """The start of an answer that never ends (the server cuts it at the cap or the context):
    a JSON list that repeats one item. Long enough for any cap the tests send."""
    item = json.dumps(_RUNAWAY_PHRASE)
    return '{"' + step + '": [' + ", ".join([item] * 6_000)


def _cut(content: str, limit: int, model: str) -> tuple[str, int, str]:
    """(content, its tokens, finish_reason): whole (``stop``) when it fits in ``limit``
    tokens, else its longest prefix that does (``length``)."""
    from monitor.tokens import count_tokens

    tokens = count_tokens(content, model)
    if tokens <= limit:
        return content, tokens, "stop"
    # the longest prefix of at most `limit` tokens; a token is rarely over 16 characters
    low, high = 0, min(len(content), 16 * (limit + 1))
    if count_tokens(content[:high], model) <= limit:
        high = len(content)
    while low < high:
        middle = (low + high + 1) // 2
        if count_tokens(content[:middle], model) <= limit:
            low = middle
        else:
            high = middle - 1
    cut = content[:low]
    return cut, count_tokens(cut, model), "length"


def _context_error(style: ContextError, prompt_tokens: int, context: int) -> _HTTPError:
    """A prompt that does not fit the context, refused as ``style``'s server words it."""
    if style == "openai":
        return _HTTPError(
            400,
            f"This model's maximum context length is {context} tokens. However, your "
            f"messages resulted in {prompt_tokens} tokens. Please reduce the length of the "
            "messages.",
            param="messages",
            code="context_length_exceeded",
        )
    return _HTTPError(
        400,
        f"request ({prompt_tokens} tokens) exceeds the available context size ({context} "
        "tokens), try increasing it",
        kind="exceed_context_size_error",
        code=400,
        extra={"n_prompt_tokens": prompt_tokens, "n_ctx": context},
    )


def _find_prompt(texts: list[str]) -> tuple[str | None, str | None]:
    """(step, inputs JSON) from the first message that parses as a rag-monitor prompt."""
    for text in texts:
        try:
            return parse_user_message(text)
        except ValueError:
            continue
    return None, None


_NUMBER = re.compile(r"expenses over (\d+) dollars|for item (\d+) lodging")


class RecordingJudge(JudgeServer):
    """The real judge server, remembering which records it was asked about.

    ``scored[i]`` is how many times record ``i`` was scored: the highest number
    of requests any one step received for it (each scoring asks each step once).
    """

    def __init__(self) -> None:
        super().__init__(answer=self._answer)
        self._requests: Counter[tuple[str, int]] = Counter()
        self._seen_lock = threading.Lock()

    @property
    def scored(self) -> Counter[int]:
        with self._seen_lock:
            out: Counter[int] = Counter()
            for (_, i), count in self._requests.items():
                out[i] = max(out[i], count)
            return out

    def _answer(self, step: str, inputs: dict[str, Any], n: int) -> list[dict[str, Any]]:
        found = {int(a) - 100 if a else int(b) for a, b in _NUMBER.findall(json.dumps(inputs))}
        with self._seen_lock:
            for i in found:
                self._requests[(step, i)] += 1
        return _default_answer(step, inputs, n)
