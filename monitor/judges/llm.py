"""The LLM judge: prompts over HTTP to any OpenAI-compatible endpoint. The only `openai` import.

`OpenAIJudge` implements `monitor.judges.Judge` with the AsyncOpenAI SDK:

- **Structured output.** ``response_format`` ``json_schema`` (strict) named
  after the step; an endpoint that rejects it with a 400-class error gets
  ``json_object`` with the schema spelled out in the system message instead,
  and keeps getting it once that worked. Every answer is validated with
  pydantic; an invalid answer is re-asked once (the bad answer and a short
  correction appended), then the step fails for good: ``invalid_output``.
  A prompt's pinned list lengths (`monitor.judges.Prompt.lengths`) go into the
  schema as ``minItems``/``maxItems`` and are checked on the answer; a prompt
  with ``reask`` False (the fused ``grounding`` step) is not re-asked: its
  metrics fall back to the basic steps (outcome ``fallback_steps``). A
  ``statements`` answer's statements are cut at sentence boundaries
  (`monitor.judges.replies.one_claim_per_sentence`).
- **n choices.** ``n`` is sent as is; when the endpoint returns fewer choices
  (llama.cpp beyond its slots, servers that ignore ``n``) the missing ones are
  requested with ``n=1`` calls.
- **One retry layer.** The SDK retries 429, 5xx, timeouts and connection
  errors (``max_retries``); when it gives up, the exception *class* becomes a
  `JudgeError` reason: ``timeout``, ``rate_limited``, ``server_error``,
  ``connection`` (retryable) or ``bad_request`` (permanent). A request that
  timed out is retried only after waiting as long as its timeout (outcome
  ``timeout_backoff`` for each such wait): the endpoint may still be working
  on the abandoned request, and an immediate re-send would queue behind it.
- **Budget.** With a `TokenGate`, every HTTP request reserves its estimated
  prompt tokens (exact, `monitor.tokens`) plus the expected completion before
  it is sent (`BudgetExhausted`: nothing is sent) and reconciles with the
  response's ``usage`` after — with 0 when no response came back, except
  after a timeout: the endpoint may still have done, and billed, an attempt
  its client abandoned, so each timed-out attempt is charged its reservation
  (a retry after one is sent only when the budget covers that charge).
- **Bounds.** A timeout per request attempt (``step_timeouts`` per step, else
  ``timeout_seconds``) and a semaphore of ``concurrency`` requests in flight.
- **CPU.** Requests go through the SDK's generic ``post`` (auth, retries,
  timeouts and error classes as usual) with the JSON body built here and the
  answer read as plain JSON, over the SDK's aiohttp transport: the typed
  ``create`` methods and the httpx connection pool cost more CPU per record
  than everything else the sidecar does (docs/benchmarks.md, Sidecar ingest).
- **Observability** without a Prometheus import: a `JudgeObserver` hears every
  request's outcome and duration and every response's tokens per metric.

A prompt's chat messages and strict schema come from `monitor.judges.wire`;
the response bodies are read and validated by `monitor.judges.replies`. What
stays here is what touches the SDK: one concept, longer than most, that reads best whole.

The API key lives in a `SecretStr`; it is handed to the SDK and never appears
in a repr or a log line.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from types import TracebackType
from typing import Any, Literal, Protocol

import openai
from pydantic import SecretStr

from monitor.judges import BudgetExhausted, Embedded, Judged, JudgeError, OutT, Prompt, TokenGate
from monitor.judges.replies import (
    Invalid,
    chat_contents,
    embedding_vectors,
    one_claim_per_sentence,
    token_usage,
    try_parse,
)
from monitor.judges.wire import render_messages, request_schema
from monitor.records import Usage
from monitor.tokens import count_tokens, estimate_prompt_tokens

log = logging.getLogger(__name__)
#: the tokens reserved for the request being sent, for a timed-out attempt's charge
_ATTEMPT_TOKENS: ContextVar[int] = ContextVar("judge_attempt_tokens", default=0)

ResponseMode = Literal["json_schema", "json_object"]

#: appended (as a user message, after the bad answer) when an answer fails validation
CORRECTION = (
    "Your previous answer was not valid: {error}. Answer again with only one JSON object "
    "that matches the required schema exactly, and nothing else."
)

#: the placeholder key for endpoints that need none (llama.cpp, vLLM, Ollama)
NO_KEY = "no-key"


#: the ``metric`` label under which embedding tokens are reported to the observer
EMBEDDINGS_METRIC = "embeddings"


class JudgeObserver(Protocol):
    """What the sidecar exports about the judge (see `monitor.sinks.prometheus`).

    ``outcome`` is ``ok``, ``invalid_output``, ``fallback`` (json_schema
    rejected, retried as json_object), ``fallback_steps`` (a fused step's
    answer was invalid: its metrics are asked the basic steps instead),
    ``timeout_backoff`` (an attempt timed out; the SDK's retry waits as long as
    the timeout first; ``seconds`` is that timeout) or a `JudgeError` reason.
    """

    def on_request(self, outcome: str, seconds: float) -> None: ...

    def on_tokens(self, metric: str, prompt_tokens: int, completion_tokens: int) -> None: ...


class Embedder(Protocol):
    """Something other than the endpoint that embeds text (the local ONNX model).

    The judge closes it in its own `OpenAIJudge.aclose`.
    """

    async def embed(self, texts: Sequence[str]) -> Embedded: ...

    async def aclose(self) -> None: ...


class _SchemaRejected(Exception):
    """The endpoint refused ``response_format`` json_schema (internal: triggers the fallback)."""


def _classify(exc: openai.OpenAIError, secret: str = "") -> JudgeError:
    """The SDK gave up: exception class → bounded reason (never chosen by the message text).

    A refused key (HTTP 401 or 403) is ``auth``: its detail keeps what the server said
    (``secret``, the key, cut out should the server echo it) and names the setting.
    """
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        said = _server_message(exc)
        if secret:
            said = said.replace(secret, "***")
        return JudgeError(
            "auth", f"HTTP {status}: {said}; check RAG_MONITOR_JUDGE_API_KEY" if said else
            f"HTTP {status}; check RAG_MONITOR_JUDGE_API_KEY",
        )  # fmt: skip
    detail = f"{name} (HTTP {status})" if status is not None else name
    refused = _connection_error(exc)
    if refused is not None:  # what the OS said, by class (the SDK may call it a timeout)
        detail = _CONNECTION_ERRORS.get(type(refused), type(refused).__name__)
    if isinstance(exc, openai.APITimeoutError) and refused is None:
        # before APIConnectionError (a subclass); the aiohttp transport reports a refused
        # or reset connection as a connect *timeout*: the cause chain tells them apart
        return JudgeError("timeout", detail, retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        return JudgeError("connection", detail, retryable=True)
    if isinstance(exc, openai.RateLimitError):
        return JudgeError("rate_limited", detail, retryable=True)
    if isinstance(exc, openai.InternalServerError):
        return JudgeError("server_error", detail, retryable=True)
    if isinstance(exc, openai.APIResponseValidationError):
        return JudgeError("invalid_output", detail)
    return JudgeError("bad_request", detail)


def _server_message(exc: openai.APIStatusError, limit: int = 300) -> str:
    """The error message of the server's JSON body (OpenAI's ``error.message``), else its text."""
    body = exc.body
    message: object = None
    if isinstance(body, dict):
        inner = body.get("error", body)
        message = inner.get("message") if isinstance(inner, dict) else inner
    if not isinstance(message, str) or not message.strip():
        message = exc.response.text if exc.response is not None else ""
    text = " ".join(str(message).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


#: the OS's connection errors in words, for a JudgeError's detail
_CONNECTION_ERRORS: dict[type[BaseException], str] = {
    ConnectionRefusedError: "connection refused",
    ConnectionResetError: "connection reset",
    ConnectionAbortedError: "connection aborted",
    BrokenPipeError: "broken pipe",
}


def _connection_error(exc: BaseException) -> ConnectionError | None:
    """A connection error of the OS (refused, reset, unreachable) in the cause chain, if any."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionError):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


class OpenAIJudge:
    """`monitor.judges.Judge` over an OpenAI-compatible HTTP endpoint (see the module docstring).

    Constructing one opens nothing: the SDK client is created on first use.
    Close it with `aclose` (or ``async with``).
    """

    kind = "llm"

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: SecretStr | None = None,
        embedding_model: str = "text-embedding-3-small",
        timeout_seconds: float = 60.0,
        step_timeouts: Mapping[str, float] | None = None,
        max_retries: int = 2,
        concurrency: int = 16,
        gate: TokenGate | None = None,
        observer: JudgeObserver | None = None,
        embedder: Embedder | None = None,
        completion_reserve: int = 512,
        temperature: float | None = 0.0,
        sampling_temperature: float | None = 0.7,
        embed_batch_size: int = 128,
        fuse_grounding: bool = True,
    ) -> None:
        step_timeouts = dict(step_timeouts or {})
        if (
            concurrency < 1
            or max_retries < 0
            or timeout_seconds <= 0
            or embed_batch_size < 1
            or any(t <= 0 for t in step_timeouts.values())
        ):
            raise ValueError("concurrency and embed_batch_size >= 1, max_retries >= 0, timeout > 0")
        self.base_url = base_url
        self.model = model
        self.embedding_model = embedding_model
        self.timeout_seconds = timeout_seconds
        #: a timeout per step name (``grounding``, ``questions``, ...; ``embeddings``), else
        #: ``timeout_seconds``
        self.step_timeouts = step_timeouts
        self.max_retries = max_retries
        self.concurrency = concurrency
        #: completion tokens reserved per requested choice (reconciled with the real usage)
        self.completion_reserve = completion_reserve
        #: temperature for single answers (verdicts) and for n>1 sampling steps; None = omit
        self.temperature = temperature
        self.sampling_temperature = sampling_temperature
        self.embed_batch_size = embed_batch_size
        #: whether `monitor.scoring.Scorer` may ask this judge the fused ``grounding`` step
        self.fuse_grounding = fuse_grounding
        #: sampled choices (``n``) of one prompt may differ
        self.varies_choices = True
        self.gate = gate
        self.observer = observer
        self.embedder = embedder
        self._api_key = api_key if api_key is not None else SecretStr("")
        self._client: openai.AsyncOpenAI | None = None
        self._semaphore = asyncio.Semaphore(concurrency)
        #: json_schema until the endpoint rejects it and json_object works
        self.response_mode: ResponseMode = "json_schema"

    def __repr__(self) -> str:
        return (
            f"OpenAIJudge(base_url={self.base_url!r}, model={self.model!r}, "
            f"embedding_model={self.embedding_model!r}, response_mode={self.response_mode!r})"
        )

    # --- lifecycle

    @property
    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = _BackingOffClient(
                on_backoff=self._on_backoff,
                base_url=self.base_url,
                api_key=self._api_key.get_secret_value() or NO_KEY,
                timeout=self.timeout_seconds,
                max_retries=self.max_retries,
                http_client=openai.DefaultAioHttpClient(
                    timeout=max([self.timeout_seconds, *self.step_timeouts.values()])
                ),
            )
        return self._client

    def timeout_of(self, step: str) -> float:
        """The timeout of one attempt of ``step``'s requests."""
        return self.step_timeouts.get(step, self.timeout_seconds)

    def _on_backoff(self, seconds: float) -> None:
        log.info("judge request timed out; waiting before the retry", extra={"seconds": seconds})
        if self.observer is not None:
            self.observer.on_request("timeout_backoff", seconds)
        tokens = _ATTEMPT_TOKENS.get()
        if self.gate is not None and tokens:
            # the abandoned attempt is charged what it reserved; BudgetExhausted here
            # leaves the SDK's retry loop: no retry is sent
            self.gate.reserve(tokens)
            self.gate.reconcile(tokens, tokens)

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.close()
        if self.embedder is not None:
            await self.embedder.aclose()

    async def __aenter__(self) -> OpenAIJudge:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # --- Judge: generate

    async def generate(self, prompt: Prompt[OutT], n: int = 1) -> Judged[OutT]:
        if n < 1:
            raise ValueError("n must be >= 1")
        usage = Usage()
        temperature = self.temperature if n == 1 else self.sampling_temperature
        values: list[OutT] = []
        answers = await self._complete(prompt, None, n, temperature, usage)
        # the endpoint may return fewer choices than asked: top up one at a time
        while len(answers) < n:
            more = await self._complete(prompt, None, 1, temperature, usage)
            if not more:
                raise JudgeError("invalid_output", "the endpoint returned no choices")
            answers.extend(more)
        for answer in answers[:n]:
            value = await self._validated(prompt, answer, temperature, usage)
            values.append(one_claim_per_sentence(value))
        return Judged(values=values, usage=usage)

    async def _validated(
        self,
        prompt: Prompt[OutT],
        answer: OutT | Invalid,
        temperature: float | None,
        usage: Usage,
    ) -> OutT:
        """The validated answer; an invalid one is re-asked once."""
        if not isinstance(answer, Invalid):
            return answer
        if not prompt.reask:
            raise JudgeError("invalid_output", f"step {prompt.step}: {answer.summary}")
        log.info(
            "judge answer invalid, re-asking once",
            extra={
                "step": prompt.step,
                "metric": prompt.metric,
                "error": answer.summary,
                "model": self.model,
            },
        )
        followup = [
            {"role": "assistant", "content": answer.content or ""},
            {"role": "user", "content": CORRECTION.format(error=answer.summary)},
        ]
        again = await self._complete(prompt, followup, 1, temperature, usage)
        second = again[0] if again else Invalid("empty answer", None)
        if isinstance(second, Invalid):
            raise JudgeError(
                "invalid_output", f"step {prompt.step}: {second.summary} (after one re-ask)"
            )
        return second

    async def _complete(
        self,
        prompt: Prompt[OutT],
        followup: list[dict[str, str]] | None,
        n: int,
        temperature: float | None,
        usage: Usage,
    ) -> list[OutT | Invalid]:
        """One chat request (two when json_schema is rejected): the choices, validated."""
        mode = self.response_mode
        if mode == "json_schema":
            try:
                return await self._request(prompt, followup, n, temperature, usage, "json_schema")
            except _SchemaRejected:
                log.warning(
                    "judge endpoint rejected response_format json_schema; "
                    "falling back to json_object with the schema in the prompt",
                    extra={"model": self.model},
                )
        answers = await self._request(prompt, followup, n, temperature, usage, "json_object")
        self.response_mode = "json_object"  # it worked: stay with it
        return answers

    async def _request(
        self,
        prompt: Prompt[OutT],
        followup: list[dict[str, str]] | None,
        n: int,
        temperature: float | None,
        usage: Usage,
        mode: ResponseMode,
    ) -> list[OutT | Invalid]:
        """One HTTP request: each choice validated (the model, or why it is not valid)."""
        messages: list[dict[str, str]] = render_messages(
            prompt, schema_in_text=mode == "json_object"
        )
        if followup:
            messages = messages + followup
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": prompt.step,
                    "schema": request_schema(prompt.output, tuple(prompt.lengths.items())),
                    "strict": True,
                },
            }
        else:
            body["response_format"] = {"type": "json_object"}
        if n > 1:
            body["n"] = n
        if temperature is not None:
            body["temperature"] = temperature
        estimate = estimate_prompt_tokens(messages, self.model)

        async with self._semaphore:
            reserved = estimate + self.completion_reserve * n
            if self.gate is not None:
                self.gate.reserve(reserved)  # BudgetExhausted: nothing is sent
            used = 0
            started = time.perf_counter()
            outcome = "ok"
            attempt = _ATTEMPT_TOKENS.set(reserved)
            try:
                # the SDK's generic request (auth, retries, timeouts, error classes) with the
                # body as built here: `chat.completions.create` would walk the body against its
                # typed parameters and build the response as SDK models, which cost more CPU
                # than everything else in scoring a record
                data = await self.client.post(
                    "/chat/completions",
                    cast_to=object,
                    body=body,
                    options={"timeout": self.timeout_of(prompt.step)},
                )
                contents, reported = chat_contents(data)
                prompt_tokens, completion_tokens = token_usage(
                    reported, estimate, contents, self.model
                )
                used = prompt_tokens + completion_tokens
                usage.calls += 1
                usage.prompt_tokens += prompt_tokens
                usage.completion_tokens += completion_tokens
                if self.observer is not None:
                    self.observer.on_tokens(prompt.metric, prompt_tokens, completion_tokens)
                answers = [try_parse(prompt.output, c, prompt.lengths) for c in contents]
                if any(isinstance(a, Invalid) for a in answers):
                    outcome = "invalid_output" if prompt.reask else "fallback_steps"
                return answers
            except JudgeError as exc:  # the body is not a chat completion, or no retry
                outcome = exc.reason
                if isinstance(exc, BudgetExhausted):  # the timed-out attempt before it
                    used = reserved
                raise
            except (openai.BadRequestError, openai.UnprocessableEntityError) as exc:
                if mode == "json_schema":
                    outcome = "fallback"
                    raise _SchemaRejected() from exc
                outcome = "bad_request"
                raise _classify(exc, self._api_key.get_secret_value()) from None
            except openai.OpenAIError as exc:
                error = _classify(exc, self._api_key.get_secret_value())
                outcome = error.reason
                if _timed_out(exc):  # the last attempt was abandoned, maybe billed
                    used = reserved
                raise error from None
            except asyncio.CancelledError:
                outcome = "cancelled"
                raise
            finally:
                _ATTEMPT_TOKENS.reset(attempt)
                if self.gate is not None:
                    self.gate.reconcile(reserved, used)
                if self.observer is not None:
                    self.observer.on_request(outcome, time.perf_counter() - started)

    # --- Judge: embed

    async def embed(self, texts: Sequence[str]) -> Embedded:
        if self.embedder is not None:
            return await self.embedder.embed(texts)
        texts = list(texts)
        result = Embedded(vectors=[])
        for start in range(0, len(texts), self.embed_batch_size):
            batch = texts[start : start + self.embed_batch_size]
            result.vectors.extend(await self._embed_batch(batch, result.usage))
        return result

    async def _embed_batch(self, texts: list[str], usage: Usage) -> list[list[float]]:
        # endpoints reject empty inputs: embed the others, give empty texts zero vectors
        present = [i for i, t in enumerate(texts) if t.strip()]
        send = [texts[i] for i in present] if present else [" "]
        # embeddings are billed like chat calls: reserved before sending, reconciled after
        # counted with the chat model's encoding: an estimate for the reservation only (the
        # endpoint's usage replaces it), and one encoding in memory instead of two (~55 MB)
        estimate = sum(count_tokens(t, self.model) for t in send)
        if self.gate is not None:
            self.gate.reserve(estimate)  # BudgetExhausted: nothing is sent
        used = 0
        #: what the budget is charged: the usage, or the reservation of an abandoned attempt
        charged = 0
        async with self._semaphore:
            started = time.perf_counter()
            outcome = "ok"
            attempt = _ATTEMPT_TOKENS.set(estimate)
            try:
                # the SDK's generic request, base64 vectors decoded here: the typed
                # `embeddings.create` builds every number through its model layer
                data = await self.client.post(
                    "/embeddings",
                    cast_to=object,
                    options={"timeout": self.timeout_of(EMBEDDINGS_METRIC)},
                    body={
                        "model": self.embedding_model,
                        "input": send,
                        "encoding_format": "base64",
                    },
                )
                got, reported = embedding_vectors(data, len(send))
                used = charged = reported if reported else estimate
            except JudgeError as exc:
                outcome = exc.reason
                if isinstance(exc, BudgetExhausted):  # the timed-out attempt before it
                    charged = estimate
                raise
            except openai.OpenAIError as exc:
                error = _classify(exc, self._api_key.get_secret_value())
                outcome = error.reason
                if _timed_out(exc):  # the last attempt was abandoned, maybe billed
                    charged = estimate
                raise error from None
            finally:
                _ATTEMPT_TOKENS.reset(attempt)
                if self.gate is not None:
                    self.gate.reconcile(estimate, charged)
                if self.observer is not None:
                    self.observer.on_request(outcome, time.perf_counter() - started)
                    if used:
                        self.observer.on_tokens(EMBEDDINGS_METRIC, used, 0)
        usage.calls += 1
        usage.prompt_tokens += used
        dimension = len(got[0])
        vectors = [[0.0] * dimension for _ in texts]
        if present:
            for i, vector in zip(present, got, strict=True):
                vectors[i] = vector
        return vectors


class _BackingOffClient(openai.AsyncOpenAI):
    """The SDK's client with one change to its own retries: after an attempt that timed out
    (not a refused connection), the retry waits as long as that attempt's timeout (less up
    to a quarter, at random) instead of half a second. A server that does not stop working
    on a request its client abandoned (llama.cpp's, most self-hosted ones) is then not sent
    the same request again while it is still busy with the first."""

    def __init__(self, *, on_backoff: Callable[[float], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._on_backoff = on_backoff

    async def _sleep_for_retry(
        self, *, retries_taken: int, max_retries: int, options: Any, response: Any
    ) -> None:
        # called by the SDK inside its ``except`` for the failed attempt: the exception
        # being handled says whether it timed out
        failure = sys.exc_info()[1]
        if response is None and _timed_out(failure):
            timeout = options.timeout if isinstance(options.timeout, int | float) else None
            wait = float(timeout if timeout is not None else self.timeout)  # type: ignore[arg-type]
            self._on_backoff(wait)
            await asyncio.sleep(wait * (1 - 0.25 * random.random()))
            return
        await super()._sleep_for_retry(
            retries_taken=retries_taken,
            max_retries=max_retries,
            options=options,
            response=response,
        )


def _timed_out(failure: BaseException | None) -> bool:
    """A failed attempt that timed out waiting for the endpoint, as opposed to a refused,
    reset or dropped connection (which the aiohttp transport also reports as a timeout):
    the root of the cause chain is a `TimeoutError`, or the timeout has no cause at all."""
    if failure is None:
        return False
    seen: set[int] = set()
    root = failure
    while id(root) not in seen:
        seen.add(id(root))
        cause = root.__cause__ or root.__context__
        if cause is None:
            break
        root = cause
    if isinstance(root, TimeoutError):
        return True
    return root is failure and "Timeout" in type(failure).__name__
