"""What an OpenAI-compatible endpoint's failure means to `monitor.judges.llm.OpenAIJudge`.

A failed attempt becomes one of three things: a refused part of the request that has
another form (`refused_part`: the client sends it again in that form), a bounded
`JudgeError` reason (`classify`: by exception class, status and error code, never by
the message's wording), or a wait before the retry (`retry_after`, `timed_out`). With
`monitor.judges.llm`, the only modules that import `openai`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import openai

from monitor.judges import JudgeError
from monitor.judges.wire import Part

#: how much of an endpoint's error message is kept (in a `JudgeError`'s detail, the log)
SAID_CHARS = 300

#: error codes or types by which endpoints say a request does not fit the model's
#: context: OpenAI's (and the servers that copy its errors), llama.cpp's
_TOO_LONG = frozenset(
    {"context_length_exceeded", "string_above_max_length", "exceed_context_size_error"}
)
#: error types that say no more than the status does
_GENERIC_TYPES = frozenset({"invalid_request_error", "BadRequestError", "bad_request"})

#: the OS's connection errors in words, for a JudgeError's detail
_CONNECTION_ERRORS: dict[type[BaseException], str] = {
    ConnectionRefusedError: "connection refused",
    ConnectionResetError: "connection reset",
    ConnectionAbortedError: "connection aborted",
    BrokenPipeError: "broken pipe",
}


@dataclass(frozen=True)
class Refusal:
    """What an endpoint sent with an HTTP 4xx: its message (cut to `SAID_CHARS`, the key
    cut out), its error ``code`` (a number is only the status again, so None), ``type``
    and the ``param`` it names, as the SDK read them from the JSON error body."""

    status: int
    said: str
    code: str | None
    kind: str | None
    param: str | None

    @classmethod
    def of(cls, exc: openai.APIStatusError, secret: str = "") -> Refusal:
        said = server_message(exc, SAID_CHARS)
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

    def part(self, refusable: frozenset[Part]) -> Part | None:
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


def refused_part(
    exc: openai.OpenAIError, refusable: frozenset[Part], secret: str = ""
) -> tuple[Part, str] | None:
    """The part of ``refusable`` a 400 or 422 refused, and the server's words; else None."""
    if not refusable or not isinstance(
        exc, openai.BadRequestError | openai.UnprocessableEntityError
    ):
        return None
    refusal = Refusal.of(exc, secret)
    part = refusal.part(refusable)
    return None if part is None else (part, refusal.said)


def classify(exc: openai.OpenAIError, secret: str = "") -> JudgeError:
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
        said = Refusal.of(exc, secret).said
        return JudgeError(
            "auth", f"HTTP {status}: {said}; check RAG_MONITOR_JUDGE_API_KEY" if said else
            f"HTTP {status}; check RAG_MONITOR_JUDGE_API_KEY",
        )  # fmt: skip
    detail = f"{name} (HTTP {status})" if status is not None else name
    refused = connection_error(exc)
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
        refusal = Refusal.of(exc, secret)
        said = f"HTTP {refusal.status}: {refusal.said}" if refusal.said else detail
        return JudgeError("too_long" if refusal.too_long else "bad_request", said)
    if isinstance(exc, openai.APIResponseValidationError):
        return JudgeError("invalid_output", detail)
    return JudgeError("bad_request", detail)


def server_message(exc: openai.APIStatusError, limit: int = SAID_CHARS) -> str:
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


def connection_error(exc: BaseException) -> ConnectionError | None:
    """A connection error of the OS (refused, reset, unreachable) in the cause chain, if any."""
    seen: set[int] = set()
    cause: BaseException | None = exc
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        if isinstance(cause, ConnectionError):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


def retry_after(exc: openai.OpenAIError) -> float | None:
    """The wait an endpoint asked for (``retry-after-ms``, else ``Retry-After`` in seconds),
    when it is a number from 0 to 60 seconds."""
    if not isinstance(exc, openai.APIStatusError):
        return None
    headers: Mapping[str, str] = exc.response.headers
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


def timed_out(failure: BaseException | None) -> bool:
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
