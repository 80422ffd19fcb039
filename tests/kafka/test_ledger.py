"""The budget ledger's Kafka side (`monitor.kafka.ledger.LedgerListener`): what each commit
carries, and what an assignment reads back."""

from __future__ import annotations

import pytest
from aiokafka import TopicPartition

from monitor.budget import LedgerEntry, TokenBudget
from monitor.config import Settings, TokenBudgetSpec
from monitor.demo.broker import Broker
from monitor.judges import BudgetExhausted
from monitor.kafka.ledger import LedgerListener
from monitor.kafka.topics import committed_offsets
from monitor.sources.kafka import KafkaSource
from monitor.telemetry import Exporter
from tests.fixtures.kafka import Topic, monitor_settings
from tests.support.waits import Condition, wait_until

TOPIC = "ledger-topic"
#: the start of a clock hour: windows are aligned to the clock
START = 3600.0 * 500_000


def held(*partitions: int) -> list[TopicPartition]:
    return [TopicPartition(TOPIC, p) for p in partitions]


async def test_each_changed_entry_is_committed_once_and_nothing_is_reserved_after_a_revoke() -> (
    None
):
    budget = TokenBudget(TokenBudgetSpec.parse("1000/h"), clock=lambda: START)
    ledger = LedgerListener(Settings(kafka_topic=TOPIC), budget)
    await ledger.on_partitions_assigned(held(0, 1), 4)  # not started: no commit read
    assert budget.share == 0.5 and budget.allowance == 500
    window = int(START // 3600)
    first = ledger.offsets({}, lambda tp: 7)  # entries nobody sent yet: at the same offset
    assert {tp.partition: (om.offset, om.metadata) for tp, om in first.items()} == {
        0: (7, LedgerEntry(window, 0).encode()),
        1: (7, LedgerEntry(window, 0).encode()),
    }
    ledger.sent(first)
    assert ledger.offsets({}, lambda tp: 7) == {}
    moved = ledger.offsets({TopicPartition(TOPIC, 0): 9}, lambda tp: 7)
    assert {tp.partition: om.offset for tp, om in moved.items()} == {0: 9}
    budget.reserve(50)  # spread over both entries: both change
    assert sorted(tp.partition for tp in ledger.offsets({}, lambda tp: 7)) == [0, 1]
    ledger.on_partitions_revoked(held(0, 1))
    with pytest.raises(BudgetExhausted):
        budget.reserve(1)  # nothing is reserved between a revoke and the next assignment


async def test_a_ledger_only_commit_never_rewinds_a_partition_whose_commit_was_not_read() -> None:
    budget = TokenBudget(TokenBudgetSpec.parse("10000/h"))
    ledger = LedgerListener(Settings(kafka_topic=TOPIC), budget)
    await ledger.on_partitions_assigned(held(0, 1), 2)
    budget.reserve(200)  # spent on both partitions: both entries change
    # partition 0's last commit was read (it has none); partition 1's read failed (the
    # coordinator not answering cannot be produced on a real broker on demand)
    ledger._read.add(0)
    offsets = ledger.offsets({}, lambda tp: None)  # the source knows neither position
    assert {tp.partition: om.offset for tp, om in offsets.items()} == {0: 0}


async def test_an_unlimited_budget_commits_offsets_only_but_still_learns_its_share() -> None:
    budget = TokenBudget(TokenBudgetSpec.parse("0"))
    ledger = LedgerListener(Settings(kafka_topic=TOPIC), budget)
    await ledger.start()  # opens nothing: there is nothing to read
    await ledger.on_partitions_assigned(held(0), 4)
    assert budget.share == 0.25
    offsets = ledger.offsets({TopicPartition(TOPIC, 0): 3}, lambda tp: 3)
    assert [(om.offset, om.metadata) for om in offsets.values()] == [(3, "")]
    await ledger.stop()


@pytest.mark.kafka
async def test_the_spend_goes_with_the_partitions_to_the_next_replica(
    broker: Broker, topic: Topic
) -> None:
    """One replica spends, stops (its entries committed at offset 0: no record was read,
    and the assignment read that no commit exists); the next reads what it spent."""
    if broker.kind == "tansu":
        pytest.skip(
            "Tansu keeps no offset commit metadata, so the ledger has nowhere to ride; "
            "this case runs on noida-db, the default broker (plain python3 -m pytest)"
        )
    settings = monitor_settings(broker, topic, None, token_budget="10000/d")  # one window
    spenders = [TokenBudget(settings.token_budget) for _ in range(2)]

    def holds_every_partition(source: KafkaSource, spender: TokenBudget) -> Condition:
        async def check() -> bool:
            await source.fetch(0.1)  # the topic is empty: only the group's work
            return spender.share == 1.0

        return check

    first = KafkaSource(settings, Exporter(), ledger=LedgerListener(settings, spenders[0]))
    await first.start()
    try:
        await wait_until(holds_every_partition(first, spenders[0]), 30, "every partition")
        spenders[0].reserve(1000)
        spenders[0].reconcile(1000, 800)
    finally:
        await first.stop()
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert positions == dict.fromkeys(range(4), 0)  # never a guessed offset past the start
    second = KafkaSource(settings, Exporter(), ledger=LedgerListener(settings, spenders[1]))
    await second.start()
    try:
        await wait_until(holds_every_partition(second, spenders[1]), 30, "every partition")
        assert spenders[1].spent == 800
        assert spenders[1].remaining() == 10000 - 800
    finally:
        await second.stop()
