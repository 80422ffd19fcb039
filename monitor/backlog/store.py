"""`BacklogStore`: the backlog's Postgres pool and every query (the only asyncpg import).

See docs/review.md, "The backlog".
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import asyncpg

from monitor.backlog import queries, reviews
from monitor.backlog.calibration import Calibration, Cell, Traffic, estimate
from monitor.backlog.entries import Entry, clean
from monitor.backlog.migrations import applied_versions, apply_migrations
from monitor.backlog.reviews import ImportReport, ImportRow, VerdictInput
from monitor.backlog.rows import (
    QUEUE_ORDERS,
    STATUSES,
    BacklogRow,
    BacklogStats,
    JudgeCount,
    QueueItem,
    QueueOrder,
)
from monitor.config import Settings
from monitor.flags import hallucination_rule
from monitor.redaction import Redactor

#: the name errors carry ("backlog: postgres unreachable ...")
NAME = "backlog"

# errors that mean "Postgres is not reachable right now", worth retrying
_RETRYABLE: tuple[type[BaseException], ...] = (
    OSError,
    TimeoutError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    asyncpg.InternalClientError,  # a connection left mid-operation by an outage
    asyncpg.exceptions.OperatorInterventionError,  # admin shutdown, cannot connect now
    asyncpg.exceptions.InsufficientResourcesError,  # too many connections, disk full
    asyncpg.exceptions.TransactionRollbackError,  # serialization failure, deadlock
)
# errors about the record itself: writing it again cannot succeed
_PERMANENT: tuple[type[asyncpg.PostgresError], ...] = (
    asyncpg.exceptions.DataError,
    asyncpg.exceptions.IntegrityConstraintViolationError,
)


class StoreError(Exception):
    """The store could not do what was asked; ``retryable`` says whether trying again can work."""

    def __init__(self, detail: str, *, retryable: bool = True) -> None:
        super().__init__(f"{NAME}: {detail}")
        self.detail = detail
        self.retryable = retryable


async def _init_connection(conn: asyncpg.Connection) -> None:
    for pg_type in ("json", "jsonb"):
        await conn.set_type_codec(
            pg_type,
            encoder=lambda v: json.dumps(v, allow_nan=False),
            decoder=json.loads,
            schema="pg_catalog",
        )


class BacklogStore:
    """The backlog in Postgres. Construction has no side effects; `start` opens the pool
    (and migrates when ``settings.migrate_on_start``), `close` closes it.
    """

    def __init__(
        self,
        dsn: str,
        settings: Settings,
        *,
        connect_timeout: float = 5.0,
        command_timeout: float = 30.0,
        pool_size: int = 4,
        owner: str | None = None,
    ) -> None:
        self._dsn = dsn
        self._settings = settings
        #: what the flags this store calibrates count as a hallucination, in one sentence
        self.hallucination_rule = hallucination_rule(settings.thresholds)
        self._connect_timeout = connect_timeout
        self._command_timeout = command_timeout
        self._pool_size = pool_size
        #: who holds the leases this store claims (one per offline runner)
        self.owner = owner or f"runner-{uuid.uuid4().hex[:12]}"
        #: what every stored text goes through (None: ``redact_pii`` is off)
        self.redactor = Redactor(settings.redaction_patterns) if settings.redact_pii else None
        self._pool: asyncpg.Pool | None = None

    # --- lifecycle

    async def start(self, *, check: bool = True) -> None:
        """Open the pool; with ``check``, fail now (StoreError) if Postgres is unreachable."""
        if self._pool is None:
            self._pool = await asyncpg.create_pool(
                self._dsn,
                min_size=0,
                max_size=self._pool_size,
                timeout=self._connect_timeout,
                command_timeout=self._command_timeout,
                max_inactive_connection_lifetime=60.0,
                init=_init_connection,
            )
        if check or self._settings.migrate_on_start:
            await self.ping()
        if self._settings.migrate_on_start:
            await self.migrate()

    async def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), timeout=10)
            except TimeoutError:
                pool.terminate()

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[asyncpg.Connection]:
        """A pooled connection; asyncpg's errors leave it as `StoreError` (see the module)."""
        if self._pool is None:
            raise StoreError("not started", retryable=False)
        try:
            async with self._pool.acquire(timeout=self._connect_timeout + 5) as conn:
                try:
                    yield conn
                except _RETRYABLE:
                    # never hand a connection that failed mid-operation back to the pool
                    conn.terminate()
                    raise
        except asyncpg.ClientConfigurationError as exc:  # the DSN's options, e.g. sslmode
            detail = f"RAG_MONITOR_PG_DSN cannot be used: {self._scrub(str(exc))}"
            raise StoreError(detail, retryable=False) from exc
        except _RETRYABLE as exc:
            raise StoreError(f"cannot reach Postgres at {self.endpoint}: {self._why(exc)}") from exc
        except _PERMANENT as exc:
            detail = f"postgres refused the data {exc.sqlstate}: {type(exc).__name__}"
            raise StoreError(detail, retryable=False) from exc
        except asyncpg.PostgresError as exc:
            # schema not migrated, no privilege, read-only replica...: an operator fixes
            # it and the same write then succeeds, so the records must not be given up
            detail = f"postgres at {self.endpoint}: error {exc.sqlstate}: {self._why(exc)}"
            raise StoreError(detail) from exc

    @property
    def endpoint(self) -> str:
        """``host:port`` of the DSN (no user, no password), as the messages name it."""
        parts = urlsplit(self._dsn)
        host = parts.hostname or "localhost"
        shown = f"[{host}]" if ":" in host else host
        try:
            port = parts.port or 5432
        except ValueError:
            port = 5432
        return f"{shown}:{port}"

    def _scrub(self, text: str) -> str:
        """``text`` without the DSN's password."""
        password = urlsplit(self._dsn).password
        return text.replace(password, "***") if password else text

    def _why(self, exc: BaseException) -> str:
        """What went wrong reaching Postgres, in words: the OS's reason or the server's."""
        if isinstance(exc, socket.gaierror):
            return f"cannot resolve the host ({exc.strerror})"
        if isinstance(exc, ConnectionRefusedError):
            return "connection refused"
        if isinstance(exc, TimeoutError):
            return f"no answer within {self._connect_timeout:g} s"
        if isinstance(exc, OSError) and exc.strerror:
            return exc.strerror.lower()
        if isinstance(exc, asyncpg.PostgresError):  # the server's own words (no data here)
            return self._scrub(str(exc)) or type(exc).__name__
        return self._scrub(str(exc)) or type(exc).__name__

    async def ping(self) -> None:
        """Raise StoreError unless Postgres answers (for /readyz)."""
        async with self.connection() as conn:
            await conn.fetchval("SELECT 1")

    async def migrate(self) -> list[str]:
        """Apply pending migrations; returns the versions applied now."""
        async with self.connection() as conn:
            return await apply_migrations(conn)

    async def applied_migrations(self) -> set[str]:
        """The versions recorded in ``schema_migrations`` (empty when it does not exist)."""
        async with self.connection() as conn:
            return await applied_versions(conn)

    # --- writing

    async def enqueue(
        self, entries: Sequence[Entry], traffic: Traffic | None = None
    ) -> list[Entry]:
        """Store ``entries`` and add ``traffic`` to the traffic totals, in one transaction;
        returns the entries queued (a redelivered interaction id is not)."""
        queued: list[Entry] = []
        async with self.connection() as conn, conn.transaction():
            for entry in entries:
                row = await conn.fetchrow(
                    queries.ENQUEUE,
                    entry.id,
                    entry.reasons,
                    entry.question_hash,
                    *entry.row_values(),
                )
                if row is None:
                    continue  # a redelivery: this id is already in the backlog
                queued.append(entry)
                if not row["inserted"]:
                    await conn.execute(
                        queries.KEEP_LOWEST,
                        row["id"],
                        *entry.row_values(),
                        entry.record["id"],
                    )
                answer = await conn.fetchrow(
                    queries.ADD_ANSWER,
                    entry.id,
                    row["id"],
                    entry.answer_key,
                    entry.reasons,
                    entry.record,
                    entry.online_scores,
                    entry.online_details,
                    entry.judge,
                    entry.inclusion_probability,
                    entry.weight,
                    entry.judge_model,
                )
                await conn.execute(
                    queries.LINK, entry.id, row["id"], answer["interaction_id"], entry.reasons
                )
                if answer["inserted"] and not row["inserted"]:
                    await conn.execute(queries.BUMP, row["id"])
            if traffic is not None and traffic.scored:
                # last: the one shared row stays locked only until the commit
                await conn.execute(
                    queries.TRAFFIC_ADD,
                    traffic.scored,
                    traffic.hallucinations,
                    traffic.scored_weight,
                    traffic.hallucination_weight,
                )
        return queued

    # --- stats

    async def stats(self) -> BacklogStats:
        async with self.connection() as conn:
            counts = await _status_counts(conn)
            by_reason = await conn.fetch(queries.INTERACTIONS_BY_REASON)
            summary = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM backlog_interactions) AS interactions,"
                " (SELECT coalesce(sum(seen_count), 0) FROM backlog) AS seen,"
                " (SELECT min(created_at) FROM backlog WHERE status = 'pending') AS oldest"
            )
        assert summary is not None
        return BacklogStats(
            counts=counts,
            interactions=summary["interactions"],
            interactions_by_reason={r["reason"]: r["n"] for r in by_reason},
            seen_total=summary["seen"],
            oldest_pending=summary["oldest"],
        )

    # --- reading and annotating

    async def get(self, backlog_id: str) -> BacklogRow | None:
        async with self.connection() as conn:
            row = await conn.fetchrow(queries.ROW_SELECT + " WHERE b.id = $1", backlog_id)
        return None if row is None else BacklogRow.from_record(row)

    async def rows(self, status: str | None = None) -> AsyncIterator[BacklogRow]:
        """Every row (of ``status``), oldest first, streamed with a server-side cursor."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; one of {', '.join(STATUSES)}")
        async with self.connection() as conn, conn.transaction():
            cursor = conn.cursor(
                queries.ROW_SELECT + " WHERE $1::text IS NULL OR b.status = $1"
                " ORDER BY b.created_at, b.id",
                status,
                prefetch=200,
            )
            async for row in cursor:
                yield BacklogRow.from_record(row)

    async def import_references(
        self, rows: Iterable[ImportRow], *, force: bool = False
    ) -> ImportReport:
        """Set references (status → annotated), row by row; bad rows are rejected, not fatal.

        Only pending and annotated rows take a reference; evaluated rows only with
        ``force`` (their offline scores are cleared); discarded rows and rows being
        evaluated never.
        """
        report = ImportReport()
        for item in rows:
            if item.error is not None:
                report.rejected.append((item.line, item.id, item.error))
                continue
            if item.blank:
                report.skipped.append((item.line, item.id))
                continue
            if not item.id:
                report.rejected.append((item.line, None, "missing id"))
                continue
            reference = self.redacted((item.reference or "").strip())
            if not reference and not item.verdicts:
                report.rejected.append((item.line, item.id, "missing or empty reference"))
                continue
            note = self.redacted(item.note)
            async with self.connection() as conn, conn.transaction():
                problem, status = await reviews.import_annotation(
                    conn, item.id, reference, item.verdicts, note, force=force
                )
            if problem is not None:
                report.rejected.append((item.line, item.id, problem))
                continue
            report.verdicts += len(item.verdicts)
            if reference:
                report.changed.append((item.line, item.id, str(status)))
        return report

    def redacted(self, text: str | None) -> str | None:
        """``text`` as it may be stored: redacted (like everything else), NULs replaced."""
        if text is None:
            return None
        if self.redactor is not None:
            text = self.redactor.redact_value(text, Counter())
        return str(clean(text))

    async def review(
        self,
        backlog_id: str,
        *,
        version: int,
        reviewer: str,
        reference: str | None = None,
        verdicts: Sequence[VerdictInput] = (),
        note: str | None = None,
        discard: bool = False,
    ) -> int:
        """Apply one reviewer's save, all of it or nothing; returns the row's new version.

        Raises ReviewProblem: ``not_found``; ``stale`` when ``version`` is not the
        row's (someone saved first); ``conflict`` when the row's status refuses it
        (being evaluated, or discarded and given a reference); ``invalid`` naming the
        field. A reference equal to the stored one changes nothing; a new one sets
        the row annotated (an evaluated row's offline scores are cleared, as with
        ``import --force``).
        """
        reference = self.redacted(reference.strip() if reference is not None else None)
        note = self.redacted(note.strip() if note is not None else None) or None
        async with self.connection() as conn, conn.transaction():
            return await reviews.apply_review(
                conn,
                backlog_id,
                version=version,
                reviewer=reviewer,
                reference=reference,
                verdicts=verdicts,
                note=note,
                discard=discard,
            )

    async def queue(
        self,
        *,
        status: str | None = None,
        reason: str | None = None,
        route: str | None = None,
        order: QueueOrder = "risk",
        limit: int = 50,
        after: tuple[Any, str] | None = None,
    ) -> list[QueueItem]:
        """One page of the review queue, keyset-paged: rows after ``after`` (its sort key, id)."""
        if order not in QUEUE_ORDERS:
            raise ValueError(f"unknown order {order!r}")
        # risk: the rows with an answer both judges flagged first (true sorts above false,
        # descending); risk ties (every row of a judge that gives no probability) newest first
        key = {
            "risk": "both_flagged, risk, created_at",
            "newest": "created_at",
            "seen": "seen_count",
        }[order]
        where: list[str] = []
        args: list[Any] = []
        # each filter is a fixed SQL fragment with a numbered parameter (no value in the text)
        for fragment, value in (
            ("status = ${}", status),
            ("reasons @> ARRAY[${}::text]", reason),
            ("route = ${}", route),
        ):
            if value is not None:
                args.append(value)
                where.append(fragment.format(len(args)))
        if after is not None:
            sort, after_id = after
            values = [*sort, after_id] if order == "risk" else [sort, after_id]
            args.extend(values)
            marks = ", ".join(f"${len(args) - k}" for k in reversed(range(len(values))))
            where.append(f"({key}, id) < ({marks})")
        args.append(limit)
        # the text is built only from constant fragments and the order's column name
        sql = queries.QUEUE_SELECT + (" WHERE " + " AND ".join(where) if where else "")
        columns = ", ".join(f"{column} DESC" for column in (*key.split(", "), "id"))
        sql += f" ORDER BY {columns} LIMIT ${len(args)}"
        async with self.connection() as conn:
            rows = await conn.fetch(sql, *args)
        return [QueueItem(**dict(r)) for r in rows]

    async def neighbours(
        self, backlog_id: str, *, status: str | None = None
    ) -> tuple[str | None, str | None]:
        """(newer, older) row ids next to ``backlog_id`` in the newest-first queue of ``status``."""
        async with self.connection() as conn:
            here = await conn.fetchrow("SELECT created_at FROM backlog WHERE id = $1", backlog_id)
            if here is None:
                return None, None
            newer = await conn.fetchval(
                "SELECT id FROM backlog WHERE ($3::text IS NULL OR status = $3)"
                " AND (created_at, id) > ($1, $2) ORDER BY created_at, id LIMIT 1",
                here["created_at"],
                backlog_id,
                status,
            )
            older = await conn.fetchval(
                "SELECT id FROM backlog WHERE ($3::text IS NULL OR status = $3)"
                " AND (created_at, id) < ($1, $2) ORDER BY created_at DESC, id DESC LIMIT 1",
                here["created_at"],
                backlog_id,
                status,
            )
        return newer, older

    async def status_counts(self) -> dict[str, int]:
        """Rows per status (every status, 0 when none)."""
        async with self.connection() as conn:
            return await _status_counts(conn)

    async def calibration(self) -> Calibration:
        """The calibrated hallucination rate from every answer's latest verdicts."""
        calibration, _ = await self.calibration_snapshot()
        return calibration

    async def calibration_snapshot(self) -> tuple[Calibration, dict[tuple[str, str], int]]:
        """The calibration and every verdict ever recorded by (reason, verdict), a count
        that only grows, read from one snapshot.

        Two separate reads could straddle a review and export a precision that
        disagrees with the verdict counts beside it.
        """
        async with (
            self.connection() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            cells = _cells(await conn.fetch(queries.CALIBRATION_CELLS))
            counts = {
                (r["reason"], r["verdict"]): r["n"]
                for r in await conn.fetch(queries.VERDICT_COUNTS)
            }
            totals = await conn.fetchrow(queries.TRAFFIC)
        traffic = (
            None
            if totals is None
            else Traffic(
                scored=totals["scored"],
                hallucinations=totals["hallucinations"],
                scored_weight=totals["scored_weight"],
                hallucination_weight=totals["hallucination_weight"],
            )
        )
        estimate_ = await asyncio.to_thread(estimate, [Cell.from_json(c) for c in cells], traffic)
        return estimate_, counts

    async def judges(self) -> list[JudgeCount]:
        """The judges that scored the queued answers, the most answers first."""
        async with self.connection() as conn:
            rows = await conn.fetch(queries.JUDGES)
        return [JudgeCount(r["judge"], r["judge_model"], r["answers"]) for r in rows]

    async def discard(self, ids: Iterable[str]) -> int:
        """Mark rows discarded (not while being evaluated); returns how many changed."""
        async with self.connection() as conn:
            result: str = await conn.execute(
                "UPDATE backlog SET status = 'discarded', version = version + 1,"
                " updated_at = now()"
                " WHERE id = ANY($1::text[]) AND status <> 'evaluating'",
                list(ids),
            )
        return int(result.split()[-1])

    # --- offline runner

    async def claim_annotated(
        self, limit: int, *, lease_seconds: float = 900.0
    ) -> list[BacklogRow]:
        """Lease up to ``limit`` annotated rows (or rows whose lease expired) to this owner."""
        async with self.connection() as conn:
            rows = await conn.fetch(queries.CLAIM, limit, self.owner, float(lease_seconds))
        return [BacklogRow.from_record(r) for r in rows]

    async def store_offline(
        self,
        backlog_id: str,
        scores: Mapping[str, float | None],
        details: Mapping[str, Any],
    ) -> bool:
        """Store offline scores and mark the row evaluated; False if our lease was lost."""
        async with self.connection() as conn:
            result: str = await conn.execute(
                queries.STORE_OFFLINE, backlog_id, clean(scores), clean(details), self.owner
            )
        return result.endswith(" 1")

    async def release(self, backlog_id: str) -> bool:
        """Give a claimed row back (status annotated), e.g. when it could not be scored."""
        async with self.connection() as conn:
            result: str = await conn.execute(queries.RELEASE, backlog_id, self.owner)
        return result.endswith(" 1")


async def _status_counts(conn: asyncpg.Connection) -> dict[str, int]:
    rows = await conn.fetch("SELECT status, count(*) AS n FROM backlog GROUP BY status")
    counts = dict.fromkeys(STATUSES, 0)
    counts.update({r["status"]: r["n"] for r in rows})
    return counts


def _cells(rows: Iterable[Any]) -> list[dict[str, Any]]:
    return [
        {
            "reasons": list(r["reasons"]),
            "verdicts": dict(r["verdicts"] or {}),
            "faithfulness_scored": r["scored"],
            "llm_flagged": r["llm_flagged"],
            "local_flagged": r["local_flagged"],
            "n": r["n"],
            "weight": r["w"],
            "weight_squares": r["wsq"],
            "answer_weight_squares": r["w2"],
        }
        for r in rows
    ]
