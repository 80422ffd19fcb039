"""The golden-set backlog in Postgres: the only asyncpg import (DESIGN §5).

What is queued: every scored record with a flag reason (`monitor.flags`), plus a
control share (``settings.control_share``) chosen from a salted hash of the id,
so a redelivery makes the same choice and the choice is independent of the
sampler's own hash. Each record is PII-redacted (`monitor.redaction`) before it
is stored; what was redacted is kept as kind + count.

Idempotence: every interaction id ever queued is remembered in
``backlog_interactions``; a redelivered id changes nothing. A *new* id whose
normalised question (lower-case, punctuation stripped, whitespace collapsed,
SHA-256) is already in the backlog increments that row's ``seen_count`` and adds
its reasons instead of adding a row. A batch is one transaction: stored whole or
not at all. `write` raises ``SinkError(retryable=True)`` when Postgres cannot be
reached, and also for errors an operator fixes (schema not migrated, missing
privilege, read-only server): the pipeline keeps the offsets and retries, and
``backlog_write_errors_total`` rises. Only data errors about the record itself
(SQLSTATE classes 22 and 23) are permanent (``retryable=False``).

Row life cycle: pending → annotated (a reference was imported) → evaluating
(claimed by an offline runner with ``FOR UPDATE SKIP LOCKED`` under a lease;
an expired lease makes the row claimable again, so a crashed runner's rows come
back) → evaluated; or discarded. SQL is always parameterised.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import hashlib
import importlib.resources
import io
import json
import logging
import math
import re
import unicodedata
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import asyncpg

from monitor.config import Settings
from monitor.flags import CONTROL, flag_reasons
from monitor.records import Context, Interaction, ScoredRecord
from monitor.redaction import Redactor, summarize
from monitor.sinks import SinkError
from monitor.sinks.prometheus import Exporter

log = logging.getLogger(__name__)

SINK = "backlog"

PENDING = "pending"
ANNOTATED = "annotated"
EVALUATING = "evaluating"
EVALUATED = "evaluated"
DISCARDED = "discarded"
STATUSES = (PENDING, ANNOTATED, EVALUATING, EVALUATED, DISCARDED)

ExportFormat = Literal["jsonl", "csv", "ragas"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = ("jsonl", "csv", "ragas")
CSV_COLUMNS = (
    "id",
    "status",
    "user_input",
    "retrieved_contexts",
    "response",
    "reasons",
    "scores",
    "reference",
    "offline_scores",
    "seen_count",
    "created_at",
)

#: pg_advisory_lock key for migrations ("rag-monitor" folded to a bigint)
_MIGRATION_LOCK = int.from_bytes(hashlib.sha256(b"rag-monitor:migrate").digest()[:8], "big") >> 1

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


# --- pure helpers


def normalise_question(text: str) -> str:
    """Lower-case, punctuation stripped, whitespace collapsed (Unicode-aware)."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = "".join(" " if unicodedata.category(ch).startswith("P") else ch for ch in text)
    return re.sub(r"\s+", " ", text).strip()


def question_hash(text: str) -> str:
    return hashlib.sha256(normalise_question(text).encode("utf-8")).hexdigest()


def is_control(interaction_id: str, share: float) -> bool:
    """Deterministic, uniform in [0, 1), salted so it is independent of the sampler's hash."""
    if share <= 0.0:
        return False
    digest = hashlib.sha256(b"rag-monitor:control:" + interaction_id.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < share


def backlog_reasons(record: ScoredRecord, settings: Settings) -> list[str]:
    """Why ``record`` goes to the backlog (empty: it does not)."""
    if record.error is not None:
        return []  # not scored: nothing to curate
    reasons = flag_reasons(record, settings.thresholds)
    if not reasons and is_control(record.interaction.id, settings.control_share):
        reasons = [CONTROL]
    return reasons


def _clean(value: Any) -> Any:
    """JSON-safe for Postgres: NaN/inf → null, NUL characters (rejected by text/jsonb) → U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {_clean(str(k)): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


@dataclass(frozen=True)
class Entry:
    """One record as it will be stored (already redacted)."""

    id: str
    reasons: list[str]
    question_hash: str
    record: dict[str, Any]
    redactions: list[dict[str, object]]
    route: str | None
    judge: str | None
    inclusion_probability: float
    online_scores: dict[str, float | None]
    online_details: dict[str, Any]


def build_entry(record: ScoredRecord, reasons: Sequence[str], redactor: Redactor | None) -> Entry:
    """Redact and shape ``record`` for storage. Pure."""
    interaction = record.interaction
    counts: Counter[str] = Counter()

    def red(value: Any) -> Any:
        return _clean(value if redactor is None else redactor.redact_value(value, counts))

    stored: dict[str, Any] = {
        "id": _clean(interaction.id),
        "user_input": red(interaction.user_input),
        "retrieved_contexts": [
            {"text": red(c.text), "id": _clean(c.id), "score": _clean(c.score)}
            for c in interaction.retrieved_contexts
        ],
        "response": red(interaction.response),
        "reference": red(interaction.reference),
        "timestamp": interaction.timestamp.isoformat() if interaction.timestamp else None,
        "metadata": red(interaction.metadata),
    }
    details: dict[str, Any] = {}
    for name, result in record.results.items():
        metric_details = dict(result.details)
        if result.error is not None:
            metric_details["error"] = result.error
        details[name] = red(metric_details)
    judges = {r.judge for r in record.results.values()}
    return Entry(
        id=_clean(interaction.id),
        reasons=[_clean(r) for r in reasons],
        question_hash=question_hash(stored["user_input"]),
        record=stored,
        redactions=[
            r.as_json() for r in summarize(counts, redactor.kinds if redactor else ())
        ],
        route=_clean(interaction.route),
        judge=judges.pop() if len(judges) == 1 else None,
        inclusion_probability=record.inclusion_probability,
        online_scores={
            name: _clean(r.json_score()) for name, r in record.results.items()
        },
        online_details=details,
    )


@dataclass(frozen=True)
class BacklogRow:
    """One backlog row as read back."""

    id: str
    status: str
    reasons: list[str]
    seen_count: int
    record: dict[str, Any]
    redactions: list[dict[str, Any]]
    online_scores: dict[str, float | None]
    online_details: dict[str, Any]
    reference: str | None
    offline_scores: dict[str, float | None] | None
    offline_details: dict[str, Any] | None
    evaluation_count: int
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_record(cls, row: Mapping[str, Any]) -> BacklogRow:
        return cls(
            id=row["id"],
            status=row["status"],
            reasons=list(row["reasons"]),
            seen_count=row["seen_count"],
            record=row["record"],
            redactions=row["redactions"],
            online_scores=row["online_scores"],
            online_details=row["online_details"],
            reference=row["reference"],
            offline_scores=row["offline_scores"],
            offline_details=row["offline_details"],
            evaluation_count=row["evaluation_count"],
            created_at=row["created_at"],
            updated_at=row["updated_at"],
        )

    @property
    def user_input(self) -> str:
        return str(self.record.get("user_input", ""))

    @property
    def response(self) -> str:
        return str(self.record.get("response", ""))

    @property
    def context_texts(self) -> list[str]:
        return [str(c.get("text", "")) for c in self.record.get("retrieved_contexts", [])]

    def to_interaction(self) -> Interaction:
        """The (redacted) interaction with its reference, for the offline metrics."""
        metadata = self.record.get("metadata")
        return Interaction(
            id=self.id,
            user_input=self.user_input,
            retrieved_contexts=tuple(
                Context(text=str(c.get("text", "")), id=c.get("id"), score=c.get("score"))
                for c in self.record.get("retrieved_contexts", [])
            ),
            response=self.response,
            reference=self.reference,
            metadata=metadata if isinstance(metadata, dict) else {},
        )


def export_line(row: BacklogRow, fmt: ExportFormat) -> str:
    """One exported line (with its newline). ``csv`` lines follow `csv_header`."""
    if fmt == "ragas":
        # the columns of a Ragas SingleTurnSample: EvaluationDataset.from_list(lines)
        sample = {
            "user_input": row.user_input,
            "retrieved_contexts": row.context_texts,
            "response": row.response,
            "reference": row.reference,
        }
        return json.dumps(sample, ensure_ascii=False) + "\n"
    fields: dict[str, Any] = {
        "id": row.id,
        "status": row.status,
        "user_input": row.user_input,
        "retrieved_contexts": row.context_texts,
        "response": row.response,
        "reasons": row.reasons,
        "scores": row.online_scores,
        "reference": row.reference,
        "offline_scores": row.offline_scores,
        "seen_count": row.seen_count,
        "created_at": row.created_at.isoformat(),
    }
    if fmt == "jsonl":
        fields["details"] = row.online_details
        fields["offline_details"] = row.offline_details
        fields["redactions"] = row.redactions
        return json.dumps(fields, ensure_ascii=False) + "\n"
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(
        [
            v if isinstance(v, str) else ("" if v is None else json.dumps(v, ensure_ascii=False))
            for v in (fields[c] for c in CSV_COLUMNS)
        ]
    )
    return buffer.getvalue()


def csv_header() -> str:
    return ",".join(CSV_COLUMNS) + "\n"


@dataclass(frozen=True)
class ImportRow:
    """One line of an annotation file: an id and its reference, or why it could not be read."""

    line: int
    id: str | None = None
    reference: str | None = None
    error: str | None = None


@dataclass
class ImportReport:
    #: (line, id, previous status)
    changed: list[tuple[int, str, str]] = field(default_factory=list)
    #: (line, id or None, reason)
    rejected: list[tuple[int, str | None, str]] = field(default_factory=list)


@dataclass(frozen=True)
class BacklogStats:
    counts: dict[str, int]
    interactions: int
    seen_total: int
    oldest_pending: datetime | None

    @property
    def rows(self) -> int:
        return sum(self.counts.values())


class MigrationError(Exception):
    """An applied migration file changed, or a migration failed."""


# --- migrations


def migration_files() -> list[tuple[str, str]]:
    """(version, SQL text) for every ``sql/NNNN_*.sql``, in order."""
    folder = importlib.resources.files("monitor.sinks").joinpath("sql")
    files = sorted(
        (entry.name, entry.read_text(encoding="utf-8"))
        for entry in folder.iterdir()
        if re.fullmatch(r"\d{4}_[\w-]+\.sql", entry.name)
    )
    return [(name.removesuffix(".sql"), text) for name, text in files]


async def apply_migrations(conn: asyncpg.Connection) -> list[str]:
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
            log.info("applied migration %s", version)
    finally:
        await conn.execute("SELECT pg_advisory_unlock($1)", _MIGRATION_LOCK)
    return applied


async def _init_connection(conn: asyncpg.Connection) -> None:
    for pg_type in ("json", "jsonb"):
        await conn.set_type_codec(
            pg_type,
            encoder=lambda v: json.dumps(v, allow_nan=False),
            decoder=json.loads,
            schema="pg_catalog",
        )


# --- SQL

_ENQUEUE = """
WITH new_interaction AS (
    INSERT INTO backlog_interactions (interaction_id, backlog_id)
    VALUES ($1, $1)
    ON CONFLICT (interaction_id) DO NOTHING
    RETURNING interaction_id
)
INSERT INTO backlog AS b (
    id, reasons, question_hash, record, redactions, route, judge,
    inclusion_probability, online_scores, online_details
)
SELECT interaction_id, $2, $3, $4, $5, $6, $7, $8, $9, $10 FROM new_interaction
ON CONFLICT (question_hash) DO UPDATE SET
    seen_count = b.seen_count + 1,
    reasons = ARRAY(
        SELECT r FROM unnest(b.reasons || EXCLUDED.reasons) WITH ORDINALITY AS t(r, n)
        GROUP BY r ORDER BY min(n)
    ),
    last_seen_at = now(),
    updated_at = now()
RETURNING b.id, (xmax = 0) AS inserted
"""

_LINK_REPEAT = "UPDATE backlog_interactions SET backlog_id = $2 WHERE interaction_id = $1"

_CLAIM = """
WITH claimable AS (
    SELECT id FROM backlog
    WHERE status = 'annotated' OR (status = 'evaluating' AND lease_expires_at < now())
    ORDER BY updated_at, id
    LIMIT $1
    FOR UPDATE SKIP LOCKED
)
UPDATE backlog AS b SET
    status = 'evaluating',
    lease_owner = $2,
    lease_expires_at = now() + make_interval(secs => $3),
    updated_at = now()
FROM claimable
WHERE b.id = claimable.id
RETURNING b.*
"""

_STORE_OFFLINE = """
UPDATE backlog SET
    status = 'evaluated',
    offline_scores = $2,
    offline_details = $3,
    evaluation_count = evaluation_count + 1,
    lease_owner = NULL,
    lease_expires_at = NULL,
    evaluated_at = now(),
    updated_at = now()
WHERE id = $1 AND status = 'evaluating' AND lease_owner = $4
"""

_RELEASE = """
UPDATE backlog SET status = 'annotated', lease_owner = NULL, lease_expires_at = NULL,
    updated_at = now()
WHERE id = $1 AND status = 'evaluating' AND lease_owner = $2
"""

_ANNOTATE = """
UPDATE backlog SET
    reference = $2,
    status = 'annotated',
    offline_scores = NULL,
    offline_details = NULL,
    annotated_at = now(),
    updated_at = now()
WHERE id = $1
"""


class BacklogSink:
    """The backlog as a Sink, plus the operations of ``backlog``/``offline`` commands.

    Construction has no side effects; `start` opens the pool (and migrates when
    ``settings.migrate_on_start``), `close` stops the stats task and the pool.
    """

    name = SINK

    def __init__(
        self,
        dsn: str,
        settings: Settings,
        exporter: Exporter | None = None,
        *,
        stats_interval: float = 30.0,
        connect_timeout: float = 5.0,
        command_timeout: float = 30.0,
        pool_size: int = 4,
        owner: str | None = None,
    ) -> None:
        self._dsn = dsn
        self._settings = settings
        self.exporter = exporter
        self._stats_interval = stats_interval
        self._connect_timeout = connect_timeout
        self._command_timeout = command_timeout
        self._pool_size = pool_size
        self.owner = owner or f"runner-{uuid.uuid4().hex[:12]}"
        self._redactor = (
            Redactor(settings.redaction_patterns) if settings.redact_pii else None
        )
        self._pool: asyncpg.Pool | None = None
        self._stats_task: asyncio.Task[None] | None = None

    # --- lifecycle

    async def start(self, *, check: bool = True) -> None:
        """Open the pool; with ``check``, fail now (SinkError) if Postgres is unreachable."""
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
        if self.exporter is not None and self._stats_interval > 0 and self._stats_task is None:
            self._stats_task = asyncio.create_task(self._refresh_stats(), name="backlog-stats")

    async def close(self) -> None:
        if self._stats_task is not None:
            self._stats_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stats_task
            self._stats_task = None
        pool, self._pool = self._pool, None
        if pool is not None:
            try:
                await asyncio.wait_for(pool.close(), timeout=10)
            except TimeoutError:
                pool.terminate()

    async def __aenter__(self) -> BacklogSink:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[asyncpg.Connection]:
        if self._pool is None:
            raise SinkError(SINK, "not started", retryable=False)
        try:
            async with self._pool.acquire(timeout=self._connect_timeout + 5) as conn:
                try:
                    yield conn
                except _RETRYABLE:
                    # never hand a connection that failed mid-operation back to the pool
                    conn.terminate()
                    raise
        except _RETRYABLE as exc:
            raise SinkError(SINK, f"postgres unreachable: {type(exc).__name__}") from exc
        except _PERMANENT as exc:
            detail = f"postgres refused the data {exc.sqlstate}: {type(exc).__name__}"
            raise SinkError(SINK, detail, retryable=False) from exc
        except asyncpg.PostgresError as exc:
            # schema not migrated, no privilege, read-only replica...: an operator fixes
            # it and the same write then succeeds, so the records must not be given up
            raise SinkError(SINK, f"postgres error {exc.sqlstate}: {type(exc).__name__}") from exc

    async def ping(self) -> None:
        """Raise SinkError unless Postgres answers (for /readyz)."""
        async with self._connection() as conn:
            await conn.fetchval("SELECT 1")

    async def migrate(self) -> list[str]:
        """Apply pending migrations; returns the versions applied now."""
        async with self._connection() as conn:
            return await apply_migrations(conn)

    async def applied_migrations(self) -> set[str]:
        """The versions recorded in ``schema_migrations`` (empty when it does not exist)."""
        async with self._connection() as conn:
            if await conn.fetchval("SELECT to_regclass('schema_migrations')") is None:
                return set()
            return {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}

    # --- Sink

    async def write(self, batch: Sequence[ScoredRecord]) -> None:
        """Queue the flagged and control records of ``batch``, in one transaction."""
        entries = [
            build_entry(record, reasons, self._redactor)
            for record in batch
            if (reasons := backlog_reasons(record, self._settings))
        ]
        if not entries:
            return
        created: list[Entry] = []
        try:
            async with self._connection() as conn, conn.transaction():
                for entry in entries:
                    row = await conn.fetchrow(
                        _ENQUEUE,
                        entry.id,
                        entry.reasons,
                        entry.question_hash,
                        entry.record,
                        entry.redactions,
                        entry.route,
                        entry.judge,
                        entry.inclusion_probability,
                        entry.online_scores,
                        entry.online_details,
                    )
                    if row is None:
                        continue  # a redelivery: this id is already in the backlog
                    if row["inserted"]:
                        created.append(entry)
                    elif row["id"] != entry.id:
                        await conn.execute(_LINK_REPEAT, entry.id, row["id"])
        except SinkError:
            if self.exporter is not None:
                self.exporter.backlog_write_errors.inc()
            raise
        if self.exporter is not None:
            for entry in created:
                for reason in entry.reasons:
                    self.exporter.backlog_enqueued.labels(reason=reason).inc()

    async def flush(self) -> None:
        """Writes are committed when `write` returns; nothing is buffered."""

    # --- stats

    async def stats(self) -> BacklogStats:
        async with self._connection() as conn:
            rows = await conn.fetch("SELECT status, count(*) AS n FROM backlog GROUP BY status")
            summary = await conn.fetchrow(
                "SELECT (SELECT count(*) FROM backlog_interactions) AS interactions,"
                " (SELECT coalesce(sum(seen_count), 0) FROM backlog) AS seen,"
                " (SELECT min(created_at) FROM backlog WHERE status = 'pending') AS oldest"
            )
        counts = dict.fromkeys(STATUSES, 0)
        counts.update({r["status"]: r["n"] for r in rows})
        if self.exporter is not None:
            for status, n in counts.items():
                self.exporter.backlog_size.labels(status=status).set(n)
        assert summary is not None
        return BacklogStats(
            counts=counts,
            interactions=summary["interactions"],
            seen_total=summary["seen"],
            oldest_pending=summary["oldest"],
        )

    async def _refresh_stats(self) -> None:
        while True:
            try:
                await self.stats()
            except SinkError as exc:
                log.warning("backlog stats refresh failed: %s", exc)
            await asyncio.sleep(self._stats_interval)

    # --- reading and annotating

    async def get(self, backlog_id: str) -> BacklogRow | None:
        async with self._connection() as conn:
            row = await conn.fetchrow("SELECT * FROM backlog WHERE id = $1", backlog_id)
        return None if row is None else BacklogRow.from_record(row)

    async def rows(self, status: str | None = None) -> AsyncIterator[BacklogRow]:
        """Every row (of ``status``), oldest first, streamed with a server-side cursor."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; one of {', '.join(STATUSES)}")
        async with self._connection() as conn, conn.transaction():
            cursor = conn.cursor(
                "SELECT * FROM backlog WHERE $1::text IS NULL OR status = $1"
                " ORDER BY created_at, id",
                status,
                prefetch=200,
            )
            async for row in cursor:
                yield BacklogRow.from_record(row)

    async def export(self, status: str | None, fmt: ExportFormat) -> AsyncIterator[str]:
        """Lines (with newlines) of rows of ``status`` in ``fmt``; CSV starts with a header."""
        if fmt not in EXPORT_FORMATS:
            raise ValueError(f"unknown format {fmt!r}; one of {', '.join(EXPORT_FORMATS)}")
        if fmt == "csv":
            yield csv_header()
        async for row in self.rows(status):
            yield export_line(row, fmt)

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
            if not item.id:
                report.rejected.append((item.line, None, "missing id"))
                continue
            reference = (item.reference or "").strip()
            if not reference:
                report.rejected.append((item.line, item.id, "missing or empty reference"))
                continue
            counts: Counter[str] = Counter()
            if self._redactor is not None:
                reference = self._redactor.redact_value(reference, counts)
            async with self._connection() as conn, conn.transaction():
                status = await conn.fetchval(
                    "SELECT status FROM backlog WHERE id = $1 FOR UPDATE", item.id
                )
                problem = _reference_problem(status, force)
                if problem is not None:
                    report.rejected.append((item.line, item.id, problem))
                    continue
                await conn.execute(_ANNOTATE, item.id, _clean(reference))
            report.changed.append((item.line, item.id, str(status)))
        return report

    async def discard(self, ids: Iterable[str]) -> int:
        """Mark rows discarded (not while being evaluated); returns how many changed."""
        async with self._connection() as conn:
            result: str = await conn.execute(
                "UPDATE backlog SET status = 'discarded', updated_at = now()"
                " WHERE id = ANY($1::text[]) AND status <> 'evaluating'",
                list(ids),
            )
        return int(result.split()[-1])

    # --- offline runner

    async def claim_annotated(
        self, limit: int, *, lease_seconds: float = 900.0
    ) -> list[BacklogRow]:
        """Lease up to ``limit`` annotated rows (or rows whose lease expired) to this owner."""
        async with self._connection() as conn:
            rows = await conn.fetch(_CLAIM, limit, self.owner, float(lease_seconds))
        return [BacklogRow.from_record(r) for r in rows]

    async def store_offline(
        self,
        backlog_id: str,
        scores: Mapping[str, float | None],
        details: Mapping[str, Any],
    ) -> bool:
        """Store offline scores and mark the row evaluated; False if our lease was lost."""
        async with self._connection() as conn:
            result: str = await conn.execute(
                _STORE_OFFLINE, backlog_id, _clean(scores), _clean(details), self.owner
            )
        return result.endswith(" 1")

    async def release(self, backlog_id: str) -> bool:
        """Give a claimed row back (status annotated), e.g. when it could not be scored."""
        async with self._connection() as conn:
            result: str = await conn.execute(_RELEASE, backlog_id, self.owner)
        return result.endswith(" 1")


def _reference_problem(status: str | None, force: bool) -> str | None:
    if status is None:
        return "unknown id"
    if status in (PENDING, ANNOTATED):
        return None
    if status == EVALUATED:
        return None if force else "already evaluated (use --force to replace its reference)"
    if status == EVALUATING:
        return "being evaluated by an offline runner; retry later"
    return f"status is {status}; only pending or annotated rows take a reference"
