"""The token budget: a fixed allowance per window, and a sample rate that spreads it. Pure.

The budget is per deployment: each replica spends ``share`` of it, its assigned
partitions ÷ the topic's partitions (`TokenBudget.set_share`, called on every
rebalance), so the replicas of one consumer group together stay within it
without talking to each other. A share change takes effect at once in the
current window: a replica that takes over partitions may spend its new share
of the window, whatever the replica that left had spent of its own.

`TokenBudget` is the judge's `prompt.TokenGate`: every judge call reserves its
estimated tokens before it is sent (`BudgetExhausted` when the window cannot
cover it) and reconciles with the real ``usage`` afterwards. Windows follow
each other from the first use (``200000/h`` = 200000 tokens in each hour);
reservations still open at a window change are carried into the new window,
so the tokens spent in a window never exceed the allowance unless a call used
more than it reserved.

`AdaptiveRate` turns the budget into a *scale* on the sampler's rates, so the
budget lasts until the end of the window instead of running dry early. The
window's allowance is one bucket: the rate is lowered only when the tokens the
rest of the window is projected to need exceed what is left in it::

    scale = min(1, remaining / (arrival_rate × seconds_left × tokens_per_record))

where ``arrival_rate`` is the rate of records the sampler would keep at full
rate over the last ``horizon_seconds`` (a burst counts spread over the horizon,
not as a pace it will keep for the rest of the window), and
``tokens_per_record`` an average of recent spend. A burst the bucket can pay
for is scored whole. Both take an injected clock (seconds, monotonic) for tests.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from monitor.config import TokenBudgetSpec
from monitor.judges import BudgetExhausted

Clock = Callable[[], float]


class TokenBudget:
    """Tokens per window with reserve/reconcile (implements `prompt.TokenGate`)."""

    def __init__(self, spec: TokenBudgetSpec, *, clock: Clock = time.monotonic) -> None:
        self.spec = spec
        self._clock = clock
        self._window_start: float | None = None
        self._spent = 0
        self._reserved = 0
        self._share = 1.0

    @property
    def unlimited(self) -> bool:
        return self.spec.unlimited

    @property
    def share(self) -> float:
        """This replica's part of the budget, in [0, 1] (1 until `set_share`)."""
        return self._share

    def set_share(self, share: float) -> None:
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"budget share {share} is not within [0, 1]")
        self._share = share

    @property
    def allowance(self) -> float:
        """Tokens this replica may spend per window: the budget × its share."""
        return self.spec.tokens * self._share

    def _roll(self) -> float:
        now = self._clock()
        if self._window_start is None:
            self._window_start = now
        elapsed = now - self._window_start
        if elapsed >= self.spec.window_seconds:
            windows = math.floor(elapsed / self.spec.window_seconds)
            self._window_start += windows * self.spec.window_seconds
            self._spent = 0  # open reservations stay: they are charged to the new window
        return now

    # --- TokenGate

    def reserve(self, tokens: int) -> None:
        self._roll()
        if self.unlimited:
            self._reserved += tokens
            return
        available = self.allowance - self._spent - self._reserved
        if tokens > available:
            raise BudgetExhausted(tokens, max(0, int(available)))
        self._reserved += tokens

    def reconcile(self, reserved: int, used: int) -> None:
        self._roll()
        self._reserved = max(0, self._reserved - reserved)
        self._spent += used

    # --- what the exporter and the sampler read

    @property
    def spent(self) -> int:
        """Tokens reconciled in the current window."""
        self._roll()
        return self._spent

    def remaining(self) -> float:
        """Tokens that can still be reserved in this window (``inf`` when unlimited)."""
        self._roll()
        if self.unlimited:
            return math.inf
        return max(0.0, self.allowance - self._spent - self._reserved)

    def seconds_left(self) -> float:
        now = self._roll()
        assert self._window_start is not None
        return max(0.0, self._window_start + self.spec.window_seconds - now)

    def exhausted(self, tokens: int = 1) -> bool:
        return self.remaining() < tokens


class AdaptiveRate:
    """The scale in (0, 1] that the sampler's rates are multiplied by.

    ``offered(weight)`` is called for every consumed record with the rate it
    would be kept at when the scale is 1 (so the sum is the expected number
    of records the full rate would score); ``spent(tokens)`` after every
    scored record. Arrivals are an exponentially decayed count over
    ``horizon_seconds``; tokens per record an exponential moving average.
    """

    def __init__(
        self,
        budget: TokenBudget,
        *,
        horizon_seconds: float = 60.0,
        smoothing: float = 0.1,
        min_scale: float = 0.0,
        clock: Clock = time.monotonic,
    ) -> None:
        self.budget = budget
        self.horizon = horizon_seconds
        self.smoothing = smoothing
        self.min_scale = min_scale
        self._clock = clock
        self._started = clock()
        self._decayed = 0.0
        self._last = self._started
        self._tokens_per_record: float | None = None

    def _decay(self, now: float) -> None:
        if now > self._last:
            self._decayed *= math.exp(-(now - self._last) / self.horizon)
            self._last = now

    def offered(self, weight: float = 1.0) -> None:
        now = self._clock()
        self._decay(now)
        self._decayed += weight

    def spent(self, tokens: int) -> None:
        if tokens <= 0:
            return
        if self._tokens_per_record is None:
            self._tokens_per_record = float(tokens)
        else:
            a = self.smoothing
            self._tokens_per_record = (1 - a) * self._tokens_per_record + a * tokens

    @property
    def tokens_per_record(self) -> float | None:
        return self._tokens_per_record

    def arrival_rate(self) -> float:
        """Records per second the full rate would keep (decayed estimate)."""
        now = self._clock()
        self._decay(now)
        # the decayed sum approximates rate × horizon: the time before the start counts as
        # no arrivals, so a burst at start is not taken for a pace of the whole window
        return self._decayed / self.horizon

    def scale(self) -> float:
        if self.budget.unlimited or self._tokens_per_record is None:
            return 1.0
        demand = self.arrival_rate() * self.budget.seconds_left() * self._tokens_per_record
        if demand <= 0:
            return 1.0
        return max(self.min_scale, min(1.0, self.budget.remaining() / demand))
