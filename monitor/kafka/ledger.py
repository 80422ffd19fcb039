"""The token ledger's Kafka side: the budget's spend rides on the offset commits' metadata.

`LedgerListener` keeps what that takes across rebalances. See docs/design.md, "The Kafka
source" (the budget's ledger).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import structlog
from aiokafka import TopicPartition
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.errors import KafkaError
from aiokafka.structs import OffsetAndMetadata

from monitor.config import Settings
from monitor.kafka.client import client_options

log = structlog.get_logger("monitor.kafka.ledger")

#: how long an assignment waits for the ledger entries of its partitions
LEDGER_READ_SECONDS = 10.0


class Spend(Protocol):
    """The token budget as the ledger sees it (`monitor.budget.TokenBudget`)."""

    @property
    def unlimited(self) -> bool: ...

    @property
    def share(self) -> float: ...

    @property
    def spent(self) -> int: ...

    def assign(self, ledger: Mapping[int, str | None], total: int) -> None: ...

    def ledger(self) -> dict[int, str]: ...

    def revoke(self) -> None: ...


class LedgerListener:
    """The ledger across rebalances, shaped like aiokafka's `ConsumerRebalanceListener` but
    holding its own state: the admin client that reads the entries, the entry each
    partition last committed, and which partitions' last commits were read.

    The Kafka source calls it from its own listener, after its offset work:
    `on_partitions_assigned` once it tracks the partitions, `on_partitions_revoked` once
    their last commit has gone (with their entries). Every commit it sends is built by
    `offsets` and reported back with `sent`. With an unlimited budget the commits carry
    no entries and nothing is read; the budget still learns its share.
    """

    def __init__(
        self, settings: Settings, spend: Spend, *, client_id: str = "rag-monitor-ledger"
    ) -> None:
        self.settings = settings
        self.topic = settings.kafka_topic
        self.spend = spend
        self.client_id = client_id
        #: whether the commits carry entries (an unlimited budget has no spend to hand on)
        self.carries = not spend.unlimited
        self._admin: AIOKafkaAdminClient | None = None
        #: the entry each partition last committed
        self._sent: dict[int, str] = {}
        #: partitions whose last commit (or its absence) the assignment read
        self._read: set[int] = set()

    async def start(self) -> None:
        """Open the admin client that reads the entries; a `KafkaError` when no broker answers."""
        if not self.carries:
            return
        admin = AIOKafkaAdminClient(
            **client_options(self.settings), client_id=self.client_id, request_timeout_ms=5000
        )
        try:
            await admin.start()
        except BaseException:
            await admin.close()
            raise
        self._admin = admin

    async def stop(self) -> None:
        admin, self._admin = self._admin, None
        if admin is not None:
            await admin.close()

    async def on_partitions_assigned(
        self, held: Iterable[TopicPartition], total: int
    ) -> dict[TopicPartition, int]:
        """The partitions now held, of the topic's ``total``: their last commits read, their
        entries handed to the budget. Returns the offset of each commit read."""
        mine = [tp.partition for tp in held if tp.topic == self.topic]
        metadata, offsets = await self._read_commits(mine)
        for partition, text in metadata.items():
            if text is not None:
                self._sent[partition] = text
        self.spend.assign(metadata, total)
        log.info("token budget share", share=round(self.spend.share, 4), partitions=len(mine),
                 of=total, spent=self.spend.spent)  # fmt: skip
        return {TopicPartition(self.topic, p): offset for p, offset in offsets.items()}

    def on_partitions_revoked(self, revoked: Iterable[TopicPartition]) -> None:
        """Partitions gone: the budget reserves nothing until the next assignment reads
        what their commits say."""
        self.spend.revoke()
        for tp in revoked:
            if tp.topic == self.topic:
                self._sent.pop(tp.partition, None)
                self._read.discard(tp.partition)

    def offsets(
        self,
        positions: Mapping[TopicPartition, int],
        where: Callable[[TopicPartition], int | None],
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """What a commit sends: each moved position with its partition's entry, and every
        held partition whose entry changed committed again at the offset it stands at.

        ``where`` is that offset as the source knows it (None: not known); a partition
        the assignment read no commit for stands at 0, and one whose read failed gets no
        ledger-only commit (a guessed 0 would rewind it).
        """
        entries = self.spend.ledger() if self.carries else {}
        out = {
            tp: OffsetAndMetadata(
                pos, entries.get(tp.partition, "") if tp.topic == self.topic else ""
            )
            for tp, pos in positions.items()
        }
        for partition, entry in entries.items():
            tp = TopicPartition(self.topic, partition)
            if tp in out or self._sent.get(partition) == entry:
                continue
            at = where(tp)
            if at is None and partition in self._read:
                at = 0
            if at is not None:
                out[tp] = OffsetAndMetadata(at, entry)
        return out

    def sent(self, offsets: Mapping[TopicPartition, OffsetAndMetadata]) -> None:
        """``offsets`` (from `offsets`) were committed: their entries are the last sent."""
        for tp, committed in offsets.items():
            if tp.topic == self.topic and committed.metadata:
                self._sent[tp.partition] = committed.metadata

    async def _read_commits(
        self, partitions: list[int]
    ) -> tuple[dict[int, str | None], dict[int, int]]:
        """Each partition's last commit: its entry (None: not read, or no commit) and offset."""
        metadata: dict[int, str | None] = {p: None for p in partitions}
        admin = self._admin
        if not partitions or admin is None:
            return metadata, {}
        try:
            # `consumer.committed()` returns the offset only; the admin client's offset fetch
            # returns each commit with its metadata, which is what is wanted here
            got = await asyncio.wait_for(
                admin.list_consumer_group_offsets(
                    self.settings.kafka_group_id,
                    partitions=[TopicPartition(self.topic, p) for p in partitions],
                ),
                LEDGER_READ_SECONDS,
            )
        except (KafkaError, TimeoutError) as exc:
            log.warning("token ledger not read: the budget counts from 0 for these partitions",
                        error=type(exc).__name__)  # fmt: skip
            return metadata, {}
        self._read.update(partitions)
        offsets: dict[int, int] = {}
        for tp, committed in got.items():
            if committed is None or committed.offset < 0:
                continue
            metadata[tp.partition] = committed.metadata or ""
            offsets[tp.partition] = committed.offset
        return metadata, offsets
