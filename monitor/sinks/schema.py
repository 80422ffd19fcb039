"""Is the backlog schema up to date? The applied migrations against the bundled ones.

The sidecar's ``/readyz`` (check ``schema``) and the backlog commands ask this
before they rely on the tables: a database nobody migrated, or one behind the
bundled ``sql/`` files, is reported in one line that names the fix,
``rag-monitor migrate``, instead of failing later on a missing table.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Protocol

MIGRATE_COMMAND = "rag-monitor migrate"


class SchemaBehind(Exception):
    """The database lacks bundled migrations (``missing``, in order)."""

    def __init__(self, missing: list[str]) -> None:
        self.missing = missing
        super().__init__(
            f"the backlog schema is missing migration(s) {', '.join(missing)}: "
            f"run `{MIGRATE_COMMAND}`"
        )


class AppliedMigrations(Protocol):
    """What the check needs: `monitor.sinks.backlog.BacklogSink.applied_migrations`."""

    async def applied_migrations(self) -> set[str]: ...


def missing_migrations(applied: Collection[str]) -> list[str]:
    """The bundled migration versions not in ``applied``, in order."""
    from monitor.sinks.backlog import migration_files  # asyncpg: only where the backlog is used

    return [version for version, _ in migration_files() if version not in applied]


async def check_schema(backlog: AppliedMigrations) -> None:
    """Raise SchemaBehind unless every bundled migration was applied (SinkError: unreachable)."""
    missing = missing_migrations(await backlog.applied_migrations())
    if missing:
        raise SchemaBehind(missing)
