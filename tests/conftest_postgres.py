"""Postgres fixtures (a pytest plugin: ``pytest_plugins = ["conftest_postgres"]``).

One server per test session: ``RAG_MONITOR_PG_DSN`` if set, else an embedded
Postgres started from the wheel's binaries (or ``pg_ctl`` on PATH) and stopped
at the end. Every test gets a schema of its own (``search_path`` in the DSN),
dropped afterwards, so tests never see each other's rows.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import asyncpg
import pytest

from monitor.config import Settings
from monitor.embedded.postgres import EmbeddedPostgres, PostgresUnavailable
from monitor.sinks.backlog import BacklogSink
from monitor.sinks.prometheus import Exporter

DSN_ENV = "RAG_MONITOR_PG_DSN"


def started(pg: EmbeddedPostgres) -> EmbeddedPostgres:
    """``pg`` started, or the test skipped (closing what it made) when there is no Postgres."""
    try:
        pg.start()
    except PostgresUnavailable as exc:
        pg.close()
        pytest.skip(f"no Postgres available: {exc}")
    return pg


@pytest.fixture(scope="session")
def pg_server() -> Iterator[str]:
    """The DSN of the session's Postgres server."""
    external = os.environ.get(DSN_ENV)
    if external:
        yield external
        return
    pg = started(EmbeddedPostgres())
    try:
        yield pg.dsn
    finally:
        pg.close()


def with_search_path(dsn: str, schema: str) -> str:
    return dsn + ("&" if "?" in dsn else "?") + f"search_path={schema}"


@pytest.fixture
async def pg_dsn(pg_server: str) -> AsyncIterator[str]:
    """A DSN whose search_path is a fresh, empty schema (dropped after the test)."""
    schema = f"t_{uuid.uuid4().hex[:16]}"
    conn = await asyncpg.connect(pg_server, timeout=10)
    try:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
    finally:
        await conn.close()
    try:
        yield with_search_path(pg_server, schema)
    finally:
        conn = await asyncpg.connect(pg_server, timeout=10)
        try:
            await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        finally:
            await conn.close()


SettingsFactory = Callable[..., Settings]


@pytest.fixture
def make_settings() -> SettingsFactory:
    """Settings for backlog tests: no control share unless asked, no env/config surprises."""

    def make(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"control_share": 0.0}
        values.update(overrides)
        return Settings(**values)

    return make


@pytest.fixture
async def backlog(pg_dsn: str, make_settings: SettingsFactory) -> AsyncIterator[BacklogSink]:
    """A started, migrated sink with its own exporter (``sink_exporter``)."""
    sink = BacklogSink(pg_dsn, make_settings(), Exporter(), stats_interval=0)
    await sink.start()
    await sink.migrate()
    try:
        yield sink
    finally:
        await sink.close()


@pytest.fixture
def own_postgres() -> Iterator[EmbeddedPostgres]:
    """A server of the test's own, which the test may stop and restart (same port and data)."""
    pg = started(EmbeddedPostgres())
    try:
        yield pg
    finally:
        pg.close()
