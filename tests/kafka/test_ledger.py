"""The budget ledger's Kafka side (`monitor.kafka.ledger.LedgerListener`): what each
checkpoint writes to the ledger topic, and what an assignment reads back, on the tests'
broker (noida-db, or Tansu with ``RAGMON_TEST_BROKER=tansu``)."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

from monitor.budget import LedgerEntry, TokenBudget
from monitor.config import Settings, TokenBudgetSpec
from monitor.judges import BudgetExhausted
from monitor.kafka import ledger as ledger_module
from monitor.kafka.ledger import LedgerListener, LedgerUnavailable, ledger_topic
from monitor.kafka.topics import committed_offsets
from monitor.sources.kafka import KafkaSource
from monitor.telemetry import Exporter
from tests.fixtures.kafka import Topic, monitor_settings
from tests.support.embedded import Broker
from tests.support.waits import Condition, wait_until

TOPIC = "ledger-topic"


def held(topic: str, *partitions: int) -> list[TopicPartition]:
    return [TopicPartition(topic, p) for p in partitions]


async def test_an_unlimited_budget_keeps_no_ledger_but_still_learns_its_share() -> None:
    budget = TokenBudget(TokenBudgetSpec.parse("0"))
    ledger = LedgerListener(Settings(kafka_topic=TOPIC), budget)
    await ledger.start()  # opens nothing: there is nothing to keep
    await ledger.on_partitions_assigned(held(TOPIC, 0), 4)
    assert budget.share == 0.25
    assert await ledger.write()  # nothing to write: the commit may go
    await ledger.stop()


async def test_without_its_producer_the_ledger_is_not_written_and_the_commit_waits() -> None:
    budget = TokenBudget(TokenBudgetSpec.parse("1000/h"))
    ledger = LedgerListener(Settings(kafka_topic=TOPIC), budget)  # never started
    await ledger.on_partitions_assigned(held(TOPIC, 0, 1), 4)
    assert budget.share == 0.5
    assert not await ledger.write()
    ledger.on_partitions_revoked(held(TOPIC, 0, 1))
    with pytest.raises(BudgetExhausted):
        budget.reserve(1)  # nothing is reserved between a revoke and the next assignment


def spend(budget: TokenBudget, reserved: int, used: int) -> None:
    """One judge call's spend: ``reserved`` tokens reserved, then ``used`` settled."""
    budget.reserve(reserved)
    budget.reconcile(reserved, used)


def spender(settings: Settings, partitions: list[int], total: int) -> TokenBudget:
    budget = TokenBudget(settings.token_budget)
    budget.assign(dict.fromkeys(partitions), total)
    return budget


async def read_back(settings: Settings, topic: str, total: int) -> int:
    """The spend a fresh replica's budget reads from the ledger on an assignment of
    partitions 0 and 1 (of ``total``)."""
    reader = TokenBudget(settings.token_budget)
    listener = LedgerListener(settings, reader)
    await listener.start()
    try:
        await listener.on_partitions_assigned(held(topic, 0, 1), total)
    finally:
        await listener.stop()
    return reader.spent


@pytest.mark.kafka
async def test_each_partitions_latest_entry_is_read_whoever_wrote_it(
    broker: Broker, topic: Topic
) -> None:
    """One replica writes its spend on partitions 0 and 1; the next owner of both carries it
    and writes more: the reader after them takes the later entries, not the larger-looking
    earlier ones of another group generation (a broker restart starts the count again)."""
    settings = monitor_settings(broker, topic, None, token_budget="100000/d")
    first = spender(settings, [0, 1], 2)
    spend(first, 900, 800)
    writers = [LedgerListener(settings, first)]
    await writers[0].start()
    try:
        assert await writers[0].write()
        second = TokenBudget(settings.token_budget)
        writers.append(LedgerListener(settings, second))
        await writers[1].start()
        await writers[1].on_partitions_assigned(held(topic.name, 0, 1), 2)
        assert second.spent == 800
        spend(second, 300, 300)
        assert await writers[1].write()
    finally:
        for writer in writers:
            await writer.stop()
    assert await read_back(settings, topic.name, 2) == 1100


@pytest.mark.kafka
async def test_the_ledger_is_read_backwards_past_other_partitions_entries(
    broker: Broker, topic: Topic, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Partition 0's entry was written long before the latest of partition 1 (more than a
    read step apart): an assignment of both still finds each one's latest entry."""
    monkeypatch.setattr(ledger_module, "READ_CHUNK", 3)
    settings = monitor_settings(broker, topic, None, token_budget="100000/d")
    first = spender(settings, [0], 4)
    second = spender(settings, [1], 4)
    writers = [LedgerListener(settings, first), LedgerListener(settings, second)]
    for writer in writers:
        await writer.start()
    try:
        spend(first, 300, 300)
        assert await writers[0].write()
        for _ in range(10):  # ten more entries of partition 1, each a change
            spend(second, 10, 10)
            assert await writers[1].write()
    finally:
        for writer in writers:
            await writer.stop()
    assert ledger_topic(settings) == f"{topic.group}.token-ledger"
    assert await read_back(settings, topic.name, 4) == 300 + 100


async def ledger_end(settings: Settings) -> int:
    """The ledger topic's end offset: how many entries were ever written to it."""
    tp = TopicPartition(ledger_topic(settings), 0)
    consumer = AIOKafkaConsumer(bootstrap_servers=settings.kafka_bootstrap_servers)
    await consumer.start()
    try:
        return int((await consumer.end_offsets([tp]))[tp])
    finally:
        await consumer.stop()


@pytest.mark.kafka
async def test_an_entry_the_broker_lost_is_carried_by_its_writer(
    broker: Broker, topic: Topic
) -> None:
    """A replica writes 1200 on partitions 0 and 1, then an older entry of partition 0 comes
    last in the ledger topic, as when the broker loses acknowledged records in a restart
    (that loss cannot be made to order: a producer writes the older entry instead). The
    replica, handed partition 2 alone, carries what partition 0's next owner will not read;
    and after every assignment its held entries are written again."""
    settings = monitor_settings(broker, topic, None, token_budget="100000/d")
    writer = spender(settings, [0, 1], 4)
    writer.reserve(1200)
    writer.reconcile(1200, 1200)
    listener = LedgerListener(settings, writer)
    await listener.start()
    producer = AIOKafkaProducer(bootstrap_servers=settings.kafka_bootstrap_servers)
    await producer.start()
    try:
        assert await listener.write()  # 600 on each
        older = LedgerEntry(writer.window, 200).encode().encode()
        await producer.send_and_wait(ledger_topic(settings), older, key=f"{topic.name}:0".encode())
        listener.on_partitions_revoked(held(topic.name, 0, 1))
        await listener.on_partitions_assigned(held(topic.name, 2), 4)
        assert writer.spent == 400  # 600 written on partition 0, 200 kept
        end = await ledger_end(settings)
        assert await listener.write()
        assert await ledger_end(settings) == end + 1  # partition 2's entry
        await listener.on_partitions_assigned(held(topic.name, 2), 4)  # the same again
        assert await listener.write()
        assert await ledger_end(settings) == end + 2  # written again, though unchanged
    finally:
        await producer.stop()
        await listener.stop()


@pytest.mark.kafka
async def test_the_spend_goes_with_the_partitions_to_the_next_replica(
    broker: Broker, topic: Topic
) -> None:
    """One replica spends and stops (its entries kept in the ledger topic; no record was read,
    so no offset is committed); the next reads what it spent. On every broker: Tansu keeps no
    offset-commit metadata, where the ledger used to ride."""
    settings = monitor_settings(broker, topic, None, token_budget="10000/d")  # one window
    spenders = [TokenBudget(settings.token_budget) for _ in range(2)]

    def holds_every_partition(source: KafkaSource, spender: TokenBudget) -> Condition:
        async def check() -> bool:
            await source.fetch(0.1)  # the topic is empty: only the group's work
            return spender.partitions == (0, 1, 2, 3)  # assigned, its ledger read

        return check

    first = KafkaSource(settings, Exporter(), ledger=LedgerListener(settings, spenders[0]))
    await first.start()
    try:
        await wait_until(holds_every_partition(first, spenders[0]), 30, "every partition")
        spend(spenders[0], 1000, 800)
    finally:
        await first.stop()
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert positions == dict.fromkeys(range(4))  # no offset guessed to carry the ledger
    second = KafkaSource(settings, Exporter(), ledger=LedgerListener(settings, spenders[1]))
    await second.start()
    try:
        await wait_until(holds_every_partition(second, spenders[1]), 30, "every partition")
        assert spenders[1].spent == 800
        assert spenders[1].remaining() == 10000 - 800
    finally:
        await second.stop()


@pytest.mark.kafka
async def test_a_ledger_topic_the_broker_refuses_stops_the_start_with_what_to_do(
    broker: Broker, topic: Topic
) -> None:
    """A group id that makes no valid topic name (a slash): the broker refuses the topic,
    and the source does not start with a budget it could not keep."""
    if broker.kind == "tansu":
        pytest.skip("Tansu creates a topic of any name: there is no refusal to show")
    settings = monitor_settings(
        broker, topic, None, token_budget="10000/d", kafka_group_id=f"{topic.group}/x"
    )
    source = KafkaSource(
        settings, Exporter(), ledger=LedgerListener(settings, TokenBudget(settings.token_budget))
    )
    with pytest.raises(LedgerUnavailable) as refused:
        await source.start()
    message = str(refused.value)
    assert f"ledger topic {topic.group}/x.token-ledger could not be created" in message
    assert "cleanup.policy=compact" in message and "RAG_MONITOR_TOKEN_BUDGET=0" in message
