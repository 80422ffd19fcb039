"""What surrounds each request of the LLM judge (`monitor.judges.llm.OpenAIJudge`): its
attempts' shares of the budget (`Reservation`) and what the observer hears of it
(`observed`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Protocol

from monitor.judges import JudgeError, TokenGate
from monitor.judges.wire import Fallback


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


class Refused(Exception):
    """The endpoint refused a part of the request that has another form: the request is
    sent again in that form (``fallback``)."""

    def __init__(self, fallback: Fallback, said: str) -> None:
        super().__init__(fallback.part)
        self.fallback = fallback
        self.said = said


class Reservation:
    """One attempt's share of the budget: reserved on enter (`BudgetExhausted`: the attempt
    is not sent), reconciled on exit with `charge` whatever happened in between: 0 unless
    the attempt sets it (its tokens; its reservation when it timed out, as the endpoint may
    have done, and billed, the work its client abandoned).

    A plain ``with``: reserving and reconciling never wait, and an attempt cancelled while
    it waits (for its retry, for the endpoint) is reconciled all the same.
    """

    def __init__(self, gate: TokenGate | None, tokens: int) -> None:
        self.gate = gate
        self.tokens = tokens
        self.charge = 0

    def __enter__(self) -> Reservation:
        if self.gate is not None:
            self.gate.reserve(self.tokens)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self.gate is not None:
            self.gate.reconcile(self.tokens, self.charge)


@dataclass
class Request:
    """What the observer hears of one request: its outcome; nothing unless it was `sent`
    (a request the budget stopped before its first attempt is no request)."""

    outcome: str = "ok"
    sent: bool = False


@contextmanager
def observed(observer: JudgeObserver | None) -> Iterator[Request]:
    """Tells ``observer`` the outcome and duration of the request made inside, once sent:
    the `Request`'s outcome, a `JudgeError`'s reason, the fallback's outcome, or
    ``cancelled``."""
    request = Request()
    started = time.perf_counter()
    try:
        yield request
    except JudgeError as exc:
        request.outcome = exc.reason
        raise
    except Refused as refused:
        request.outcome = refused.fallback.outcome
        raise
    except asyncio.CancelledError:
        request.outcome = "cancelled"
        raise
    finally:
        if observer is not None and request.sent:
            observer.on_request(request.outcome, time.perf_counter() - started)
