"""The LLM judge over any OpenAI-compatible endpoint; the only `openai` import.

`OpenAIJudge` implements `monitor.judges.Judge`: structured output, an output cap on
every answer, re-asks, n choices, one metered request (budget, retries, observer) for
chat and embeddings alike (docs/design.md, "The LLM judge's requests"). Prompts become
messages in `monitor.judges.wire`; each answer's cap is sized in `monitor.judges.caps`;
answers are read in `monitor.judges.replies`.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Generic, Literal, Protocol, TypeVar

import openai
import structlog
from pydantic import SecretStr

from monitor.judges import Embedded, Judged, JudgeError, OutT, Prompt, TokenGate
from monitor.judges.caps import answer_cap
from monitor.judges.replies import (
    Invalid,
    Truncated,
    chat_contents,
    embedding_vectors,
    one_claim_per_sentence,
    read_answer,
    token_usage,
)
from monitor.judges.wire import render_messages, request_schema
from monitor.records import Usage
from monitor.tokens import count_tokens, estimate_prompt_tokens

log = structlog.get_logger("monitor.judges.llm")

R = TypeVar("R")

ResponseMode = Literal["json_schema", "json_object"]
#: the request field that carries the cap: ``max_tokens`` (every OpenAI-compatible server)
#: until the endpoint refuses it and names it; then ``max_completion_tokens``
CapParam = Literal["max_tokens", "max_completion_tokens"]
#: the parts of a chat request an endpoint may refuse while another form works
_Part = Literal["response_format", "max_tokens"]

#: appended (as a user message, after the start of the bad answer) when an answer fails
#: validation
CORRECTION = (
    "Your previous answer was not valid: {error}. Answer again with only one JSON object "
    "that matches the required schema exactly, and nothing else."
)
#: appended the same way when an answer was cut off at its cap
CUT_OFF = (
    "Your previous answer was cut off after {cap} tokens, before its JSON object was "
    "complete. Answer again, shorter: one complete JSON object that matches the required "
    "schema, each item once, short reasons, and nothing else."
)
#: how much of a bad answer goes back with the correction (its start, in characters): the
#: model sees what it answered, and a runaway answer cannot make the re-ask longer than
#: the endpoint's context
EXCERPT_CHARS = 300
#: how much of an endpoint's error message is kept (in a `JudgeError`'s detail, the log)
SAID_CHARS = 300

#: the placeholder key for endpoints that need none (llama.cpp, vLLM, Ollama)
NO_KEY = "no-key"


#: the ``metric`` label under which embedding tokens are reported to the observer
EMBEDDINGS_METRIC = "embeddings"


class JudgeObserver(Protocol):
    """What the sidecar exports about the judge (see `monitor.sinks.prometheus`).

    ``outcome`` is ``ok``, ``invalid_output``, ``truncated`` (an answer cut
    off at the request's cap before it was valid), ``fallback`` (json_schema
    refused, sent again as json_object), ``fallback_cap`` (``max_tokens``
    refused, sent again as ``max_completion_tokens``), ``fallback_steps`` (a
    fused step's answer was invalid: its metrics are asked the basic steps
    instead), ``timeout_backoff`` (an attempt timed out; the retry waits as
    long as the timeout first; ``seconds`` is that timeout) or a `JudgeError`
    reason (``too_long``: the request does not fit the model's context).
    """

    def on_request(self, outcome: str, seconds: float) -> None: ...

    def on_tokens(self, metric: str, prompt_tokens: int, completion_tokens: int) -> None: ...


class Embedder(Protocol):
    """Something other than the endpoint that embeds text (the local ONNX model).

    The judge closes it in its own `OpenAIJudge.aclose`.
    """

    async def embed(self, texts: Sequence[str]) -> Embedded: ...

    async def aclose(self) -> None: ...


@dataclass
class _Reply(Generic[R]):
    """What `OpenAIJudge._metered` made of one answered request."""

    value: R
    prompt_tokens: int
    completion_tokens: int
    #: the observer's outcome for the request (``invalid_output`` when a choice is not valid)
    outcome: str = "ok"


class _Refused(Exception):
    """The endpoint refused a part of the request that has another form (internal: the
    request is sent again in that form)."""

    def __init__(self, part: _Part, said: str) -> None:
        super().__init__(part)
        self.part = part
        self.said = said


#: error codes or types by which endpoints say a request does not fit the model's
#: context: OpenAI's (and the servers that copy its errors), llama.cpp's
_TOO_LONG = frozenset(
    {"context_length_exceeded", "string_above_max_length", "exceed_context_size_error"}
)
#: error types that say no more than the status does
_GENERIC_TYPES = frozenset({"invalid_request_error", "BadRequestError", "bad_request"})


@dataclass(frozen=True)
class _Refusal:
    """What an endpoint sent with an HTTP 4xx: its message (cut to `SAID_CHARS`, the key
    cut out), its error ``code`` (a number is only the status again, so None), ``type``
    and the ``param`` it names, as the SDK read them from the JSON error body."""

    status: int
    said: str
    code: str | None
    kind: str | None
    param: str | None

    @classmethod
    def of(cls, exc: openai.APIStatusError, secret: str = "") -> _Refusal:
        said = _server_message(exc, SAID_CHARS)
        if secret:
            said = said.replace(secret, "***")
        code = exc.code if exc.code and not exc.code.isdigit() else None
        kind = exc.type if isinstance(exc.type, str) and exc.type else None
        param = exc.param if isinstance(exc.param, str) and exc.param else None
        return cls(exc.status_code, said, code, kind, param)

    @property
    def too_long(self) -> bool:
        """The request does not fit the model's context (413, or a code or type saying so)."""
        return self.status == 413 or bool({self.code, self.kind} & _TOO_LONG)

    def part(self, refusable: frozenset[_Part]) -> _Part | None:
        """The part of ``refusable`` the endpoint refused: the one it names; else, when it
        says nothing beyond the status, ``response_format`` (json_schema is what servers
        that support only part of the API refuse); else None."""
        if self.too_long:
            return None
        named = (self.param or "").split(".")[0].split("[")[0]
        for part in refusable:
            if named == part:
                return part
        generic = self.code is None and (self.kind is None or self.kind in _GENERIC_TYPES)
        if not named and generic and "response_format" in refusable:
            return "response_format"
        return None


def _classify(exc: openai.OpenAIError, secret: str = "") -> JudgeError:
    """The SDK gave up: exception class, status, error code or type → bounded reason (never
    chosen by the message text).

    A refused key (HTTP 401 or 403) is ``auth``: its detail keeps what the server said
    (``secret``, the key, cut out should the server echo it) and names the setting. Any
    other 4xx keeps the server's words as well: ``too_long`` when the request does not fit
    the model's context, else ``bad_request``.
    """
    name = type(exc).__name__
    status = getattr(exc, "status_code", None)
    if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
        said = _Refusal.of(exc, secret).said
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
    if isinstance(exc, openai.APIStatusError) and 400 <= exc.status_code < 500:
        refusal = _Refusal.of(exc, secret)
        said = f"HTTP {refusal.status}: {refusal.said}" if refusal.said else detail
        return JudgeError("too_long" if refusal.too_long else "bad_request", said)
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
        max_completion_tokens: int = 2048,
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
            or max_completion_tokens < 1
            or any(t <= 0 for t in step_timeouts.values())
        ):
            raise ValueError(
                "concurrency, embed_batch_size and max_completion_tokens >= 1, "
                "max_retries >= 0, timeout > 0"
            )
        self.base_url = base_url
        self.model = model
        self.embedding_model = embedding_model
        self.timeout_seconds = timeout_seconds
        #: a timeout per step name (``grounding``, ``questions``, ...; ``embeddings``), else
        #: ``timeout_seconds``
        self.step_timeouts = step_timeouts
        self.max_retries = max_retries
        self.concurrency = concurrency
        #: the largest cap of one answer (one choice): each request's cap is sized from its
        #: step (`monitor.judges.caps`), at most this; the budget reserves exactly the cap
        self.max_completion_tokens = max_completion_tokens
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
        #: max_tokens until the endpoint refuses it by name
        self.cap_param: CapParam = "max_tokens"

    def __repr__(self) -> str:
        return (
            f"OpenAIJudge(base_url={self.base_url!r}, model={self.model!r}, "
            f"embedding_model={self.embedding_model!r}, response_mode={self.response_mode!r})"
        )

    # --- lifecycle

    @property
    def client(self) -> openai.AsyncOpenAI:
        if self._client is None:
            self._client = openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key=self._api_key.get_secret_value() or NO_KEY,
                timeout=self.timeout_seconds,
                max_retries=0,  # the one retry layer is `_metered`
                http_client=openai.DefaultAioHttpClient(
                    timeout=max([self.timeout_seconds, *self.step_timeouts.values()])
                ),
            )
        return self._client

    def timeout_of(self, step: str) -> float:
        """The timeout of one attempt of ``step``'s requests."""
        return self.step_timeouts.get(step, self.timeout_seconds)

    def cap_of(self, prompt: Prompt[OutT]) -> int:
        """The cap of each answer (choice) to ``prompt``: sized from its step, at most
        `max_completion_tokens`; `max_completion_tokens` itself once the endpoint wants
        ``max_completion_tokens`` (OpenAI's reasoning models: their hidden reasoning counts
        against the cap, so an answer-sized cap would leave nothing for the answer)."""
        if self.cap_param == "max_completion_tokens":
            return self.max_completion_tokens
        return answer_cap(prompt, self.max_completion_tokens, self.model)

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
        """The validated answer; an invalid or cut-off one is re-asked once, with the start
        of that answer (`EXCERPT_CHARS`) and a short correction."""
        if not isinstance(answer, Invalid):
            return answer
        if not prompt.reask:
            raise JudgeError(_failure(answer), f"step {prompt.step}: {answer.summary}")
        cut = isinstance(answer, Truncated)
        log.info(
            "judge answer cut off at its cap, re-asking once"
            if cut
            else "judge answer invalid, re-asking once",
            step=prompt.step,
            metric=prompt.metric,
            error=answer.summary,
            model=self.model,
        )
        correction = (
            CUT_OFF.format(cap=answer.cap)
            if isinstance(answer, Truncated)
            else CORRECTION.format(error=answer.summary)
        )
        followup = [
            {"role": "assistant", "content": _excerpt(answer.content)},
            {"role": "user", "content": correction},
        ]
        again = await self._complete(prompt, followup, 1, temperature, usage)
        second = again[0] if again else Invalid("empty answer", None)
        if isinstance(second, Invalid):
            raise JudgeError(
                _failure(second), f"step {prompt.step}: {second.summary} (after one re-ask)"
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
        """One chat request: the choices, validated. Sent again when the endpoint refuses
        json_schema (as json_object) or ``max_tokens`` (as ``max_completion_tokens``): three
        requests at most."""
        mode = self.response_mode
        while True:
            try:
                answers = await self._request(prompt, followup, n, temperature, usage, mode)
            except _Refused as refused:
                if refused.part == "max_tokens":
                    log.warning(
                        "judge endpoint refused max_tokens; "
                        "sending the cap as max_completion_tokens",
                        model=self.model,
                        said=refused.said,
                    )
                    self.cap_param = "max_completion_tokens"
                else:
                    log.warning(
                        "judge endpoint rejected response_format json_schema; "
                        "falling back to json_object with the schema in the prompt",
                        model=self.model,
                        said=refused.said,
                    )
                    mode = "json_object"
                continue
            self.response_mode = mode  # it worked: stay with it
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
        """One chat request (retried by `_metered`): each choice validated (the model, or why
        it is not valid)."""
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
        cap_param = self.cap_param
        cap = self.cap_of(prompt)
        body[cap_param] = cap
        estimate = estimate_prompt_tokens(messages, self.model)

        def read(data: object) -> _Reply[list[OutT | Invalid]]:
            reply = chat_contents(data)
            prompt_tokens, completion_tokens = token_usage(
                reply.usage, estimate, reply.contents, self.model, cap
            )
            answers = [
                read_answer(prompt.output, content, prompt.lengths, finished, cap)
                for content, finished in zip(reply.contents, reply.finish_reasons, strict=True)
            ]
            outcome = "ok"
            if any(isinstance(a, Truncated) for a in answers):
                outcome = "truncated"
            elif any(isinstance(a, Invalid) for a in answers):
                outcome = "invalid_output" if prompt.reask else "fallback_steps"
            return _Reply(answers, prompt_tokens, completion_tokens, outcome)

        # the SDK's generic request with the body as built here: `chat.completions.create`
        # would walk the body against its typed parameters and build the response as SDK
        # models, which cost more CPU than everything else in scoring a record
        reply = await self._metered(
            "/chat/completions",
            body,
            step=prompt.step,
            metric=prompt.metric,
            reserved=estimate + cap * n,
            read=read,
            refusable=_refusable(mode, cap_param),
        )
        usage.calls += 1
        usage.prompt_tokens += reply.prompt_tokens
        usage.completion_tokens += reply.completion_tokens
        return reply.value

    async def _metered(
        self,
        path: str,
        body: dict[str, Any],
        *,
        step: str,
        metric: str,
        reserved: int,
        read: Callable[[object], _Reply[R]],
        refusable: frozenset[_Part] = frozenset(),
    ) -> _Reply[R]:
        """POST ``body`` under the budget, with the judge's one retry layer; ``read`` turns the
        response into a `_Reply`.

        Every attempt reserves ``reserved`` before it is sent (`BudgetExhausted`: it is not)
        and is reconciled when it ends: with its tokens, with 0 when no answer came, with its
        reservation when it timed out (the endpoint may have done, and billed, the work its
        client abandoned). Retryable failures are retried up to ``max_retries`` times (see
        `_retry_wait`). The observer hears the request's final outcome, its duration and the
        tokens of the answer. A 4xx that refuses a part in ``refusable`` raises `_Refused`;
        any other 4xx is logged with the server's words and raised as a `JudgeError`.
        """
        timeout = self.timeout_of(step)
        async with self._semaphore:
            if self.gate is not None:
                self.gate.reserve(reserved)  # BudgetExhausted: nothing is sent
            started = time.perf_counter()
            outcome = "ok"
            retries = 0
            try:
                while True:
                    charged = 0
                    try:
                        data = await self.client.post(
                            path, cast_to=object, body=body, options={"timeout": timeout}
                        )
                        reply = read(data)
                        charged = reply.prompt_tokens + reply.completion_tokens
                        outcome = reply.outcome
                        if self.observer is not None:
                            self.observer.on_tokens(
                                metric, reply.prompt_tokens, reply.completion_tokens
                            )
                        return reply
                    except openai.OpenAIError as exc:
                        timed_out = _timed_out(exc)
                        if timed_out:  # abandoned, maybe billed
                            charged = reserved
                        secret = self._api_key.get_secret_value()
                        if refusable and isinstance(
                            exc, openai.BadRequestError | openai.UnprocessableEntityError
                        ):
                            refusal = _Refusal.of(exc, secret)
                            part = refusal.part(refusable)
                            if part is not None:
                                raise _Refused(part, refusal.said) from exc
                        error = _classify(exc, secret)
                        if not error.retryable or retries >= self.max_retries:
                            if isinstance(exc, openai.APIStatusError) and not error.retryable:
                                log.warning(
                                    "judge endpoint refused the request",
                                    status=exc.status_code,
                                    reason=error.reason,
                                    step=step,
                                    said=error.detail,
                                    model=self.model,
                                )
                            raise error from None
                        wait = self._retry_wait(exc, retries, timeout if timed_out else None)
                    finally:
                        if self.gate is not None:
                            self.gate.reconcile(reserved, charged)
                    retries += 1
                    if self.gate is not None:
                        self.gate.reserve(reserved)  # BudgetExhausted: no retry is sent
                    try:
                        await asyncio.sleep(wait)
                    except BaseException:
                        if self.gate is not None:
                            self.gate.reconcile(reserved, 0)
                        raise
            except JudgeError as exc:
                outcome = exc.reason
                raise
            except _Refused as refused:
                outcome = "fallback" if refused.part == "response_format" else "fallback_cap"
                raise
            except asyncio.CancelledError:
                outcome = "cancelled"
                raise
            finally:
                if self.observer is not None:
                    self.observer.on_request(outcome, time.perf_counter() - started)

    def _retry_wait(self, exc: openai.OpenAIError, retries: int, timed_out: float | None) -> float:
        """How long to wait before retry number ``retries + 1``.

        After an attempt that timed out (``timed_out`` is its timeout), as long as that
        timeout, less up to a quarter at random: a server that goes on working on a request
        its client abandoned (llama.cpp's, most self-hosted ones) is not sent it again while
        still busy with it. Else what the endpoint asked for (``retry-after-ms`` or
        ``Retry-After`` in seconds, up to a minute), or half a second doubling per retry up
        to 8 s, less up to a quarter at random.
        """
        jitter = 1 - 0.25 * random.random()
        if timed_out is not None:
            log.info("judge request timed out; waiting before the retry", seconds=timed_out)
            if self.observer is not None:
                self.observer.on_request("timeout_backoff", timed_out)
            return timed_out * jitter
        if isinstance(exc, openai.APIStatusError):
            asked = _retry_after(exc.response.headers)
            if asked is not None:
                return asked
        return float(min(8.0, 0.5 * 2**retries) * jitter)

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
        # embeddings are billed like chat calls: reserved before sending, reconciled after;
        # counted with the chat model's encoding: an estimate for the reservation only (the
        # endpoint's usage replaces it), and one encoding in memory instead of two (~55 MB)
        estimate = sum(count_tokens(t, self.model) for t in send)

        def read(data: object) -> _Reply[list[list[float]]]:
            got, reported = embedding_vectors(data, len(send))
            return _Reply(got, reported if reported else estimate, 0)

        # the SDK's generic request, base64 vectors decoded here: the typed
        # `embeddings.create` builds every number through its model layer
        reply = await self._metered(
            "/embeddings",
            {"model": self.embedding_model, "input": send, "encoding_format": "base64"},
            step=EMBEDDINGS_METRIC,
            metric=EMBEDDINGS_METRIC,
            reserved=estimate,
            read=read,
        )
        got, used = reply.value, reply.prompt_tokens
        usage.calls += 1
        usage.prompt_tokens += used
        dimension = len(got[0])
        vectors = [[0.0] * dimension for _ in texts]
        if present:
            for i, vector in zip(present, got, strict=True):
                vectors[i] = vector
        return vectors


def _refusable(mode: ResponseMode, cap_param: CapParam) -> frozenset[_Part]:
    """The parts of a chat request sent in ``mode`` with ``cap_param`` that have another form."""
    parts: set[_Part] = set()
    if mode == "json_schema":
        parts.add("response_format")
    if cap_param == "max_tokens":
        parts.add("max_tokens")
    return frozenset(parts)


def _failure(answer: Invalid) -> str:
    """The `JudgeError` reason of a step whose answer stayed ``answer``."""
    return "truncated" if isinstance(answer, Truncated) else "invalid_output"


def _excerpt(content: str | None) -> str:
    """The start of a bad answer for its re-ask: `EXCERPT_CHARS` at most."""
    text = content or ""
    return text if len(text) <= EXCERPT_CHARS else text[:EXCERPT_CHARS] + "…"


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """The wait an endpoint asked for (``retry-after-ms``, else ``Retry-After`` in seconds),
    when it is a number from 0 to 60 seconds."""
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            seconds = float(value) * scale
        except ValueError:
            continue
        if 0 <= seconds <= 60:
            return seconds
    return None


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
