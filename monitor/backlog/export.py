"""Backlog rows as exported lines: JSON lines, CSV, or a Ragas evaluation dataset."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any, Literal

from monitor.backlog.rows import BacklogRow

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


async def export_rows(rows: AsyncIterable[BacklogRow], fmt: ExportFormat) -> AsyncIterator[str]:
    """``rows`` as lines (with newlines) in ``fmt``; CSV starts with a header."""
    if fmt not in EXPORT_FORMATS:
        raise ValueError(f"unknown format {fmt!r}; one of {', '.join(EXPORT_FORMATS)}")
    if fmt == "csv":
        yield csv_header()
    async for row in rows:
        yield export_line(row, fmt)
