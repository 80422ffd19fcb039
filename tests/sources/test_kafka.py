from __future__ import annotations

import asyncio
import json
import time
import tracemalloc

import pytest
from aiokafka import AIOKafkaProducer, TopicPartition
from aiokafka.conn import AIOKafkaConnection
from aiokafka.errors import KafkaConnectionError

from monitor.app import build, serve
from monitor.config import Settings
from monitor.kafka import frames
from monitor.kafka.dead_letter import HEADER_DETAIL, HEADER_OFFSET, HEADER_REASON
from monitor.kafka.topics import committed_offsets, produce
from monitor.sampling import unit_hash
from monitor.sources import RevokeHook, SourceRecord
from monitor.sources.kafka import KafkaSource
from monitor.sources.offsets import OffsetTracker
from monitor.telemetry import Exporter
from tests.fixtures.kafka import Topic, monitor_settings
from tests.support.embedded import Broker
from tests.support.judge_server import JudgeServer
from tests.support.kafka import read_topic
from tests.support.records import encode, interaction, samples
from tests.support.waits import wait_until

# --- the pure bookkeeping


def test_commit_position_stops_at_the_first_unfinished_record() -> None:
    tracker = OffsetTracker()
    tp = ("t", 0)
    gen = tracker.assign(tp)
    for offset in range(5, 10):
        assert tracker.start(tp, offset, gen)
    tracker.finish(tp, 5, gen)
    tracker.finish(tp, 7, gen)
    tracker.finish(tp, 8, gen)
    assert tracker.committable() == {tp: 6}
    tracker.mark_committed({tp: 6})
    assert tracker.committable() == {}
    tracker.finish(tp, 6, gen)
    assert tracker.committable() == {tp: 9}
    tracker.finish(tp, 9, gen)
    assert tracker.committable() == {tp: 10}
    assert tracker.in_flight() == 0


def test_late_finish_from_a_revoked_generation_is_ignored() -> None:
    tracker = OffsetTracker()
    tp = ("t", 1)
    old = tracker.assign(tp)
    tracker.start(tp, 3, old)
    tracker.revoke(tp)
    new = tracker.assign(tp)
    tracker.start(tp, 3, new)
    assert not tracker.finish(tp, 3, old)
    assert tracker.committable() == {tp: 3}
    assert tracker.finish(tp, 3, new)
    assert tracker.committable() == {tp: 4}


async def fill_window(source: KafkaSource, size: int, within: float = 30.0) -> list[SourceRecord]:
    """Fetch until the source's in-flight window (``size`` records) is full."""
    held: list[SourceRecord] = []
    deadline = time.monotonic() + within
    while len(held) < size and time.monotonic() < deadline:
        held += await source.fetch(0.2)
    assert len(held) == size
    return held


# --- against the broker


async def forty_records(broker: Broker, topic: Topic) -> Settings:
    """40 records on the topic, more than a window of 8 in flight holds; the settings."""
    settings = monitor_settings(broker, topic, None, max_in_flight=8)
    await produce(topic.bootstrap, topic.name, [(f"k{i}".encode(), b"{}") for i in range(40)])
    return settings


@pytest.mark.kafka
async def test_backpressure_bounds_in_flight_and_commits_only_finished(
    broker: Broker, topic: Topic
) -> None:
    settings = await forty_records(broker, topic)
    source = KafkaSource(settings, Exporter())
    await source.start()
    try:
        held = await fill_window(source, 8)
        deadline = time.monotonic() + 30
        for _ in range(3):  # full: nothing more is handed out
            assert await source.fetch(0.1) == []
        assert source.in_flight == 8
        # finish all but the first record of one partition
        first = min(held, key=lambda r: (r.partition, r.offset))
        for record in held:
            if record is not first:
                source.finish(record)
        committed = await source.commit()
        assert committed[first.tp] == first.offset
        more: list[SourceRecord] = []
        while not more and time.monotonic() < deadline:
            more = await source.fetch(0.2)
        assert more, "consumption resumed once in-flight work drained"
        lag = samples(_text(source), "rag_monitor_consumer_lag")
        assert lag and all(v >= 0 for v in lag.values())
        assert sum(lag.values()) > 0
    finally:
        await source.stop()
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert positions[first.partition] == first.offset


async def _fetch_for(source: KafkaSource, seconds: float) -> list[SourceRecord]:
    got: list[SourceRecord] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for record in await source.fetch(0.2):
            got.append(record)
            source.finish(record)
    return got


@pytest.mark.kafka
async def test_kafka_start_latest_skips_what_came_before_only_where_nothing_was_committed(
    broker: Broker, topic: Topic
) -> None:
    """`RAG_MONITOR_KAFKA_START=latest`: a group's first start reads from each partition's
    end, so the 40 records already there are skipped and the 8 sent after it started are
    read; once it has committed, a restart goes on from the commits and reads the 6 sent
    while it was down (with `earliest`, every test here reads the 40). The 40 go one batch
    each: Tansu answers a partition's end as one past its last batch's first record."""
    settings = monitor_settings(broker, topic, None, kafka_start="latest")
    before = [(f"k{i}".encode(), b"{}") for i in range(40)]
    await produce(topic.bootstrap, topic.name, before, per_second=400)

    async def run(sent_while_up: int) -> list[SourceRecord]:
        source = KafkaSource(settings, Exporter())
        await source.start()
        try:
            await wait_until(lambda: len(source.assignment) == 4, 30, "four partitions assigned")
            got = await _fetch_for(source, 2.0)
            await produce(
                topic.bootstrap,
                topic.name,
                [(f"up{i}".encode(), b"{}") for i in range(sent_while_up)],
            )
            got += await _fetch_for(source, 3.0)
            await source.commit()
        finally:
            await source.stop()
        return got

    first = await run(8)
    assert sorted(r.key for r in first if r.key) == sorted(f"up{i}".encode() for i in range(8))
    await produce(topic.bootstrap, topic.name, [(f"down{i}".encode(), b"{}") for i in range(6)])
    again = await run(0)
    assert sorted(r.key for r in again if r.key) == sorted(f"down{i}".encode() for i in range(6))


@pytest.mark.kafka
async def test_after_the_broker_lost_records_reading_goes_on_from_the_first_newer_one(
    broker: Broker, topic: Topic
) -> None:
    """A broker that loses the tail of its log (noida-db in a restart) leaves a replica's
    position past the log's end, and gives those offsets to new records. The source reads
    on from the first record at or after the newest one it had fetched (by time): the new
    records are read, the log is not replayed from its start (the client's `earliest`
    did), and the next commit is the real position, not the lost one. The loss itself is
    made by moving the source's client and its bookkeeping past the end: a broker cannot
    be made to drop its tail on cue. noida-db answers the fetch past the end with
    OffsetOutOfRange; Tansu with nothing, so there the source sees the loss in the
    partition's high watermark, and Tansu answers the lookup by time with the log's
    first offset (found here): on Tansu the old records are read again. None is
    skipped on either."""
    settings = monitor_settings(broker, topic, None)
    base = int(time.time() * 1000) - 60_000
    producer = AIOKafkaProducer(bootstrap_servers=topic.bootstrap)
    await producer.start()
    try:
        for i in range(20):  # read before the loss, a millisecond apart
            await producer.send_and_wait(
                topic.name, b"{}", key=f"old{i}".encode(), partition=0, timestamp_ms=base + i
            )
        source = KafkaSource(settings, Exporter())
        await source.start()
        try:
            await wait_until(lambda: len(source.assignment) == 4, 30, "four partitions assigned")
            read = await _fetch_for(source, 3.0)
            assert sorted(r.offset for r in read) == list(range(20))
            for j in range(3):  # after the loss
                await producer.send_and_wait(
                    topic.name, b"{}", key=f"new{j}".encode(), partition=0,
                    timestamp_ms=base + 1_000 + j,
                )  # fmt: skip
            # the replica had read up to 39 when the broker lost 20..39
            key, tp = (topic.name, 0), TopicPartition(topic.name, 0)
            generation = source.tracker.generation(key)
            assert source._consumer is not None and generation is not None
            for offset in range(20, 40):
                source.tracker.start(key, offset, generation)
                source.tracker.finish(key, offset, generation)
            source._consumer.seek(tp, 40)
            again = await _fetch_for(source, 4.0)
            committed = await source.commit()
        finally:
            await source.stop()
    finally:
        await producer.stop()
    keys = sorted((r.key or b"").decode() for r in again)
    assert {"new0", "new1", "new2"} <= set(keys), keys
    if broker.kind == "noida":
        # the newest record read (old19) is the first at its time: read again, nothing older
        assert keys == ["new0", "new1", "new2", "old19"], keys
    assert committed[(topic.name, 0)] == 23


@pytest.mark.kafka
async def test_a_window_paused_longer_than_the_poll_interval_keeps_its_partitions(
    broker: Broker, topic: Topic
) -> None:
    """A long sink outage keeps the window full; the paused source still polls, so the
    client does not leave the group after max_poll_interval and the commit afterwards
    lands (without the polls it failed on Tansu: the member had left, its partitions gone;
    noida-db takes a commit from a member that left, so there this test cannot tell)."""
    settings = await forty_records(broker, topic)
    source = KafkaSource(
        settings, Exporter(), pause_after_seconds=0.5, max_poll_interval_seconds=2.0
    )
    await source.start()
    try:
        held = await fill_window(source, 8)
        full_at = time.monotonic()
        while time.monotonic() - full_at < 6.0:  # three poll intervals with a full window
            assert await source.fetch(0.2) == []
        assert source.paused
        for record in held:
            source.finish(record)
        committed = await source.commit()
    finally:
        await source.stop()
    ends = {
        p: max(r.offset for r in held if r.partition == p) + 1 for p in {r.partition for r in held}
    }
    assert {tp[1]: offset for tp, offset in committed.items()} == ends
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert {p: positions[p] for p in ends} == ends


@pytest.mark.kafka
async def test_a_full_window_pauses_the_partitions_only_after_a_stall(
    broker: Broker, topic: Topic
) -> None:
    settings = await forty_records(broker, topic)
    source = KafkaSource(settings, Exporter(), pause_after_seconds=1.0)
    await source.start()
    try:
        held = await fill_window(source, 8)
        deadline = time.monotonic() + 30
        full_at = time.monotonic()
        assert await source.fetch(0.2) == []
        assert not source.paused, "a moment of a full window keeps the fetched records"
        while time.monotonic() - full_at < 1.2:
            assert await source.fetch(0.2) == []
        assert source.paused, "a stall pauses the partitions"
        for record in held:
            source.finish(record)
        more: list[SourceRecord] = []
        while not more and time.monotonic() < deadline:
            more = await source.fetch(0.2)
        assert more and not source.paused
    finally:
        await source.stop()


@pytest.mark.kafka
async def test_a_replica_that_stood_still_past_its_session_lets_its_work_go_and_reads_it_again(
    broker: Broker, topic: Topic
) -> None:
    """A zombie (frozen past the session timeout, its partitions maybe given away) owns
    nothing it fetched before: the checkpoint drops that work instead of writing stale
    results, and the rejoined group hands the same records out again from the last commit."""
    settings = monitor_settings(broker, topic, None)
    await produce(topic.bootstrap, topic.name, [(f"k{i}".encode(), b"{}") for i in range(8)])
    skew = [0.0]
    source = KafkaSource(settings, Exporter(), clock=lambda: time.monotonic() + skew[0])
    await source.start()
    try:
        held = await fill_window(source, 8)
        deadline = time.monotonic() + 30
        assert all(source.owns(r) for r in held)
        skew[0] += settings.kafka_session_timeout_ms / 1000 + 1  # the loop stood still
        assert all(source.owns(r) for r in held)  # asking is not fencing (no await: no tick)
        source.fence()
        assert not any(source.owns(r) for r in held)
        again: list[SourceRecord] = []
        while len(again) < 8 and time.monotonic() < deadline + 30:
            again += await source.fetch(0.2)
        assert sorted((r.partition, r.offset) for r in again) == sorted(
            (r.partition, r.offset) for r in held
        )
        assert all(source.owns(r) for r in again) and not any(source.owns(r) for r in held)
        for record in again:
            source.finish(record)
        await source.commit()
    finally:
        await source.stop()
    ends: dict[int, int] = {}
    for r in held:
        ends[r.partition] = max(ends.get(r.partition, 0), r.offset + 1)
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert {p: c for p, c in positions.items() if p in ends} == ends


def test_the_frame_releasing_reader_fits_the_installed_aiokafka() -> None:
    # a new aiokafka with a changed reader is left alone: this test says so
    assert frames.release_frames()
    assert AIOKafkaConnection.__dict__["_read"].__func__ is frames._read_frames
    assert frames.release_frames(), "installing twice is harmless"


async def test_read_frame_reads_small_and_large_frames_and_reports_a_short_one() -> None:
    payload = bytes(range(256)) * (3 * frames._FRAME_PIECE // 256 + 7)
    reader = asyncio.StreamReader()
    reader.feed_data(payload[:100] + payload)
    reader.feed_data(b"tail")
    reader.feed_eof()
    assert await frames._read_frame(reader, 100) == payload[:100]
    frame = await frames._read_frame(reader, len(payload))
    assert type(frame) is bytes and frame == payload
    with pytest.raises(asyncio.IncompleteReadError):
        await frames._read_frame(reader, frames._FRAME_PIECE + 1)


@pytest.mark.kafka
async def test_the_last_fetch_response_is_not_kept_beside_its_records(
    broker: Broker, topic: Topic
) -> None:
    # ≈ 4 MB over every partition: each is buffered after the first fetch, so the client
    # has no reason to fetch again and no other response replaces the last one
    value = b"x" * 1000
    await produce(topic.bootstrap, topic.name, [(f"k{i}".encode(), value) for i in range(4000)])
    settings = monitor_settings(broker, topic, None, max_in_flight=8)
    source = KafkaSource(settings, Exporter())
    tracemalloc.start(25)
    try:
        await source.start()
        try:
            held: list[SourceRecord] = []
            deadline = time.monotonic() + 30
            while not held and time.monotonic() < deadline:
                held += await source.fetch(0.2)
            assert held
            await asyncio.sleep(0.5)  # the window is full: no other response comes
            snapshot = tracemalloc.take_snapshot()
        finally:
            await source.stop()
    finally:
        tracemalloc.stop()
    held_frames = snapshot.filter_traces(
        [
            tracemalloc.Filter(True, "*/asyncio/streams.py"),
            tracemalloc.Filter(True, frames.__file__),
        ]
    )
    kept = sum(stat.size for stat in held_frames.statistics("filename"))
    assert kept < 256 * 1024, f"{kept} bytes of response frames still held"


async def test_a_revoke_asks_the_pipeline_that_serves_the_hook_to_checkpoint() -> None:
    hook = RevokeHook()
    source = KafkaSource(Settings(), Exporter(), revoke_timeout_seconds=1.0, on_revoke=hook)
    tp = (source.topic, 0)
    asked: list[float] = []

    async def checkpoint(deadline: float) -> None:
        asked.append(deadline)

    source.tracker.assign(tp)
    await source._on_revoked([tp])  # no pipeline serves it: nothing to ask
    assert asked == []
    with hook.served_by(checkpoint):
        with pytest.raises(RuntimeError):  # one pipeline at a time
            with hook.served_by(checkpoint):
                pass
        source.tracker.assign(tp)
        started = time.monotonic()
        await source._on_revoked([tp])
        ended = time.monotonic()
    # with the revoke's deadline, 1 s after it started
    assert len(asked) == 1 and started + 1.0 <= asked[0] <= ended + 1.0
    source.tracker.assign(tp)
    await source._on_revoked([tp])
    assert len(asked) == 1, "the pipeline stopped serving it"


async def test_a_broker_error_while_finding_the_end_leaves_the_assignment_whole() -> None:
    """With `kafka_start=latest`, a broker that fails while the replica asks for its commits
    must not cut the assignment short (the ledger's part comes after it): the partitions are
    tracked, and the first fetch settles where they start (`_reposition`). A stand-in
    member raises the error: a broker dropping the connection at that moment cannot be
    timed against a real one."""

    class Failing:
        async def committed(self, tp: object) -> int:
            raise KafkaConnectionError("connection dropped")

    settings = Settings(kafka_start="latest")
    source = KafkaSource(settings, Exporter())
    source._member = Failing()
    tp = (source.topic, 3)
    await source._on_assigned([tp])
    assert source.assignment == [tp]
    assert source.tracker.position(tp) is None, "no start position was made up"


def _text(source: KafkaSource) -> str:
    from prometheus_client import generate_latest

    return generate_latest(source.exporter.registry).decode()


MALFORMED: list[tuple[bytes, str]] = [
    (b"this is not json", "not_json"),
    (b'{"id": "x", "user_input": "\xff\xfe"}', "not_utf8"),
    (b"[1, 2, 3]", "not_object"),
    (json.dumps({"id": "m1", "user_input": "q", "response": "a"}).encode(), "schema"),
    (
        json.dumps(
            {"id": "m2", "user_input": 3, "retrieved_contexts": "x", "response": ["a"]}
        ).encode(),
        "schema",
    ),
    (b'{"id": "big", "pad": "' + b"x" * 5_000_000 + b'"}', "too_large"),
]


@pytest.mark.kafka
async def test_malformed_records_go_to_the_dlq_and_consumption_goes_on(
    broker: Broker, topic: Topic, judge_server: JudgeServer
) -> None:
    settings = monitor_settings(broker, topic, judge_server)
    records = [(f"bad-{i}".encode(), value) for i, (value, _) in enumerate(MALFORMED)]
    records += [(f"rec-{i}".encode(), encode(interaction(i))) for i in range(6)]
    # everything on one partition, bad records first: a wedged consumer would never score
    await produce(topic.bootstrap, topic.name, records, partition=0)
    parts = build(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop, parts))
    try:
        await wait_until(
            lambda: parts.exporter.records_scored._value.get() >= 6, 60, "six records scored"
        )
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    assert parts.exporter.records_scored._value.get() == 6
    dead = await read_topic(topic.bootstrap, topic.dlq, expected=len(MALFORMED))
    assert len(dead) == len(MALFORMED)
    by_key = {d.key: d for d in dead}
    for i, (value, reason) in enumerate(MALFORMED):
        d = by_key[f"bad-{i}".encode()]
        headers = dict(d.headers)
        assert headers[HEADER_REASON].decode() == reason
        assert headers[HEADER_DETAIL]
        assert headers[HEADER_OFFSET] == str(i).encode()
        assert d.value == value  # the original bytes, 5 MB included
    invalid = samples(_registry_text(parts.exporter), "rag_monitor_records_invalid_total")
    assert invalid[(("reason", "schema"),)] == 2
    assert invalid[(("reason", "too_large"),)] == 1
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert positions[0] == len(records)


def _registry_text(exporter: Exporter) -> str:
    from prometheus_client import generate_latest

    return generate_latest(exporter.registry).decode()


@pytest.mark.kafka
async def test_every_malformed_record_reaches_the_dlq_at_a_low_sample_rate(
    broker: Broker, topic: Topic, judge_server: JudgeServer
) -> None:
    """Validation comes before sampling: at rate 0.05, all 24 bad records are dead-lettered."""
    settings = monitor_settings(broker, topic, judge_server, sample_rate=0.05)
    kinds = [b"{not json", b"\xff\xfe", b"[1, 2]",
             json.dumps({"id": "x", "user_input": "q", "response": "a"}).encode()]  # fmt: skip
    bad = [(f"bad-{i}".encode(), kinds[i % 4]) for i in range(24)]
    good = [(f"rec-{i}".encode(), encode(interaction(i))) for i in range(100)]
    mixed = [r for pair in zip(good, bad + [None] * 76, strict=True) for r in pair if r]
    await produce(topic.bootstrap, topic.name, mixed)
    parts = build(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop, parts))
    try:
        await wait_until(
            lambda: (
                parts.exporter.records_consumed.labels(topic=topic.name)._value.get() >= len(mixed)
                and parts.source.in_flight == 0
            ),
            60,
            "every record consumed and finished",
        )
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0
    dead = await read_topic(topic.bootstrap, topic.dlq, expected=len(bad))
    assert sorted(d.key for d in dead if d.key) == sorted(k for k, _ in bad)
    invalid = samples(_registry_text(parts.exporter), "rag_monitor_records_invalid_total")
    assert sum(invalid.values()) == len(bad)
    expected = sum(1 for k, _ in good if unit_hash(k) < 0.05)
    assert parts.exporter.records_sampled._value.get() == expected  # sampling unchanged
    positions = await committed_offsets(topic.bootstrap, topic.group, topic.name, 4)
    assert sum(p or 0 for p in positions.values()) == len(mixed)
