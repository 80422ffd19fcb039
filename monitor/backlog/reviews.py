"""A reviewer's writes to the backlog: verdicts, references and discards, checked and applied.

See docs/review.md, "The backlog".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from monitor.backlog import queries
from monitor.backlog.calibration import VERDICTS
from monitor.backlog.queries import Connection
from monitor.backlog.rows import ANNOTATED, DISCARDED, EVALUATED, EVALUATING, PENDING


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


async def record_verdicts(
    conn: Connection,
    backlog_id: str,
    verdicts: Sequence[VerdictInput],
    reviewer: str,
    note: str | None,
) -> int:
    """Insert ``verdicts`` on the row's answers and bump its version; returns the version.

    Raises ReviewProblem(invalid) naming the verdict when its answer or reason is not
    the row's (the caller's transaction is then rolled back or not committed).
    """
    await check_verdicts(conn, backlog_id, verdicts)
    await conn.executemany(
        queries.INSERT_VERDICT,
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
    version: int = await conn.fetchval(queries.REVIEWED, backlog_id, note, reviewer)
    return version


async def changed_verdicts(
    conn: Connection, backlog_id: str, verdicts: Sequence[VerdictInput]
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
        v for v in verdicts if latest.get((v.interaction_id or backlog_id, v.reason)) != v.verdict
    ]


async def check_verdicts(
    conn: Connection, backlog_id: str, verdicts: Sequence[VerdictInput]
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
                "invalid",
                f"verdicts[{i}]: {answer!r} is not an answer of this row",
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
                "invalid",
                f"verdicts[{i}]: verdict must be one of {', '.join(VERDICTS)}",
                f"verdicts[{i}].verdict",
            )


async def apply_review(
    conn: Connection,
    backlog_id: str,
    *,
    version: int,
    reviewer: str,
    reference: str | None,
    verdicts: Sequence[VerdictInput],
    note: str | None,
    discard: bool,
) -> int:
    """One reviewer's save (see `monitor.backlog.store.BacklogStore.review`); the new version."""
    current = await conn.fetchrow(
        "SELECT status, version, reference, review_note FROM backlog WHERE id = $1 FOR UPDATE",
        backlog_id,
    )
    if current is None:
        raise ReviewProblem("not_found", "no such row")
    await check_verdicts(conn, backlog_id, verdicts)
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
        raise ReviewProblem("conflict", "the row is discarded; it takes no reference", "reference")
    new_version: int = current["version"]
    # the form shows the latest verdicts checked: saving them again records nothing
    verdicts = await changed_verdicts(conn, backlog_id, verdicts)
    if verdicts or (note is not None and note != current["review_note"]):
        new_version = await record_verdicts(conn, backlog_id, verdicts, reviewer, note)
    if new_reference:
        await conn.execute(queries.ANNOTATE, backlog_id, reference)
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


async def import_annotation(
    conn: Connection,
    backlog_id: str,
    reference: str | None,
    verdicts: Sequence[VerdictInput],
    note: str | None,
    *,
    force: bool,
) -> tuple[str | None, str | None]:
    """One annotation line: (why it is rejected, None when applied; the row's status before)."""
    status = await conn.fetchval("SELECT status FROM backlog WHERE id = $1 FOR UPDATE", backlog_id)
    problem = (
        reference_problem(status, force)
        if reference
        else ("unknown id" if status is None else None)
    )
    if problem is None and verdicts:
        try:
            await record_verdicts(conn, backlog_id, verdicts, "import", note)
        except ReviewProblem as exc:
            problem = str(exc)
    if problem is None and reference:
        await conn.execute(queries.ANNOTATE, backlog_id, reference)
    return problem, status


def reference_problem(status: str | None, force: bool) -> str | None:
    """Why a row of ``status`` takes no reference now (None: it does)."""
    if status is None:
        return "unknown id"
    if status in (PENDING, ANNOTATED):
        return None
    if status == EVALUATED:
        return None if force else "already evaluated (use --force to replace its reference)"
    if status == EVALUATING:
        return "being evaluated by an offline runner; retry later"
    return f"status is {status}; only pending or annotated rows take a reference"
