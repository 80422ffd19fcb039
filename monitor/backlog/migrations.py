"""The backlog's schema: the migration runner, and whether a database is up to date.

See docs/review.md, "The backlog" (``rag-monitor migrate``).
"""

from __future__ import annotations

import hashlib
import importlib.resources
import re
from collections.abc import Collection
from typing import Protocol

import structlog

from monitor.backlog.queries import Connection

log = structlog.get_logger("monitor.backlog.migrations")

MIGRATE_COMMAND = "rag-monitor migrate"

#: pg_advisory_lock key for migrations ("rag-monitor" folded to a bigint)
_MIGRATION_LOCK = int.from_bytes(hashlib.sha256(b"rag-monitor:migrate").digest()[:8], "big") >> 1


class MigrationError(Exception):
    """An applied migration file changed, or a migration failed."""


def migration_files() -> list[tuple[str, str]]:
    """(version, SQL text) for every ``sql/NNNN_*.sql``, in order."""
    folder = importlib.resources.files("monitor.backlog").joinpath("sql")
    files = sorted(
        (entry.name, entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if re.fullmatch(r"\d{4}_[\w-]+\.sql", entry.name)
    )
    return [(name.removesuffix(".sql"), text) for name, text in files]


async def apply_migrations(conn: Connection) -> list[str]:
    """Apply each migration file once, each in its own transaction, under an advisory lock."""
    applied: list[str] = []
    await conn.execute("SELECT pg_advisory_lock($1)", _MIGRATION_LOCK)
    try:
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version text PRIMARY KEY,"
            " checksum text NOT NULL,"
            " applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {
            r["version"]: r["checksum"]
            for r in await conn.fetch("SELECT version, checksum FROM schema_migrations")
        }
        for version, sql in migration_files():
            checksum = hashlib.sha256(sql.encode("utf-8")).hexdigest()
            if version in done:
                if done[version] != checksum:
                    raise MigrationError(
                        f"migration {version} was changed after it was applied; "
                        "add a new migration instead"
                    )
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, checksum) VALUES ($1, $2)",
                    version,
                    checksum,
                )
            applied.append(version)
            log.info("applied migration", version=version)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _MIGRATION_LOCK)
    return applied


async def applied_versions(conn: Connection) -> set[str]:
    """The versions recorded in ``schema_migrations`` (empty when it does not exist)."""
    if await conn.fetchval("SELECT to_regclass('schema_migrations')") is None:
        return set()
    return {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}


# --- is the schema up to date?


class SchemaBehind(Exception):
    """The database lacks bundled migrations (``missing``, in order)."""

    def __init__(self, missing: list[str]) -> None:
        self.missing = missing
        super().__init__(
            f"the backlog schema is missing migration(s) {', '.join(missing)}: "
            f"run `{MIGRATE_COMMAND}`"
        )


class AppliedMigrations(Protocol):
    """What the check needs: `monitor.backlog.store.BacklogStore.applied_migrations`."""

    async def applied_migrations(self) -> set[str]: ...


def missing_migrations(applied: Collection[str]) -> list[str]:
    """The bundled migration versions not in ``applied``, in order."""
    return [version for version, _ in migration_files() if version not in applied]


async def check_schema(backlog: AppliedMigrations) -> None:
    """Raise SchemaBehind unless every bundled migration was applied (StoreError: unreachable)."""
    missing = missing_migrations(await backlog.applied_migrations())
    if missing:
        raise SchemaBehind(missing)
