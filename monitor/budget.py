"""The token budget, in one place; no I/O (docs/design.md, "Budget and sampling").

`TokenBudget` is the allowance per window (the judges' `TokenGate`: reserve, reconcile)
and the spend that travels with the partitions (`LedgerEntry`, kept in the ledger topic
by `monitor.kafka.ledger`), `AdaptiveRate` the scale on the sampler's rates that spreads
it over the window, `BudgetedScorer` the pipeline's scorer under it.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

from monitor.config import TokenBudgetSpec
from monitor.judges import BudgetExhausted
from monitor.records import Interaction, ScoredRecord
from monitor.scoring import RecordScorer

Clock = Callable[[], float]

#: the skip reason of a record the budget cannot pay for (a judge's `BudgetExhausted`)
BUDGET = BudgetExhausted.REASON

#: the first field of a ledger entry
LEDGER_TAG = "rag-monitor-tokens"


class _Waiters:
    """Tasks waiting for a change, woken all at once by a plain call (no await: code that
    is being cancelled can still wake them); each looks again at what it waits for."""

    def __init__(self) -> None:
        self._futures: list[asyncio.Future[None]] = []

    async def wait(self) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._futures.append(future)
        try:
            await future
        finally:
            if future in self._futures:
                self._futures.remove(future)

    def wake(self) -> None:
        futures, self._futures = self._futures, []
        for future in futures:
            if not future.done():
                future.set_result(None)


@dataclass(frozen=True)
class LedgerEntry:
    """What a partition has spent in one window: ``rag-monitor-tokens:<window>:<tokens>``.

    ``window`` is the window's index since the epoch (clock time ÷ window length).
    """

    window: int
    tokens: int

    def encode(self) -> str:
        return f"{LEDGER_TAG}:{self.window}:{self.tokens}"

    @classmethod
    def decode(cls, text: str | None) -> LedgerEntry | None:
        """None for anything else (empty, another tool's, a damaged entry)."""
        if not text:
            return None
        parts = text.split(":")
        if len(parts) != 3 or parts[0] != LEDGER_TAG:
            return None
        try:
            window, tokens = int(parts[1]), int(parts[2])
        except ValueError:
            return None
        return cls(window, tokens) if tokens >= 0 else None


class TokenBudget:
    """Tokens per window with reserve/reconcile (implements `prompt.TokenGate`).

    Without `assign` (the offline runner, a file) the whole budget is this one
    spender's; after it, the budget of the partitions assigned.
    """

    def __init__(self, spec: TokenBudgetSpec, *, clock: Clock = time.time) -> None:
        self.spec = spec
        self._clock = clock
        self._window: int | None = None
        #: tokens charged to the partitions held, this window (carried in, then settled)
        self._spent = 0
        self._reserved = 0
        #: the partitions held (None: not partitioned, the whole budget) of ``_total``
        self._partitions: tuple[int, ...] | None = None
        self._total = 1
        #: what `ledger` last gave each partition in this window
        self._written: dict[int, int] = {}
        #: calls waiting in `room` for a reservation to end
        self._released = _Waiters()

    @property
    def unlimited(self) -> bool:
        return self.spec.unlimited

    @property
    def share(self) -> float:
        """This replica's part of the budget, in [0, 1]: partitions held ÷ the topic's."""
        if self._partitions is None:
            return 1.0
        return len(self._partitions) / self._total

    @property
    def partitions(self) -> tuple[int, ...] | None:
        """The partitions held since the last `assign` (None: never assigned, the whole budget)."""
        return self._partitions

    @property
    def allowance(self) -> float:
        """Tokens this replica may spend per window: the budget × its share."""
        return self.spec.tokens * self.share

    @property
    def window(self) -> int:
        """The current window's index since the epoch."""
        return self._roll()

    def assign(
        self,
        ledger: Mapping[int, LedgerEntry | None],
        total: int,
        *,
        handed: Mapping[int, LedgerEntry | None] | None = None,
    ) -> None:
        """After a rebalance: the partitions now held, each with its last ledger entry.

        The window's spend starts from what those entries say it is (entries of an
        earlier window count 0), or from what this replica itself last wrote for a
        partition, whichever is more.

        ``handed``: the entries read now of partitions this replica wrote for in this
        window and holds no longer. One below what this replica wrote was lost on its way
        (a write that never went, a broker that dropped acknowledged records in a
        restart); the partition's next owner counts from it, so this replica carries the
        difference itself. A partition handed on is settled once, here: its own entry is
        forgotten.
        """
        if total < len(ledger) or (total == 0 and ledger):
            raise ValueError(f"{len(ledger)} partitions assigned of {total}")
        window = self._roll()

        def carried(entry: LedgerEntry | None) -> int:
            return entry.tokens if entry is not None and entry.window == window else 0

        spent = sum(max(carried(e), self._written.get(p, 0)) for p, e in ledger.items())
        for partition, entry in (handed or {}).items():
            if partition not in ledger and partition in self._written:
                spent += max(0, self._written[partition] - carried(entry))
        self._written = {p: t for p, t in self._written.items() if p in ledger}
        self._partitions = tuple(sorted(ledger))
        self._total = max(1, total)
        self._spent = spent

    @property
    def written(self) -> tuple[int, ...]:
        """The partitions this replica has written an entry for in this window."""
        self._roll()
        return tuple(sorted(self._written))

    def revoke(self) -> None:
        """Partitions revoked: nothing more is reserved until the next `assign`."""
        self._roll()
        self._partitions = ()

    def ledger(self) -> dict[int, LedgerEntry]:
        """Each held partition's entry, to be kept before its offset is committed.

        This window's spend and open reservations, spread evenly over the partitions
        held (the first ones take the remainder): together they are what this replica
        owes the window, whichever replica gets which of them next.
        """
        window = self._roll()
        held = self._partitions or ()
        if not held:
            return {}
        owed = self._spent + self._reserved
        each, extra = divmod(owed, len(held))
        out: dict[int, LedgerEntry] = {}
        for i, partition in enumerate(held):
            tokens = each + (1 if i < extra else 0)
            self._written[partition] = tokens
            out[partition] = LedgerEntry(window, tokens)
        return out

    def _roll(self) -> int:
        window = math.floor(self._clock() / self.spec.window_seconds)
        if self._window != window:
            if self._window is not None:
                self._spent = 0  # open reservations stay: they are charged to the new window
            self._written.clear()
            self._window = window
        return window

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
        self._released.wake()

    async def room(self, tokens: int) -> None:
        # a reservation is the call's whole answer cap, most of it given back when it ends:
        # a call that would fail only for what others hold waits for one of them instead
        # (they are in flight, none of them waits here: each ends, and wakes this)
        while (
            not self.unlimited
            and self._reserved > 0
            and self.remaining() < tokens <= self.allowance - self._spent
        ):
            await self._released.wait()

    # --- what the exporter and the sampler read

    @property
    def spent(self) -> int:
        """Tokens charged in the current window: settled here, or carried in with partitions."""
        self._roll()
        return self._spent

    def remaining(self) -> float:
        """Tokens that can still be reserved in this window (``inf`` when unlimited)."""
        self._roll()
        if self.unlimited:
            return math.inf
        return max(0.0, self.allowance - self._spent - self._reserved)

    def seconds_left(self) -> float:
        now = self._clock()
        window = self._roll()
        return max(0.0, (window + 1) * self.spec.window_seconds - now)

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


class BudgetedScorer:
    """The scorer under the token budget: the pre-check, the spend and the fallback, in one
    place (the pipeline sees it as its scorer).

    A record is skipped with reason ``budget`` when the window is spent before it starts,
    or when a judge call it needs cannot be reserved (`BudgetExhausted`); with a
    ``fallback`` (the zero-token local judge) such a record is scored by it instead. What
    a record cost teaches ``adaptive`` (the sampler's throttle) the tokens per record.

    Under a limited budget a record starts only when what is left pays for it and for the
    records already being scored, at the tokens a record has cost so far; otherwise it
    waits for one of them to end. A record's judge calls are reserved one at a time, so
    records started together would otherwise share out the last of a window and each be
    cut short after spending part of it: tokens paid for no score. Until one record has
    ended its cost is unknown, so the first is scored alone; when none is being scored, a
    record always starts.
    """

    def __init__(
        self,
        scorer: RecordScorer,
        budget: TokenBudget,
        *,
        fallback: RecordScorer | None = None,
        adaptive: AdaptiveRate | None = None,
    ) -> None:
        self.scorer = scorer
        self.budget = budget
        self.fallback = fallback
        self.adaptive = adaptive if adaptive is not None else AdaptiveRate(budget)
        self._scoring = 0
        self._ended = False
        #: records waiting for one being scored to end
        self._ended_one = _Waiters()

    async def score(self, interaction: Interaction) -> ScoredRecord:
        async with self._turn():
            if self.budget.exhausted():
                scored = ScoredRecord(interaction=interaction, error=BUDGET)
            else:
                scored = await self.scorer.score(interaction)
                self.adaptive.spent(scored.usage.total_tokens)
        if scored.error == BUDGET and self.fallback is not None:
            scored = await self.fallback.score(interaction)
        return scored

    def _affordable(self) -> bool:
        if self._scoring == 0 or self.budget.unlimited:
            return True
        if not self._ended:
            return False
        # a record that cost nothing (an answer the local judge settled, a judge that
        # failed) teaches the average nothing: then nothing is known to be at risk
        per_record = self.adaptive.tokens_per_record or 0.0
        return self.budget.remaining() >= (self._scoring + 1) * per_record

    @asynccontextmanager
    async def _turn(self) -> AsyncIterator[None]:
        """One record's place among those being scored, once the budget can pay for it."""
        if self.budget.exhausted():
            yield  # nothing will be spent: no need to wait
            return
        while not self._affordable():
            await self._ended_one.wait()
        self._scoring += 1
        try:
            yield
        finally:
            # no await here: a cancelled record still gives its place back and wakes the rest
            self._scoring -= 1
            self._ended = True
            self._ended_one.wake()
