"""The golden-set backlog in Postgres: the only asyncpg import (docs/design.md, "Contracts").

What is queued: every scored record with a flag reason (`monitor.flags`), plus a
control share (``settings.control_share``) chosen from a salted hash of the id,
so a redelivery makes the same choice and the choice is independent of the
sampler's own hash. Each record is PII-redacted (`monitor.redaction`) before it
is stored; what was redacted is kept as kind + count.

Idempotence: every interaction id ever queued is remembered in
``backlog_interactions``; a redelivered id changes nothing. A *new* id whose
normalised question (lower-case, punctuation stripped, whitespace collapsed,
SHA-256) is already in the backlog increments that row's ``seen_count`` and adds
its reasons instead of adding a row. Every distinct answer of a question is kept
as an *answer* of its row (``backlog_answers``: its own interaction id, redacted
record, scores, details and reasons); an interaction whose normalised answer the
row already holds is merged into that answer (its ``seen_count`` and ``weight``,
the sum of 1/pi, grow). Control answers are never merged with flagged ones, so
each answer belongs to one stratum of the calibration (`monitor.review.calibration`).
Reviewer verdicts (``backlog_verdicts``) apply per answer and reason; ``version``
on a row is bumped by every change a reviewer must not overwrite blindly (a new
answer or reason, a reference, a review, a discard). A batch is one transaction: stored whole or
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
from monitor.review.calibration import Calibration, Cell, estimate
from monitor.sinks import SinkError
from monitor.telemetry import Exporter

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
    "trace_id",
    "span_id",
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


def answer_key(response: str, control: bool) -> str:
    """The answer an interaction joins: its normalised text, and whether it is a control."""
    marker = "control:" if control else "flagged:"
    return hashlib.sha256((marker + normalise_question(response)).encode("utf-8")).hexdigest()


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
    #: the answer this interaction joins within its row (`answer_key`)
    answer_key: str = ""
    #: 1/pi, pi = the chance it was queued: the sample rate (times the control share)
    weight: float = 1.0
    trace_id: str | None = None
    span_id: str | None = None


def build_entry(
    record: ScoredRecord,
    reasons: Sequence[str],
    redactor: Redactor | None,
    *,
    control_share: float = 1.0,
) -> Entry:
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
    control = list(reasons) == [CONTROL]
    chance = record.inclusion_probability * (control_share if control else 1.0)
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
        answer_key=answer_key(stored["response"], control),
        weight=1.0 / max(chance, 1e-12),
        trace_id=interaction.trace_id,
        span_id=interaction.span_id,
    )


@dataclass(frozen=True)
class Verdict:
    """A reviewer's latest verdict on one reason of one answer."""

    reason: str
    verdict: str
    reviewer: str
    note: str | None
    at: str

    def as_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "verdict": self.verdict,
            "reviewer": self.reviewer,
            "note": self.note,
            "at": self.at,
        }


@dataclass(frozen=True)
class Answer:
    """One distinct answer of a backlog row (with the interactions merged into it)."""

    interaction_id: str
    reasons: list[str]
    record: dict[str, Any]
    online_scores: dict[str, float | None]
    online_details: dict[str, Any]
    seen_count: int
    weight: float
    verdicts: list[Verdict]

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Answer:
        return cls(
            interaction_id=data["interaction_id"],
            reasons=list(data["reasons"]),
            record=data["record"],
            online_scores=data["online_scores"],
            online_details=data["online_details"],
            seen_count=data["seen_count"],
            weight=data["weight"],
            verdicts=[Verdict(**v) for v in data.get("verdicts") or []],
        )

    @property
    def response(self) -> str:
        return str(self.record.get("response", ""))

    @property
    def contexts(self) -> list[dict[str, Any]]:
        return list(self.record.get("retrieved_contexts", []))

    def statements(self) -> list[dict[str, Any]]:
        """The faithfulness judge's statements ({"statement", "verdict", "reason"?}), if any."""
        faithfulness = self.online_details.get("faithfulness")
        found = faithfulness.get("statements") if isinstance(faithfulness, dict) else None
        return [s for s in found if isinstance(s, dict)] if isinstance(found, list) else []

    def as_json(self) -> dict[str, Any]:
        return {
            "interaction_id": self.interaction_id,
            "response": self.response,
            "retrieved_contexts": self.contexts,
            "reasons": self.reasons,
            "scores": self.online_scores,
            "details": self.online_details,
            "statements": self.statements(),
            "seen_count": self.seen_count,
            "verdicts": [v.as_json() for v in self.verdicts],
        }


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
    version: int = 1
    route: str | None = None
    review_note: str | None = None
    answers: list[Answer] = field(default_factory=list)
    trace_id: str | None = None
    span_id: str | None = None

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
            version=row["version"],
            route=row["route"],
            review_note=row["review_note"],
            answers=[Answer.from_json(a) for a in row.get("answers") or []],
            trace_id=row.get("trace_id"),
            span_id=row.get("span_id"),
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
            "id": row.id,
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
        "trace_id": row.trace_id,
        "span_id": row.span_id,
    }
    if fmt == "jsonl":
        fields["details"] = row.online_details
        fields["offline_details"] = row.offline_details
        fields["redactions"] = row.redactions
        fields["version"] = row.version
        fields["note"] = row.review_note
        fields["answers"] = [a.as_json() for a in row.answers]
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


VERDICTS = ("confirmed", "false_alarm", "unsure")


@dataclass(frozen=True)
class VerdictInput:
    """A verdict on ``reason`` of the answer ``interaction_id`` (None: the row's first answer)."""

    reason: str
    verdict: str
    interaction_id: str | None = None


@dataclass(frozen=True)
class ImportRow:
    """One line of an annotation file: an id and its reference, or why it could not be read."""

    line: int
    id: str | None = None
    reference: str | None = None
    error: str | None = None
    verdicts: tuple[VerdictInput, ...] = ()
    note: str | None = None
    #: a CSV row left blank (no reference, no verdicts): skipped and counted, not rejected
    blank: bool = False


@dataclass
class ImportReport:
    #: (line, id, previous status)
    changed: list[tuple[int, str, str]] = field(default_factory=list)
    #: (line, id or None, reason)
    rejected: list[tuple[int, str | None, str]] = field(default_factory=list)
    #: (line, id) of blank CSV rows
    skipped: list[tuple[int, str | None]] = field(default_factory=list)
    #: verdicts recorded
    verdicts: int = 0


class ReviewProblem(Exception):
    """A review that cannot be applied: ``kind`` is stale, conflict, invalid or not_found."""

    def __init__(self, kind: str, message: str, field_name: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.field = field_name


@dataclass(frozen=True)
class BacklogStats:
    counts: dict[str, int]
    interactions: int
    seen_total: int
    oldest_pending: datetime | None

    @property
    def rows(self) -> int:
        return sum(self.counts.values())


QueueOrder = Literal["newest", "seen"]
QUEUE_ORDERS: tuple[QueueOrder, ...] = ("newest", "seen")


@dataclass(frozen=True)
class QueueItem:
    """A row as the review queue lists it."""

    id: str
    status: str
    reasons: list[str]
    seen_count: int
    route: str | None
    created_at: datetime
    updated_at: datetime
    version: int
    question: str
    answers: int
    verdicts: int

    def sort_key(self, order: QueueOrder) -> Any:
        return self.created_at if order == "newest" else self.seen_count


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
    inclusion_probability, online_scores, online_details, trace_id, span_id
)
SELECT interaction_id, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12 FROM new_interaction
ON CONFLICT (question_hash) DO UPDATE SET
    seen_count = b.seen_count + 1,
    reasons = ARRAY(
        SELECT r FROM unnest(b.reasons || EXCLUDED.reasons) WITH ORDINALITY AS t(r, n)
        GROUP BY r ORDER BY min(n)
    ),
    version = b.version + CASE WHEN b.reasons @> EXCLUDED.reasons THEN 0 ELSE 1 END,
    last_seen_at = now(),
    updated_at = now()
RETURNING b.id, (xmax = 0) AS inserted
"""

_LINK = (
    "UPDATE backlog_interactions SET backlog_id = $2, answer_id = $3 WHERE interaction_id = $1"
)

# the interaction's answer: a new one, or merged into the row's answer with the same key
_ADD_ANSWER = """
INSERT INTO backlog_answers AS a (
    interaction_id, backlog_id, answer_key, reasons, record, online_scores, online_details,
    judge, inclusion_probability, weight, weight_squares
)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::float8, $10::float8 * $10::float8)
ON CONFLICT (backlog_id, answer_key) DO UPDATE SET
    seen_count = a.seen_count + 1,
    weight = a.weight + EXCLUDED.weight,
    weight_squares = a.weight_squares + EXCLUDED.weight_squares,
    reasons = ARRAY(
        SELECT r FROM unnest(a.reasons || EXCLUDED.reasons) WITH ORDINALITY AS t(r, n)
        GROUP BY r ORDER BY min(n)
    ),
    last_seen_at = now()
RETURNING (xmax = 0) AS inserted, a.interaction_id
"""

_BUMP = "UPDATE backlog SET version = version + 1, updated_at = now() WHERE id = $1"

# a row with its answers, each with its latest verdict per reason
_ROW_SELECT = """
SELECT b.*, coalesce((
    SELECT jsonb_agg(jsonb_build_object(
        'interaction_id', a.interaction_id, 'reasons', to_jsonb(a.reasons),
        'record', a.record, 'online_scores', a.online_scores,
        'online_details', a.online_details, 'seen_count', a.seen_count,
        'weight', a.weight,
        'verdicts', coalesce((
            SELECT jsonb_agg(jsonb_build_object(
                'reason', v.reason, 'verdict', v.verdict, 'reviewer', v.reviewer,
                'note', v.note, 'at', v.created_at) ORDER BY v.reason)
            FROM (
                SELECT DISTINCT ON (reason) * FROM backlog_verdicts
                WHERE interaction_id = a.interaction_id
                ORDER BY reason, created_at DESC, id DESC
            ) v
        ), '[]'::jsonb)
    ) ORDER BY a.created_at, a.interaction_id)
    FROM backlog_answers a WHERE a.backlog_id = b.id
), '[]'::jsonb) AS answers
FROM backlog b
"""

_QUEUE_SELECT = """
SELECT id, status, reasons, seen_count, route, created_at, updated_at, version,
    left(record->>'user_input', 300) AS question,
    (SELECT count(*) FROM backlog_answers a WHERE a.backlog_id = b.id) AS answers,
    (SELECT count(*) FROM backlog_verdicts v WHERE v.backlog_id = b.id) AS verdicts
FROM backlog b"""

_INSERT_VERDICT = """
INSERT INTO backlog_verdicts (backlog_id, interaction_id, reason, verdict, reviewer, note)
VALUES ($1, $2, $3, $4, $5, $6)
"""

_REVIEWED = """
UPDATE backlog SET
    version = version + 1,
    review_note = coalesce($2, review_note),
    reviewed_at = now(),
    reviewed_by = $3,
    updated_at = now()
WHERE id = $1
RETURNING version
"""

# per stratum cell: answers with the same reasons and the same latest verdicts (the
# verdicts are few: their latest per answer is found once, then joined to the answers)
_CALIBRATION_CELLS = """
WITH latest AS (
    SELECT DISTINCT ON (interaction_id, reason) interaction_id, reason, verdict
    FROM backlog_verdicts
    ORDER BY interaction_id, reason, created_at DESC, id DESC
), per_answer AS (
    SELECT interaction_id, jsonb_object_agg(reason, verdict) AS verdicts
    FROM latest GROUP BY interaction_id
)
SELECT a.reasons, p.verdicts, a.online_scores->>'faithfulness' IS NOT NULL AS scored,
       count(*) AS n, sum(a.weight) AS w, sum(a.weight_squares) AS wsq,
       sum(a.weight * a.weight) AS w2
FROM backlog_answers a LEFT JOIN per_answer p ON p.interaction_id = a.interaction_id
GROUP BY 1, 2, 3
"""

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
    version = version + 1,
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
        calibration_interval: float | None = None,
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
        self._calibration_interval = (
            settings.calibration_interval_seconds
            if calibration_interval is None
            else calibration_interval
        )
        self._calibration_task: asyncio.Task[None] | None = None

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
        if (
            self.exporter is not None
            and self._stats_interval > 0
            and self._calibration_interval > 0
            and self._calibration_task is None
        ):
            self._calibration_task = asyncio.create_task(
                self._refresh_calibration(), name="backlog-calibration"
            )

    async def close(self) -> None:
        for task in (self._stats_task, self._calibration_task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._stats_task = self._calibration_task = None
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
        share = self._settings.control_share
        entries = [
            build_entry(record, reasons, self._redactor, control_share=share)
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
                        entry.trace_id,
                        entry.span_id,
                    )
                    if row is None:
                        continue  # a redelivery: this id is already in the backlog
                    if row["inserted"]:
                        created.append(entry)
                    answer = await conn.fetchrow(
                        _ADD_ANSWER,
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
                    )
                    await conn.execute(_LINK, entry.id, row["id"], answer["interaction_id"])
                    if answer["inserted"] and not row["inserted"]:
                        await conn.execute(_BUMP, row["id"])
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

    async def refresh_calibration(self) -> Calibration:
        """Read the verdicts and set the exporter's calibration series."""
        calibration = await self.calibration()
        verdicts = await self.verdict_counts()
        if self.exporter is not None:
            c = calibration
            rate = (
                (c.calibrated_rate, c.lower or 0.0, c.upper or 0.0)
                if c.calibrated_rate is not None
                else None
            )
            self.exporter.calibration.update(
                c.flag_precision, c.control_hallucination_share, rate, verdicts
            )
        return calibration

    async def _refresh_calibration(self) -> None:
        while True:
            try:
                await self.refresh_calibration()
            except SinkError as exc:
                log.warning("backlog calibration refresh failed: %s", exc)
            await asyncio.sleep(self._calibration_interval)

    # --- reading and annotating

    async def get(self, backlog_id: str) -> BacklogRow | None:
        async with self._connection() as conn:
            row = await conn.fetchrow(_ROW_SELECT + " WHERE b.id = $1", backlog_id)
        return None if row is None else BacklogRow.from_record(row)

    async def rows(self, status: str | None = None) -> AsyncIterator[BacklogRow]:
        """Every row (of ``status``), oldest first, streamed with a server-side cursor."""
        if status is not None and status not in STATUSES:
            raise ValueError(f"unknown status {status!r}; one of {', '.join(STATUSES)}")
        async with self._connection() as conn, conn.transaction():
            cursor = conn.cursor(
                _ROW_SELECT + " WHERE $1::text IS NULL OR b.status = $1"
                " ORDER BY b.created_at, b.id",
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
            if item.blank:
                report.skipped.append((item.line, item.id))
                continue
            if not item.id:
                report.rejected.append((item.line, None, "missing id"))
                continue
            reference = self._redacted((item.reference or "").strip())
            if not reference and not item.verdicts:
                report.rejected.append((item.line, item.id, "missing or empty reference"))
                continue
            async with self._connection() as conn, conn.transaction():
                status = await conn.fetchval(
                    "SELECT status FROM backlog WHERE id = $1 FOR UPDATE", item.id
                )
                problem = _reference_problem(status, force) if reference else (
                    "unknown id" if status is None else None
                )
                if problem is None and item.verdicts:
                    try:
                        await self._record_verdicts(
                            conn, item.id, item.verdicts, "import", self._redacted(item.note)
                        )
                    except ReviewProblem as exc:
                        problem = str(exc)
                if problem is not None:
                    report.rejected.append((item.line, item.id, problem))
                    continue
                if reference:
                    await conn.execute(_ANNOTATE, item.id, reference)
            report.verdicts += len(item.verdicts)
            if reference:
                report.changed.append((item.line, item.id, str(status)))
        return report

    def _redacted(self, text: str | None) -> str | None:
        """``text`` as it may be stored: redacted (like everything else), NULs replaced."""
        if text is None:
            return None
        if self._redactor is not None:
            text = self._redactor.redact_value(text, Counter())
        return str(_clean(text))

    async def _record_verdicts(
        self,
        conn: asyncpg.Connection,
        backlog_id: str,
        verdicts: Sequence[VerdictInput],
        reviewer: str,
        note: str | None,
    ) -> int:
        """Insert ``verdicts`` on the row's answers and bump its version; returns the version.

        Raises ReviewProblem(invalid) naming the verdict when its answer or reason is not
        the row's (the caller's transaction is then rolled back or not committed).
        """
        await self._check_verdicts(conn, backlog_id, verdicts)
        await conn.executemany(
            _INSERT_VERDICT,
            [
                (
                    backlog_id,
                    v.interaction_id if v.interaction_id is not None else backlog_id,
                    v.reason,
                    v.verdict,
                    reviewer,
                    note,
                )
                for v in verdicts
            ],
        )
        version: int = await conn.fetchval(_REVIEWED, backlog_id, note, reviewer)
        return version

    @staticmethod
    async def _changed_verdicts(
        conn: asyncpg.Connection, backlog_id: str, verdicts: Sequence[VerdictInput]
    ) -> list[VerdictInput]:
        """``verdicts`` without those equal to the latest on their answer and reason."""
        if not verdicts:
            return []
        latest = {
            (r["interaction_id"], r["reason"]): r["verdict"]
            for r in await conn.fetch(
                "SELECT DISTINCT ON (interaction_id, reason) interaction_id, reason, verdict"
                " FROM backlog_verdicts WHERE backlog_id = $1"
                " ORDER BY interaction_id, reason, created_at DESC, id DESC",
                backlog_id,
            )
        }
        return [
            v
            for v in verdicts
            if latest.get((v.interaction_id or backlog_id, v.reason)) != v.verdict
        ]

    @staticmethod
    async def _check_verdicts(
        conn: asyncpg.Connection, backlog_id: str, verdicts: Sequence[VerdictInput]
    ) -> None:
        """ReviewProblem(invalid) naming the first verdict not on the row's answers and reasons."""
        if not verdicts:
            return
        answers = {
            r["interaction_id"]: list(r["reasons"])
            for r in await conn.fetch(
                "SELECT interaction_id, reasons FROM backlog_answers WHERE backlog_id = $1",
                backlog_id,
            )
        }
        for i, v in enumerate(verdicts):
            answer = v.interaction_id if v.interaction_id is not None else backlog_id
            if answer not in answers:
                raise ReviewProblem(
                    "invalid", f"verdicts[{i}]: {answer!r} is not an answer of this row",
                    f"verdicts[{i}].interaction_id",
                )
            if v.reason not in answers[answer]:
                raise ReviewProblem(
                    "invalid",
                    f"verdicts[{i}]: the answer was not flagged for {v.reason!r}"
                    f" (its reasons: {', '.join(answers[answer])})",
                    f"verdicts[{i}].reason",
                )
            if v.verdict not in VERDICTS:
                raise ReviewProblem(
                    "invalid", f"verdicts[{i}]: verdict must be one of {', '.join(VERDICTS)}",
                    f"verdicts[{i}].verdict",
                )

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
        reference = self._redacted(reference.strip() if reference is not None else None)
        note = self._redacted(note.strip() if note is not None else None) or None
        async with self._connection() as conn, conn.transaction():
            current = await conn.fetchrow(
                "SELECT status, version, reference, review_note FROM backlog"
                " WHERE id = $1 FOR UPDATE",
                backlog_id,
            )
            if current is None:
                raise ReviewProblem("not_found", "no such row")
            await self._check_verdicts(conn, backlog_id, verdicts)
            if current["version"] != version:
                raise ReviewProblem(
                    "stale",
                    f"the row changed since version {version}: it is at version"
                    f" {current['version']} now (another reviewer saved first)",
                    "version",
                )
            status = current["status"]
            if status == EVALUATING:
                raise ReviewProblem("conflict", "being evaluated by an offline runner; retry later")
            new_reference = bool(reference) and reference != current["reference"]
            if new_reference and status == DISCARDED:
                raise ReviewProblem(
                    "conflict", "the row is discarded; it takes no reference", "reference"
                )
            new_version: int = current["version"]
            # the form shows the latest verdicts checked: saving them again records nothing
            verdicts = await self._changed_verdicts(conn, backlog_id, verdicts)
            if verdicts or (note is not None and note != current["review_note"]):
                new_version = await self._record_verdicts(
                    conn, backlog_id, verdicts, reviewer, note
                )
            if new_reference:
                await conn.execute(_ANNOTATE, backlog_id, reference)
            if discard and status != DISCARDED:
                await conn.execute(
                    "UPDATE backlog SET status = 'discarded', updated_at = now() WHERE id = $1",
                    backlog_id,
                )
            if new_reference or discard:
                new_version = await conn.fetchval(
                    "UPDATE backlog SET version = $2 + 1, reviewed_at = now(), reviewed_by = $3"
                    " WHERE id = $1 RETURNING version",
                    backlog_id,
                    current["version"],
                    reviewer,
                )
        return new_version

    async def calibration_cells(self) -> list[dict[str, Any]]:
        """Answers grouped by reasons and latest verdicts, with weight sums (for calibration)."""
        async with self._connection() as conn:
            rows = await conn.fetch(_CALIBRATION_CELLS)
        return [
            {
                "reasons": list(r["reasons"]),
                "verdicts": dict(r["verdicts"] or {}),
                "faithfulness_scored": r["scored"],
                "n": r["n"],
                "weight": r["w"],
                "weight_squares": r["wsq"],
                "answer_weight_squares": r["w2"],
            }
            for r in rows
        ]

    async def queue(
        self,
        *,
        status: str | None = None,
        reason: str | None = None,
        route: str | None = None,
        order: QueueOrder = "newest",
        limit: int = 50,
        after: tuple[Any, str] | None = None,
    ) -> list[QueueItem]:
        """One page of the review queue, keyset-paged: rows after ``after`` (its sort key, id)."""
        if order not in QUEUE_ORDERS:
            raise ValueError(f"unknown order {order!r}")
        key = "created_at" if order == "newest" else "seen_count"
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
            args.extend(after)
            where.append(f"({key}, id) < (${len(args) - 1}, ${len(args)})")
        args.append(limit)
        # the text is built only from constant fragments and the order's column name
        sql = _QUEUE_SELECT + (" WHERE " + " AND ".join(where) if where else "")
        sql += f" ORDER BY {key} DESC, id DESC LIMIT ${len(args)}"
        async with self._connection() as conn:
            rows = await conn.fetch(sql, *args)
        return [QueueItem(**dict(r)) for r in rows]

    async def neighbours(
        self, backlog_id: str, *, status: str | None = None
    ) -> tuple[str | None, str | None]:
        """(newer, older) row ids next to ``backlog_id`` in the newest-first queue of ``status``."""
        async with self._connection() as conn:
            here = await conn.fetchrow("SELECT created_at FROM backlog WHERE id = $1", backlog_id)
            if here is None:
                return None, None
            newer = await conn.fetchval(
                "SELECT id FROM backlog WHERE ($3::text IS NULL OR status = $3)"
                " AND (created_at, id) > ($1, $2) ORDER BY created_at, id LIMIT 1",
                here["created_at"], backlog_id, status,
            )
            older = await conn.fetchval(
                "SELECT id FROM backlog WHERE ($3::text IS NULL OR status = $3)"
                " AND (created_at, id) < ($1, $2) ORDER BY created_at DESC, id DESC LIMIT 1",
                here["created_at"], backlog_id, status,
            )
        return newer, older

    async def status_counts(self) -> dict[str, int]:
        async with self._connection() as conn:
            rows = await conn.fetch("SELECT status, count(*) AS n FROM backlog GROUP BY status")
        counts = dict.fromkeys(STATUSES, 0)
        counts.update({r["status"]: r["n"] for r in rows})
        return counts

    async def calibration(self) -> Calibration:
        """The calibrated hallucination rate from every answer's latest verdicts."""
        cells = [Cell.from_json(c) for c in await self.calibration_cells()]
        return await asyncio.to_thread(estimate, cells)

    async def verdict_counts(self) -> dict[tuple[str, str], int]:
        """Every verdict ever recorded, by (reason, verdict): a count that only grows."""
        async with self._connection() as conn:
            rows = await conn.fetch(
                "SELECT reason, verdict, count(*) AS n FROM backlog_verdicts GROUP BY 1, 2"
            )
        return {(r["reason"], r["verdict"]): r["n"] for r in rows}

    async def discard(self, ids: Iterable[str]) -> int:
        """Mark rows discarded (not while being evaluated); returns how many changed."""
        async with self._connection() as conn:
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
