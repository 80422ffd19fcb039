"""`Checkpoint.commit`: sinks written and flushed, then records finished, then offsets committed.

The source here is the real `OffsetTracker` behind the `Source` contract, with a journal
of the calls; the sinks are in-process `Sink`s that can fail on demand (a sink outage
and a sink refusing one record are faults the real sinks cannot be made to show on cue).
The same order with a real broker is in tests/test_pipeline.py.
"""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from monitor.checkpoint import Checkpoint
from monitor.records import Interaction, ScoredRecord
from monitor.sinks import SinkBackpressure, SinkError
from monitor.sources import SourceRecord
from monitor.sources.offsets import OffsetTracker
from monitor.telemetry import Exporter
from tests.support.sinks import SinkBase

TP = ("interactions", 0)


class JournalSource:
    """The Source contract over an OffsetTracker; every call is written to ``journal``."""

    def __init__(self, journal: list[str]) -> None:
        self.journal = journal
        self.tracker = OffsetTracker()
        self.generation = self.tracker.assign(TP)
        self.committed: dict[tuple[str, int], int] = {}
        #: the replica stood still past its session timeout: the next `fence` lets go
        self.stalled = False

    def record(self, offset: int) -> SourceRecord:
        self.tracker.start(TP, offset, self.generation)
        return SourceRecord(TP[0], TP[1], offset, None, b"{}", 0, self.generation)

    async def fetch(self, wait_seconds: float = 0.5) -> list[SourceRecord]:
        return []

    def finish(self, record: SourceRecord) -> None:
        self.journal.append(f"finish {record.offset}")
        self.tracker.finish(record.tp, record.offset, record.generation)

    def owns(self, record: SourceRecord) -> bool:
        return self.tracker.generation(record.tp) == record.generation

    def fence(self) -> None:
        if self.stalled:
            self.stalled = False
            self.tracker.revoke(TP)
            self.journal.append("fenced")

    async def dead_letter(self, record: SourceRecord, reason: str, detail: str) -> None:
        raise AssertionError("the checkpoint dead-letters nothing")

    async def commit(self) -> object:
        positions = self.tracker.committable()
        self.journal.append(f"commit {positions.get(TP)}")
        self.tracker.mark_committed(positions)
        self.committed.update(positions)
        return positions


class JournalSink(SinkBase):
    """A sink that stores what it is given; ``down`` asks to wait on every write
    (`SinkBackpressure`), ``refuses`` refuses those interaction ids for good."""

    def __init__(self, name: str, journal: list[str], refuses: Sequence[str] = ()) -> None:
        self.name = name
        self.journal = journal
        self.down = False
        self.refuses = set(refuses)
        self.stored: list[str] = []

    async def write(self, batch: Sequence[ScoredRecord]) -> None:
        ids = [r.interaction.id for r in batch]
        self.journal.append(f"write {self.name} {','.join(ids)}")
        if self.down:
            raise SinkBackpressure(self.name, "unavailable", 0.5)
        if self.refuses.intersection(ids):
            raise SinkError(self.name, "refused")
        self.stored.extend(ids)

    async def flush(self) -> None:
        self.journal.append(f"flush {self.name}")


def scored(i: int) -> ScoredRecord:
    return ScoredRecord(
        interaction=Interaction(id=f"r{i}", user_input="q", retrieved_contexts=[], response="a")
    )


def setup(
    n: int, refuses: Sequence[str] = ()
) -> tuple[Checkpoint, JournalSource, JournalSink, JournalSink, Exporter, list[str]]:
    journal: list[str] = []
    source = JournalSource(journal)
    first, second = JournalSink("a", journal), JournalSink("b", journal, refuses)
    exporter = Exporter()
    checkpoint = Checkpoint(source, [first, second], exporter)
    for i in range(n):
        checkpoint.add(source.record(i), scored(i))
    return checkpoint, source, first, second, exporter, journal


async def test_sinks_are_flushed_before_records_finish_and_offsets_commit() -> None:
    checkpoint, source, first, second, exporter, journal = setup(3)
    await checkpoint.commit()
    assert journal == [
        "write a r0,r1,r2", "flush a", "write b r0,r1,r2", "flush b",
        "finish 0", "finish 1", "finish 2", "commit 3",
    ]  # fmt: skip
    assert checkpoint.pending == [] and source.committed == {TP: 3}
    assert exporter.records_scored._value.get() == 3


async def test_a_failing_sink_holds_every_offset_until_it_recovers() -> None:
    checkpoint, source, first, second, exporter, journal = setup(3)
    second.down = True
    with pytest.raises(SinkBackpressure) as wait:
        await checkpoint.commit()
    assert wait.value.retry_after == 0.5
    # offsets commit, but not past the first record: none is finished
    assert journal == ["write a r0,r1,r2", "flush a", "write b r0,r1,r2", "commit 0"]
    assert len(checkpoint.pending) == 3 and source.committed == {TP: 0}
    assert exporter.records_scored._value.get() == 0
    journal.clear()
    second.down = False
    await checkpoint.commit()
    # the sink that holds them already is not asked again
    assert journal == [
        "write b r0,r1,r2", "flush b", "finish 0", "finish 1", "finish 2", "commit 3"
    ]  # fmt: skip
    assert first.stored == second.stored == ["r0", "r1", "r2"]


async def test_a_record_a_sink_refuses_is_counted_and_the_rest_commit() -> None:
    checkpoint, source, first, second, exporter, journal = setup(3, refuses=["r1"])
    await checkpoint.commit()
    assert second.stored == ["r0", "r2"] and first.stored == ["r0", "r1", "r2"]
    assert exporter.records_skipped.labels(reason="sink_b")._value.get() == 1
    assert checkpoint.pending == [] and source.committed == {TP: 3}
    assert journal[-4:] == ["finish 0", "finish 1", "finish 2", "commit 3"]


async def test_records_of_a_revoked_partition_are_let_go_unwritten() -> None:
    checkpoint, source, first, second, exporter, journal = setup(2)
    source.tracker.revoke(TP)
    source.generation = source.tracker.assign(TP)  # the partition is back, a new generation
    await checkpoint.commit()
    assert checkpoint.pending == [] and first.stored == [] and second.stored == []
    assert journal == ["commit None"]  # nothing finished: the new owner re-reads them


async def test_a_replica_that_stood_still_is_fenced_before_anything_is_written() -> None:
    checkpoint, source, first, second, exporter, journal = setup(2)
    source.stalled = True
    await checkpoint.commit()
    assert checkpoint.pending == [] and first.stored == [] and second.stored == []
    assert journal == ["fenced", "commit None"]
