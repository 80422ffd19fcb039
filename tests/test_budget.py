from __future__ import annotations

import asyncio
import math

import pytest

from monitor.budget import (
    BUDGET,
    AdaptiveRate,
    BudgetedScorer,
    LedgerEntry,
    TokenBudget,
)
from monitor.config import TokenBudgetSpec
from monitor.judges import BudgetExhausted
from monitor.records import Interaction, ScoredRecord, Usage

#: the start of a clock hour (and so of a minute): windows are aligned to the clock
START = 3600.0 * 500_000


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


def test_reserve_and_reconcile() -> None:
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("1000/h"), clock=clock)
    budget.reserve(600)
    assert budget.remaining() == 400
    with pytest.raises(BudgetExhausted) as info:
        budget.reserve(500)
    assert info.value.reason == "budget" and info.value.available == 400
    budget.reconcile(600, 450)
    assert budget.spent == 450 and budget.remaining() == 550
    budget.reserve(550)
    assert budget.exhausted()


def test_window_rolls_over_and_carries_open_reservations() -> None:
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("1000/m"), clock=clock)
    budget.reserve(300)
    budget.reconcile(300, 300)
    budget.reserve(200)  # still open at the window change
    clock.now += 61
    assert budget.spent == 0
    assert budget.remaining() == 800
    budget.reconcile(200, 150)
    assert budget.spent == 150
    assert budget.seconds_left() == pytest.approx(59)


def test_unlimited_never_refuses() -> None:
    budget = TokenBudget(TokenBudgetSpec.parse("0"))
    budget.reserve(10**9)
    assert math.isinf(budget.remaining()) and not budget.exhausted()


def test_spend_never_exceeds_the_budget_under_load() -> None:
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("10000/m"), clock=clock)
    spent_per_window: dict[int, int] = {}
    for step in range(2000):
        clock.now = START + step * 0.1
        try:
            budget.reserve(120)
        except BudgetExhausted:
            continue
        budget.reconcile(120, 100 + step % 20)
        window = int((clock.now - START) // 60)
        spent_per_window[window] = spent_per_window.get(window, 0) + 100 + step % 20
    assert spent_per_window and max(spent_per_window.values()) <= 10000


def test_adaptive_rate_spreads_the_budget_over_the_window() -> None:
    """Offered 10 records/s at 100 tokens each = 60k/min against 15k/min: scale ≈ 0.25."""
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("15000/m"), clock=clock)
    adaptive = AdaptiveRate(budget, horizon_seconds=10, clock=clock)
    assert adaptive.scale() == 1.0  # no spend seen yet
    scored_at: list[float] = []
    credit = 0.0
    for step in range(600):  # one minute in 0.1 s steps
        clock.now = START + step * 0.1
        adaptive.offered(1.0)
        credit += adaptive.scale()
        if credit >= 1.0:  # keep a record with probability = scale (deterministic thinning)
            credit -= 1.0
            try:
                budget.reserve(100)
            except BudgetExhausted:
                continue
            budget.reconcile(100, 100)
            adaptive.spent(100)
            scored_at.append(clock.now - START)
    assert budget.spent <= 15000
    # the budget lasted: records were still scored in the last tenth of the window
    assert max(scored_at) > 54
    # and it was used: at least 80% spent
    assert budget.spent >= 12000


def test_a_burst_the_window_can_pay_for_is_not_thinned() -> None:
    """300 records in half a second, 1000 tokens each, against 100M/h: scale stays 1."""
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("100m/h"), clock=clock)
    adaptive = AdaptiveRate(budget, clock=clock)
    scales = []
    for i in range(300):
        clock.now = START + i * 0.5 / 300
        adaptive.offered(1.0)
        scales.append(adaptive.scale())
        budget.reserve(1000)
        budget.reconcile(1000, 1000)
        adaptive.spent(1000)
    assert min(scales) == 1.0


def test_the_rate_drops_once_the_window_is_projected_to_run_out() -> None:
    """A steady 10 records/s at 1000 tokens = 36M/h against 24k/h: the sustainable share."""
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("24000/h"), clock=clock)
    adaptive = AdaptiveRate(budget, clock=clock)
    for step in range(6000):  # ten minutes
        clock.now = START + step * 0.1
        adaptive.offered(1.0)
        adaptive.spent(1000)
    expected = budget.remaining() / (10 * budget.seconds_left() * 1000)
    assert adaptive.scale() == pytest.approx(expected, rel=0.05)
    assert adaptive.scale() < 0.001


def test_windows_are_aligned_to_the_clock() -> None:
    clock = Clock()
    clock.now = START + 45
    budget = TokenBudget(TokenBudgetSpec.parse("1000/m"), clock=clock)
    budget.reserve(100)
    budget.reconcile(100, 100)
    assert budget.seconds_left() == pytest.approx(15)  # the minute started 45 s ago
    clock.now = START + 61
    assert budget.spent == 0 and budget.seconds_left() == pytest.approx(59)


def test_a_replica_alone_hands_its_spend_over_with_the_partitions() -> None:
    """Alone on 4 partitions it spends 20000 of 24000; then each of two replicas
    takes 2 partitions with their ledger entries: together 4000 are left, not 12000 + 12000."""
    clock = Clock()
    spec = TokenBudgetSpec.parse("24000/h")
    first, second = TokenBudget(spec, clock=clock), TokenBudget(spec, clock=clock)
    first.assign(dict.fromkeys(range(4)), 4)  # a new group: no commits yet
    assert first.allowance == 24000 and first.remaining() == 24000
    first.reserve(20500)
    first.reconcile(20500, 20000)
    first.reserve(300)  # in flight at the rebalance: the ledger counts it
    ledger = first.ledger()
    assert sum(e.tokens for e in ledger.values()) == 20300 and sorted(ledger) == [0, 1, 2, 3]
    first.revoke()
    assert first.remaining() == 0  # nothing reserved between the revoke and the assignment
    with pytest.raises(BudgetExhausted):
        first.reserve(1)
    first.assign({0: ledger[0], 2: ledger[2]}, 4)
    second.assign({1: ledger[1], 3: ledger[3]}, 4)
    assert first.share == second.share == 0.5
    first.reconcile(300, 250)  # the call in flight settles with its new partitions
    assert first.remaining() + second.remaining() == 24000 - 20300 - 250
    assert first.spent + second.spent == 20300 + 250


def test_a_survivor_takes_every_partition_and_what_was_spent_on_them() -> None:
    clock = Clock()
    spec = TokenBudgetSpec.parse("8000/h")
    left, survivor = TokenBudget(spec, clock=clock), TokenBudget(spec, clock=clock)
    left.assign({0: None, 1: None}, 4)
    survivor.assign({2: None, 3: None}, 4)
    left.reserve(3000)
    left.reconcile(3000, 3000)
    survivor.reserve(1000)
    survivor.reconcile(1000, 1000)
    entries = {**left.ledger(), **survivor.ledger()}
    survivor.assign(entries, 4)
    assert survivor.allowance == 8000 and survivor.remaining() == 8000 - 4000


def test_entries_of_an_earlier_window_count_nothing() -> None:
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("1000/m"), clock=clock)
    window = int(START // 60)
    assert budget.window == window
    budget.assign({0: LedgerEntry(window - 1, 500), 1: None, 2: None, 3: None}, 4)
    assert budget.spent == 0 and budget.remaining() == 1000
    budget.assign({0: LedgerEntry(window, 200), 1: None}, 4)
    assert budget.spent == 200 and budget.remaining() == 300


def test_a_partition_that_comes_back_keeps_what_this_replica_wrote() -> None:
    """Its entry was never kept (the ledger topic did not take it): the replica's own entry
    still counts."""
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("4000/h"), clock=clock)
    budget.assign({0: None, 1: None}, 2)
    budget.reserve(1000)
    budget.reconcile(1000, 1000)
    budget.ledger()  # made, never kept
    budget.revoke()
    budget.assign({0: None, 1: None}, 2)
    assert budget.spent == 1000


def test_an_entry_lost_on_its_way_is_carried_by_the_replica_that_wrote_it() -> None:
    """Two replicas swap partitions after a broker restart that lost the last entries it
    had acknowledged: each next owner counts from the older entry it reads, and each
    writer carries what its own lost entries said beyond it, once."""
    clock = Clock()
    spec = TokenBudgetSpec.parse("10000/h")
    window = int(START // 3600)
    a, b = TokenBudget(spec, clock=clock), TokenBudget(spec, clock=clock)
    a.assign({0: None, 1: None}, 4)
    b.assign({2: None, 3: None}, 4)
    for budget, tokens in ((a, 3000), (b, 1000)):
        budget.reserve(tokens)
        budget.reconcile(tokens, tokens)
    kept = {**a.ledger(), **b.ledger()}  # 1500 each on 0 and 1, 500 each on 2 and 3
    assert a.written == (0, 1) and b.written == (2, 3)
    # the broker kept only older entries: 1000 on 0, none on 1; 2 and 3 intact
    read = {0: LedgerEntry(window, 1000), 1: None, 2: kept[2], 3: kept[3]}
    a.revoke()
    b.revoke()
    a.assign({2: read[2], 3: read[3]}, 4, handed={0: read[0], 1: read[1]})
    b.assign({0: read[0], 1: read[1]}, 4, handed={2: read[2], 3: read[3]})
    assert a.spent == 1000 + (1500 - 1000) + 1500  # b's entries, then what a's lost
    assert b.spent == 1000  # the older entry it read
    assert a.spent + b.spent == 3000 + 1000
    assert not a.written and not b.written  # settled: a later assignment adds nothing again
    assert sum(e.tokens for e in a.ledger().values()) == 3000  # the next checkpoint's entries
    a.revoke()
    a.assign({2: read[2], 3: read[3]}, 4, handed={0: read[0], 1: read[1]})
    assert a.spent == 3000


def test_a_partition_handed_on_intact_adds_nothing() -> None:
    clock = Clock()
    budget = TokenBudget(TokenBudgetSpec.parse("10000/h"), clock=clock)
    budget.assign({0: None, 1: None}, 2)
    budget.reserve(800)
    budget.reconcile(800, 800)
    entries = budget.ledger()
    budget.revoke()
    budget.assign({0: entries[0]}, 2, handed={1: entries[1]})
    assert budget.spent == 400
    budget.assign({0: entries[0]}, 2, handed=None)  # the ledger could not be read: no guess
    assert budget.spent == 400


@pytest.mark.parametrize(
    "text",
    ["rag-monitor-tokens:1:-5", "rag-monitor-tokens:x:1", "rag-monitor-tokens:1:2:3", "a:b", ""],
)
def test_damaged_entries_or_another_tools_are_ignored(text: str) -> None:
    assert LedgerEntry.decode(text) is None


def test_an_entry_reads_back_as_written() -> None:
    assert LedgerEntry(7, 42).encode() == "rag-monitor-tokens:7:42"
    assert LedgerEntry.decode(LedgerEntry(7, 42).encode()) == LedgerEntry(7, 42)


# --- the budgeted scorer and the partition ledger


class Spender:
    """A scorer that reserves and spends ``tokens`` per record from ``budget`` (a judge's
    reserve / reconcile), or skips the record for ``budget`` when it cannot reserve them."""

    def __init__(self, budget: TokenBudget, tokens: int) -> None:
        self.budget = budget
        self.tokens = tokens
        self.scored = 0

    async def score(self, interaction: Interaction) -> ScoredRecord:
        self.scored += 1
        try:
            self.budget.reserve(self.tokens)
        except BudgetExhausted as exc:
            return ScoredRecord(interaction=interaction, error=exc.reason)
        self.budget.reconcile(self.tokens, self.tokens)
        return ScoredRecord(
            interaction=interaction, usage=Usage(calls=1, prompt_tokens=self.tokens)
        )


RECORD = Interaction(id="r", user_input="q", retrieved_contexts=(), response="a")


async def test_the_budgeted_scorer_spends_until_the_window_is_gone_then_skips() -> None:
    budget = TokenBudget(TokenBudgetSpec.parse("250/h"), clock=Clock())
    judge = Spender(budget, 100)
    scorer = BudgetedScorer(judge, budget)
    outcomes = [(await scorer.score(RECORD)).error for _ in range(3)]
    assert outcomes == [None, None, BUDGET]  # the third cannot reserve its 100 (50 left)
    assert judge.scored == 3
    assert scorer.adaptive.tokens_per_record == 100  # the spend reached the sampler's scale
    budget.reserve(50)
    assert budget.remaining() == 0
    assert (await scorer.score(RECORD)).error == BUDGET
    assert judge.scored == 3  # a spent window: the judge is not even asked


async def test_what_the_budget_cannot_pay_for_goes_to_the_fallback() -> None:
    budget = TokenBudget(TokenBudgetSpec.parse("150/h"), clock=Clock())
    free = TokenBudget(TokenBudgetSpec.parse("0"))  # the local judge spends no tokens
    fallback = Spender(free, 0)
    scorer = BudgetedScorer(Spender(budget, 100), budget, fallback=fallback)
    assert [(await scorer.score(RECORD)).error for _ in range(3)] == [None, None, None]
    assert fallback.scored == 2  # the one cut short by BudgetExhausted, the one not started


class Stepper:
    """A scorer that makes ``calls`` judge calls of ``tokens`` each per record, reserving
    each just before it and yielding to the loop between them (as a judge's HTTP calls
    do); a call it cannot reserve cuts the record short with what it spent so far."""

    def __init__(self, budget: TokenBudget, calls: int, tokens: int) -> None:
        self.budget = budget
        self.calls = calls
        self.tokens = tokens
        self.started = 0
        self.scoring = 0
        self.most = 0
        self.wasted = 0  # tokens spent on records then cut short

    async def score(self, interaction: Interaction) -> ScoredRecord:
        self.started += 1
        self.scoring += 1
        self.most = max(self.most, self.scoring)
        spent = 0
        try:
            for _ in range(self.calls):
                try:
                    self.budget.reserve(self.tokens)
                except BudgetExhausted as exc:
                    self.wasted += spent
                    return ScoredRecord(interaction=interaction, error=exc.reason)
                await asyncio.sleep(0.001)
                self.budget.reconcile(self.tokens, self.tokens)
                spent += self.tokens
        finally:
            self.scoring -= 1
        return ScoredRecord(
            interaction=interaction, usage=Usage(calls=self.calls, prompt_tokens=spent)
        )


async def test_records_started_together_do_not_share_out_the_last_of_the_window() -> None:
    # 10 records of 3 calls × 100 tokens against 1,000 tokens: started all at once, each
    # would reserve its first call and none its second (1,000 tokens for no score)
    budget = TokenBudget(TokenBudgetSpec.parse("1000/h"), clock=Clock())
    judge = Stepper(budget, 3, 100)
    scorer = BudgetedScorer(judge, budget)
    outcomes = [s.error for s in await asyncio.gather(*(scorer.score(RECORD) for _ in range(10)))]
    # the first alone (its cost unknown), then two together (700 left pays for 2 × 300),
    # then one more alone with 100 left, cut short: the rest see a spent window
    assert outcomes.count(None) == 3 and outcomes.count(BUDGET) == 7
    assert judge.started == 4 and judge.most == 2
    assert budget.spent == 1000 and judge.wasted == 100


async def test_an_unlimited_budget_holds_no_record_back() -> None:
    budget = TokenBudget(TokenBudgetSpec.parse("0"))
    judge = Stepper(budget, 3, 100)
    scorer = BudgetedScorer(judge, budget)
    outcomes = await asyncio.gather(*(scorer.score(RECORD) for _ in range(10)))
    assert all(s.error is None for s in outcomes) and judge.most == 10


class Hanger:
    """A scorer whose first record never ends (a judge that hangs); the rest end at once."""

    def __init__(self) -> None:
        self.started = 0

    async def score(self, interaction: Interaction) -> ScoredRecord:
        self.started += 1
        if self.started == 1:
            await asyncio.Event().wait()
        return ScoredRecord(interaction=interaction, usage=Usage(calls=1, prompt_tokens=10))


async def test_a_record_cancelled_while_scored_gives_its_place_back() -> None:
    budget = TokenBudget(TokenBudgetSpec.parse("100000/h"), clock=Clock())
    judge = Hanger()
    scorer = BudgetedScorer(judge, budget)
    first = asyncio.create_task(scorer.score(RECORD))  # scored alone: its cost is unknown
    second = asyncio.create_task(scorer.score(RECORD))
    for _ in range(5):
        await asyncio.sleep(0)
    assert judge.started == 1  # the second waits for the first to end
    first.cancel()
    assert (await asyncio.wait_for(second, 5)).error is None
    assert first.cancelled() and judge.started == 2


async def test_a_call_that_only_what_others_hold_keeps_out_waits_for_one_to_end() -> None:
    budget = TokenBudget(TokenBudgetSpec.parse("1000/h"), clock=Clock())
    budget.reserve(800)  # a call in flight, its whole answer cap reserved
    waiting = asyncio.create_task(budget.room(500))
    for _ in range(5):
        await asyncio.sleep(0)
    assert not waiting.done()  # 200 left now, but 700 once that call has ended
    budget.reconcile(800, 300)
    await asyncio.wait_for(waiting, 1)
    budget.reserve(500)
    assert budget.remaining() == 200


async def test_room_does_not_wait_for_what_cannot_help() -> None:
    budget = TokenBudget(TokenBudgetSpec.parse("1000/h"), clock=Clock())
    await asyncio.wait_for(budget.room(5000), 1)  # beyond the window, whatever ends
    budget.reserve(300)
    budget.reconcile(300, 300)
    await asyncio.wait_for(budget.room(900), 1)  # nothing held: `reserve` decides now
    budget.reserve(600)
    await asyncio.wait_for(budget.room(800), 1)  # 700 at most, even once 600 is given back
    with pytest.raises(BudgetExhausted):
        budget.reserve(800)
