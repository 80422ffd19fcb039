"""The LLM judge over any OpenAI-compatible endpoint; with `monitor.judges.failures`, the
only `openai` import.

`OpenAIJudge` implements `monitor.judges.Judge`: structured output, an output cap on
every answer, re-asks, n choices, one metered request (budget, retries, observer) for
chat and embeddings alike (docs/design.md, "The LLM judge's requests"). Prompts become
messages in `monitor.judges.wire`; each answer's cap is sized in `monitor.judges.caps`;
answers are read in `monitor.judges.replies`; failures are read in
`monitor.judges.failures`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any, Generic, Protocol, TypeVar

import openai
import structlog
from pydantic import SecretStr

from monitor.judges import Embedded, Judged, JudgeError, OutT, Prompt, TokenGate
from monitor.judges.caps import answer_cap
from monitor.judges.failures import classify, refused_part, retry_after, timed_out
from monitor.judges.metering import JudgeObserver, Refused, Reservation, observed
from monitor.judges.replies import (
    Invalid,
    chat_contents,
    embedding_vectors,
    failure_reason,
    one_claim_per_sentence,
    read_answer,
    reask,
    request_outcome,
    token_usage,
)
from monitor.judges.wire import (
    FALLBACKS,
    CapParam,
    Form,
    Part,
    ResponseMode,
    chat_body,
    render_messages,
)
from monitor.records import Usage
from monitor.tokens import count_tokens, estimate_prompt_tokens

log = structlog.get_logger("monitor.judges.llm")

R = TypeVar("R")

#: the placeholder key for endpoints that need none (llama.cpp, vLLM, Ollama)
NO_KEY = "no-key"

#: the ``metric`` label under which embedding tokens are reported to the observer
EMBEDDINGS_METRIC = "embeddings"


class Embedder(Protocol):
    """Something other than the endpoint that embeds text (the local ONNX model).

    The judge closes it in its own `OpenAIJudge.aclose`.
    """

    async def embed(self, texts: Sequence[str]) -> Embedded: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True)
class _Ask(Generic[OutT]):
    """What one chat request asks: the prompt, how many choices, at what temperature, what
    follows the prompt (a re-ask), and the `Usage` its tokens add to (shared by the
    requests of one `OpenAIJudge.generate`)."""

    prompt: Prompt[OutT]
    n: int
    temperature: float | None
    usage: Usage
    followup: list[dict[str, str]] = field(default_factory=list)


@dataclass
class _Reply(Generic[R]):
    """What `OpenAIJudge._metered` made of one answered request."""

    value: R
    prompt_tokens: int
    completion_tokens: int
    #: the observer's outcome for the request (``invalid_output`` when a choice is not valid)
    outcome: str = "ok"


class OpenAIJudge:
    """`monitor.judges.Judge` over an OpenAI-compatible HTTP endpoint (see the module docstring).

    Constructing one opens nothing: the SDK client is created on first use.
    Close it with `aclose` (or ``async with``).
    """

    kind = "llm"
    #: sampled choices (``n``) of one prompt may differ
    varies_choices = True
    #: an answer depends on the prompt alone: metrics that ask alike share it
    reads_metric = False
    #: the form of chat requests (`monitor.judges.wire.Form`): json_schema and max_tokens
    #: until the endpoint refuses one and a request in the other form is answered
    response_mode: ResponseMode = "json_schema"
    cap_param: CapParam = "max_tokens"
    #: a timeout per step name (``grounding``, ``questions``, ...; ``embeddings``), else
    #: ``timeout_seconds``
    step_timeouts: dict[str, float]
    #: the largest cap of one answer (one choice): each request's cap is sized from its
    #: step (`monitor.judges.caps`), at most this; the budget reserves exactly the cap
    max_completion_tokens: int
    #: temperature for single answers (verdicts) and for n>1 sampling steps; None = omit
    temperature: float | None
    #: whether `monitor.scoring.Scorer` may ask this judge the fused ``grounding`` step
    fuse_grounding: bool

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
        counts = (concurrency, embed_batch_size, max_completion_tokens, max_retries + 1)
        if min(counts) < 1 or min([timeout_seconds, *step_timeouts.values()]) <= 0:
            raise ValueError(
                "concurrency, embed_batch_size and max_completion_tokens >= 1, "
                "max_retries >= 0, timeout > 0"
            )
        self.base_url = base_url
        self.model = model
        self.embedding_model = embedding_model
        self.timeout_seconds = timeout_seconds
        self.step_timeouts = step_timeouts
        self.max_retries = max_retries
        self.concurrency = concurrency
        self.max_completion_tokens = max_completion_tokens
        self.temperature = temperature
        self.sampling_temperature = sampling_temperature
        self.embed_batch_size = embed_batch_size
        self.fuse_grounding = fuse_grounding
        self.gate = gate
        self.observer = observer
        self.embedder = embedder
        self._api_key = api_key if api_key is not None else SecretStr("")
        self._client: openai.AsyncOpenAI | None = None
        self._semaphore = asyncio.Semaphore(concurrency)

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

    def cap_of(self, prompt: Prompt[OutT], cap_param: CapParam | None = None) -> int:
        """The cap of each answer (choice) to ``prompt``: sized from its step, at most
        `max_completion_tokens`; `max_completion_tokens` itself when the cap is sent as
        ``max_completion_tokens`` (OpenAI's reasoning models: their hidden reasoning counts
        against the cap, so an answer-sized cap would leave nothing for the answer)."""
        if (cap_param or self.cap_param) == "max_completion_tokens":
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
        temperature = self.temperature if n == 1 else self.sampling_temperature
        ask = _Ask(prompt, n, temperature, Usage())
        answers = await self._complete(ask)
        # the endpoint may return fewer choices than asked: top up one at a time
        while len(answers) < n:
            more = await self._complete(replace(ask, n=1))
            if not more:
                raise JudgeError("invalid_output", "the endpoint returned no choices")
            answers.extend(more)
        values = [await self._validated(ask, answer) for answer in answers[:n]]
        return Judged(values=[one_claim_per_sentence(v) for v in values], usage=ask.usage)

    async def _validated(self, ask: _Ask[OutT], answer: OutT | Invalid) -> OutT:
        """The validated answer; an invalid or cut-off one is re-asked once
        (`monitor.judges.replies.reask`)."""
        prompt = ask.prompt
        if not isinstance(answer, Invalid):
            return answer
        if not prompt.reask:
            raise JudgeError(failure_reason(answer), f"step {prompt.step}: {answer.summary}")
        cut = failure_reason(answer) == "truncated"
        log.info(
            f"judge answer {'cut off at its cap' if cut else 'invalid'}, re-asking once",
            step=prompt.step,
            metric=prompt.metric,
            error=answer.summary,
            model=self.model,
        )
        again = await self._complete(replace(ask, n=1, followup=reask(answer)))
        second = again[0] if again else Invalid("empty answer", None)
        if isinstance(second, Invalid):
            detail = f"step {prompt.step}: {second.summary} (after one re-ask)"
            raise JudgeError(failure_reason(second), detail)
        return second

    async def _complete(self, ask: _Ask[OutT]) -> list[OutT | Invalid]:
        """One chat request: the choices, validated. A refused part is sent again in the
        form `FALLBACKS` gives it; the form that was answered is remembered."""
        form = Form(self.response_mode, self.cap_param)
        while True:
            try:
                answers = await self._request(ask, form)
            except Refused as refused:
                log.warning(refused.fallback.warning, model=self.model, said=refused.said)
                form = form.after(refused.fallback)
                continue
            self.response_mode, self.cap_param = form.response_mode, form.cap_param
            return answers

    async def _request(self, ask: _Ask[OutT], form: Form) -> list[OutT | Invalid]:
        """One chat request in ``form`` (retried by `_metered`): each choice validated (the
        model, or why it is not valid)."""
        prompt, n = ask.prompt, ask.n
        messages = render_messages(prompt, schema_in_text=form.response_mode == "json_object")
        messages = messages + ask.followup
        cap = self.cap_of(prompt, form.cap_param)
        estimate = estimate_prompt_tokens(messages, self.model)
        body = chat_body(
            prompt, messages, model=self.model, form=form, cap=cap, n=n, temperature=ask.temperature
        )

        def read(data: object) -> _Reply[list[OutT | Invalid]]:
            reply = chat_contents(data)
            tokens = token_usage(reply.usage, estimate, reply.contents, self.model, cap)
            answers = [
                read_answer(prompt.output, content, prompt.lengths, finished, cap)
                for content, finished in zip(reply.contents, reply.finish_reasons, strict=True)
            ]
            return _Reply(answers, *tokens, request_outcome(answers, prompt.reask))

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
            refusable=form.refusable,
        )
        ask.usage.calls += 1
        ask.usage.prompt_tokens += reply.prompt_tokens
        ask.usage.completion_tokens += reply.completion_tokens
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
        refusable: frozenset[Part] = frozenset(),
    ) -> _Reply[R]:
        """POST ``body`` under the budget, with the judge's one retry loop; ``read`` turns the
        response into a `_Reply`.

        Every attempt holds a `Reservation` of ``reserved`` from before it is sent (and
        before the wait that precedes a retry) until it ends. Retryable failures are retried
        up to ``max_retries`` times (see `_retry_wait`). The observer hears the request's
        final outcome, its duration and the tokens of the answer. A 4xx that refuses a part
        in ``refusable`` raises `Refused`; any other failure raises a `JudgeError`.
        """
        timeout = self.timeout_of(step)
        wait, retries = 0.0, 0
        async with self._semaphore:
            with observed(self.observer) as request:
                while True:
                    if self.gate is not None:
                        await self.gate.room(reserved)  # (no await between it and `reserve`)
                    with Reservation(self.gate, reserved) as reservation:
                        if wait:
                            await asyncio.sleep(wait)
                        request.sent = True
                        try:
                            data = await self.client.post(
                                path, cast_to=object, body=body, options={"timeout": timeout}
                            )
                        except openai.OpenAIError as exc:
                            late = timed_out(exc)
                            reservation.charge = reserved if late else 0
                            self._raise_unless_retried(exc, step, retries, refusable)
                            wait = self._retry_wait(exc, retries, timeout if late else None)
                            retries += 1
                            continue
                        reply = read(data)
                        reservation.charge = reply.prompt_tokens + reply.completion_tokens
                    request.outcome = reply.outcome
                    if self.observer is not None:
                        tokens = (reply.prompt_tokens, reply.completion_tokens)
                        self.observer.on_tokens(metric, *tokens)
                    return reply

    def _raise_unless_retried(
        self, exc: openai.OpenAIError, step: str, retries: int, refusable: frozenset[Part]
    ) -> None:
        """Raise what a failed attempt means unless it is retried: `Refused` for a refused
        part in ``refusable``; else its `JudgeError` when it is not retryable (a refusal,
        logged with the server's words) or the retries are spent."""
        secret = self._api_key.get_secret_value()
        refused = refused_part(exc, refusable, secret)
        if refused is not None:
            raise Refused(FALLBACKS[refused[0]], refused[1]) from exc
        error = classify(exc, secret)
        if error.retryable and retries < self.max_retries:
            return
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
        asked = retry_after(exc)
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
