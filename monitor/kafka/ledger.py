"""The token ledger's Kafka side: the budget's spend kept in a topic of its own.

`LedgerListener` writes each held partition's entry to the ledger topic before the
offsets it covers are committed, and reads the entries of the partitions an assignment
brings. See docs/design.md, "The budget ledger".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterable, Mapping
from typing import Protocol

import structlog
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic
from aiokafka.errors import KafkaError, TopicAlreadyExistsError

from monitor.budget import LedgerEntry
from monitor.config import PREFIX, Settings
from monitor.kafka.client import client_options

log = structlog.get_logger("monitor.kafka.ledger")

#: how long an assignment waits for the ledger entries of its partitions
LEDGER_READ_SECONDS = 10.0
#: how long a checkpoint waits for the broker to take the changed entries
LEDGER_WRITE_SECONDS = 10.0
#: records read per step backwards from the ledger topic's end
READ_CHUNK = 2000
#: the ledger topic's settings: one partition, the last entry of each key kept
LEDGER_TOPIC_CONFIGS = {"cleanup.policy": "compact"}


def ledger_topic(settings: Settings) -> str:
    """The ledger topic of a deployment: ``<group id>.token-ledger``."""
    return f"{settings.kafka_group_id}.token-ledger"


class LedgerUnavailable(Exception):
    """The ledger topic could not be created or reached at start (the message says what to do)."""


class Spend(Protocol):
    """The token budget as the ledger sees it (`monitor.budget.TokenBudget`)."""

    @property
    def unlimited(self) -> bool: ...

    @property
    def share(self) -> float: ...

    @property
    def spent(self) -> int: ...

    @property
    def window(self) -> int: ...

    @property
    def written(self) -> tuple[int, ...]: ...

    def assign(
        self,
        ledger: Mapping[int, LedgerEntry | None],
        total: int,
        *,
        handed: Mapping[int, LedgerEntry | None] | None = None,
    ) -> None: ...

    def ledger(self) -> dict[int, LedgerEntry]: ...

    def revoke(self) -> None: ...


class LedgerListener:
    """The ledger across rebalances, shaped like aiokafka's `ConsumerRebalanceListener` but
    holding its own state: the producer that writes the entries and the entry each
    partition last wrote.

    The Kafka source calls it from its own listener: `on_partitions_assigned` while the
    new partitions wait paused, `on_partitions_revoked` once their last entries and
    offsets have gone; and `write` before every commit, which goes only if `write`
    succeeded. With an unlimited budget nothing is written or read;
    the budget still learns its share.

    An entry is keyed ``<topic>:<partition>``; an assignment takes each partition's latest.
    A replica that froze writes none after it wakes: `KafkaSource` sends nothing while a
    stall is unhandled, and `fence` lets its partitions go.
    """

    def __init__(
        self, settings: Settings, spend: Spend, *, client_id: str = "rag-monitor-ledger"
    ) -> None:
        self.settings = settings
        self.topic = settings.kafka_topic
        self.ledger_topic = ledger_topic(settings)
        self.spend = spend
        self.client_id = client_id
        #: whether entries are kept (an unlimited budget has no spend to hand on)
        self.carries = not spend.unlimited
        self._producer: AIOKafkaProducer | None = None
        #: the entry each partition last wrote
        self._sent: dict[int, LedgerEntry] = {}
        #: whether the last write failed (its warning is logged once per streak)
        self._failing = False

    async def start(self) -> None:
        """Create the ledger topic if it does not exist and start the producer.

        `KafkaError` when no broker answers; `LedgerUnavailable` when the broker answers but
        refuses the topic (an ACL, a cluster that forbids creating topics).
        """
        if not self.carries:
            return
        options = client_options(self.settings)
        admin = AIOKafkaAdminClient(**options, client_id=self.client_id, request_timeout_ms=5000)
        try:
            await admin.start()
            await self._create_topic(admin)
        finally:
            await admin.close()
        producer = AIOKafkaProducer(
            **options, client_id=self.client_id, acks="all", request_timeout_ms=5000
        )
        try:
            await producer.start()
        except BaseException:
            await producer.stop()
            raise
        self._producer = producer

    async def _create_topic(self, admin: AIOKafkaAdminClient) -> None:
        # replicated like a production topic: on three brokers, or on each when fewer
        cluster = await admin.describe_cluster()
        replicas = max(1, min(3, len(cluster.get("brokers", ()))))
        topic = NewTopic(self.ledger_topic, 1, replicas, topic_configs=LEDGER_TOPIC_CONFIGS)
        try:
            response = await admin.create_topics([topic])
        except TopicAlreadyExistsError:
            return
        for name, code, *_ in getattr(response, "topic_errors", ()):
            if code in (0, TopicAlreadyExistsError.errno):
                continue
            if self.ledger_topic in await admin.list_topics():
                continue  # made by an operator, who did not let the sidecar create topics
            raise LedgerUnavailable(
                f"the token budget's ledger topic {name} could not be created (Kafka error "
                f"code {code}): create it (1 partition, cleanup.policy=compact) and let the "
                f"group write and read it, or set {PREFIX}TOKEN_BUDGET=0 to run without a budget"
            )

    async def stop(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            await producer.stop()

    async def on_partitions_assigned(self, held: Iterable[TopicPartition], total: int) -> None:
        """The partitions now held, of the topic's ``total``: their entries read from the
        ledger topic and handed to the budget, with those of the partitions this replica
        wrote for and has handed on (an entry the broker lost is carried by its writer).
        Every held partition's entry is written again at the next checkpoint."""
        mine = [tp.partition for tp in held if tp.topic == self.topic]
        entries: dict[int, LedgerEntry | None] = dict.fromkeys(mine)
        gone = [p for p in self.spend.written if p not in entries]
        handed: dict[int, LedgerEntry | None] | None = None
        if (mine or gone) and self._producer is not None:  # started, with a budget
            try:
                read = await asyncio.wait_for(self._read([*mine, *gone]), LEDGER_READ_SECONDS)
            except (KafkaError, TimeoutError) as exc:
                log.warning("token ledger not read: the budget counts from 0 for these partitions",
                            error=type(exc).__name__)  # fmt: skip
            else:
                entries.update((p, read[p]) for p in mine if p in read)
                handed = {p: read.get(p) for p in gone}
        self.spend.assign(entries, total, handed=handed)
        self._sent.clear()
        log.info("token budget share", share=round(self.spend.share, 4), partitions=len(mine),
                 of=total, spent=self.spend.spent)  # fmt: skip

    def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        """Partitions gone: the budget reserves nothing until the next assignment reads
        what their entries say."""
        self.spend.revoke()
        for tp in revoked:
            if tp.topic == self.topic:
                self._sent.pop(tp.partition, None)

    async def write(self) -> bool:
        """Write every held partition's changed entry; True once the broker has them all (or
        nothing changed), False when it did not take them (the commit that was to follow
        waits for the next checkpoint)."""
        if not self.carries:
            return True
        changed = {p: e for p, e in self.spend.ledger().items() if self._sent.get(p) != e}
        if not changed:
            return True
        producer = self._producer
        if producer is None:
            return False
        try:
            futures = [
                await producer.send(
                    self.ledger_topic,
                    key=f"{self.topic}:{partition}".encode(),
                    value=entry.encode().encode(),
                )
                for partition, entry in changed.items()
            ]
            await asyncio.wait_for(asyncio.gather(*futures), LEDGER_WRITE_SECONDS)
        except (KafkaError, TimeoutError) as exc:
            # once per streak: while the broker is away the source's probe says so as well
            (log.debug if self._failing else log.warning)(
                "token ledger not written: commits wait until it is", error=type(exc).__name__
            )
            self._failing = True
            self._sent.clear()  # what the broker took before it went away may be gone with it
            return False
        if self._failing:
            log.info("token ledger written again")
            self._failing = False
        self._sent.update(changed)
        return True

    async def _read(self, partitions: list[int]) -> dict[int, LedgerEntry]:
        """The latest entry of each of ``partitions`` in the current window: the ledger topic
        read backwards in steps of `READ_CHUNK` records, until each partition has one, an
        entry of an earlier window shows the rest is older, or the topic starts."""
        window = self.spend.window
        wanted = set(partitions)
        prefix = f"{self.topic}:"
        #: partition → (offset, entry) of its latest entry seen
        found: dict[int, tuple[int, LedgerEntry]] = {}
        tp = TopicPartition(self.ledger_topic, 0)
        consumer = AIOKafkaConsumer(
            **client_options(self.settings),
            client_id=self.client_id,
            group_id=None,
            enable_auto_commit=False,
        )
        try:
            await consumer.start()
            consumer.assign([tp])
            begin = (await consumer.beginning_offsets([tp]))[tp]
            end = (await consumer.end_offsets([tp]))[tp]
            # the first step reads past the end the broker reports, until two polls in a
            # row bring nothing: Tansu reports the end of a batch written at once as its
            # first offset + 1
            hi: int | None = None
            lo = max(begin, end - READ_CHUNK)
            earlier = False
            while True:
                consumer.seek(tp, lo)
                empty = 0
                while True:
                    batch = (await consumer.getmany(tp, timeout_ms=200)).get(tp, [])
                    if not batch:
                        empty += 1
                        at = await consumer.position(tp)
                        if at >= (end if hi is None else hi) and (hi is not None or empty >= 2):
                            break
                        continue
                    empty = 0
                    for message in batch:
                        if hi is not None and message.offset >= hi:
                            break
                        entry = LedgerEntry.decode((message.value or b"").decode(errors="replace"))
                        key = (message.key or b"").decode(errors="replace")
                        if entry is None or not key.startswith(prefix):
                            continue
                        earlier = earlier or entry.window < window
                        partition = key[len(prefix) :]
                        if entry.window != window or not partition.isdigit():
                            continue
                        p = int(partition)
                        if p in wanted and (p not in found or message.offset > found[p][0]):
                            found[p] = (message.offset, entry)
                    if hi is not None and batch[-1].offset >= hi - 1:
                        break
                if lo <= begin or earlier or wanted <= found.keys():
                    break
                hi, lo = lo, max(begin, lo - READ_CHUNK)
            return {p: entry for p, (_, entry) in found.items()}
        finally:
            with contextlib.suppress(KafkaError):
                await consumer.stop()
