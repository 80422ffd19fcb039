"""Postgres stopped mid-stream and restarted: every flagged record ends up stored exactly once.

The sink is driven the way the pipeline drives it: a batch whose write raised
SinkBackpressure is written again (its offsets were not committed), and after the
outage the last batches are redelivered as a restarted consumer would.
Always uses an embedded server of its own (it is stopped during the test).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import pytest

from monitor.backlog.store import BacklogStore
from monitor.config import Settings
from monitor.records import Context, Interaction, MetricResult, ScoredRecord
from monitor.sinks import SinkBackpressure
from monitor.sinks.backlog import BacklogSink
from monitor.telemetry import Exporter
from tests.fixtures.postgres import started
from tests.support.embedded import EmbeddedPostgres
from tests.support.waits import wait_until

pytestmark = pytest.mark.postgres

BATCHES = 60
BATCH_SIZE = 5


def record(i: int) -> ScoredRecord:
    flagged = i % 5 != 0
    return ScoredRecord(
        interaction=Interaction(
            id=f"r-{i}",
            user_input=f"question number {i}",
            retrieved_contexts=(Context(text="context"),),
            response=f"answer {i}",
        ),
        results={
            "faithfulness": MetricResult(metric="faithfulness", score=0.1 if flagged else 1.0)
        },
    )


async def test_postgres_restart_mid_stream_loses_and_duplicates_nothing(
    own_postgres: EmbeddedPostgres,
) -> None:
    exporter = Exporter()
    settings = Settings(control_share=0.0, migrate_on_start=True)
    store = BacklogStore(own_postgres.dsn, settings, connect_timeout=1.0, command_timeout=5.0)
    sink = BacklogSink(store, settings, exporter)
    await sink.start()
    batches = [[record(b * BATCH_SIZE + k) for k in range(BATCH_SIZE)] for b in range(BATCHES)]
    written = asyncio.Event()
    outage_seen = asyncio.Event()
    retries = 0

    async def produce() -> None:
        nonlocal retries
        for n, batch in enumerate(batches):
            while True:  # the pipeline's retry: same batch, offsets not committed
                try:
                    await sink.write(batch)
                    break
                except SinkBackpressure as exc:
                    assert 0 < exc.retry_after <= 5.0
                    retries += 1
                    outage_seen.set()
                    await asyncio.sleep(0.05)  # the pipeline's pause before a retry
            if n == 10:
                written.set()
            await asyncio.sleep(0.01)  # pacing: the outage lands mid-stream, not after it
        # a restarted consumer redelivers everything after its last committed offset
        for batch in batches[-15:]:
            await sink.write(batch)

    async def outage() -> None:
        await written.wait()
        await asyncio.to_thread(own_postgres.stop)
        await asyncio.wait_for(outage_seen.wait(), timeout=30)
        first = retries
        await wait_until(lambda: retries >= first + 2, 60, "more retries while Postgres is away")
        await asyncio.to_thread(own_postgres.start)

    try:
        await asyncio.wait_for(asyncio.gather(produce(), outage()), timeout=120)
    finally:
        await sink.aclose()

    assert retries > 0
    errors = exporter.registry.get_sample_value("rag_monitor_backlog_write_errors_total")
    assert errors == retries
    flagged = {
        r.interaction.id
        for batch in batches
        for r in batch
        if r.interaction.id[2:] and int(r.interaction.id[2:]) % 5 != 0
    }
    conn = await asyncpg.connect(own_postgres.dsn, timeout=10)
    try:
        rows = await conn.fetch("SELECT id, seen_count FROM backlog")
        links = await conn.fetchval("SELECT count(*) FROM backlog_interactions")
    finally:
        await conn.close()
    assert sorted(r["id"] for r in rows) == sorted(flagged)
    assert {r["seen_count"] for r in rows} == {1}
    assert links == len(flagged)
    enqueued = exporter.registry.get_sample_value(
        "rag_monitor_backlog_enqueued_total", {"reason": "hallucination"}
    )
    assert enqueued == len(flagged)


def test_embedded_postgres_runs_unprivileged_and_leaves_nothing_behind() -> None:
    pg = started(EmbeddedPostgres())
    try:
        directory = pg.directory
        assert len(str(pg.socket_dir / ".s.PGSQL.65535")) < 107
        pid_file = pg.data_dir / "postmaster.pid"
        pid = int(pid_file.read_text().splitlines()[0])
        status = Path(f"/proc/{pid}/status").read_text()
        uid = int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])
        assert uid != 0
        assert pg.dsn.startswith("postgresql://postgres@127.0.0.1:")
        pg.stop()
        assert (
            not Path(f"/proc/{pid}").exists()
            or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
        )
        pg.start()  # same data, same port
        pid = int(pid_file.read_text().splitlines()[0])
    finally:
        pg.close()
    assert not directory.exists()
    assert (
        not Path(f"/proc/{pid}").exists()
        or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()
    )
