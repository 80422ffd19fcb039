"""Annotation files read back: JSON lines or CSV, one checked `ImportRow` per line. Pure.

See docs/review.md, "The backlog" (``backlog import``).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

from monitor.backlog.calibration import VERDICTS
from monitor.backlog.reviews import ImportRow, VerdictInput


def read_annotations(path: Path, fmt: str = "auto") -> list[ImportRow]:
    """The rows of an annotation file; unreadable lines become rows with ``error`` set."""
    text = path.read_text(encoding="utf-8-sig", errors="strict")
    if fmt == "auto":
        fmt = "csv" if path.suffix.lower() == ".csv" else "jsonl"
    return list(parse_csv(text) if fmt == "csv" else parse_jsonl(text))


def parse_jsonl(text: str) -> Iterator[ImportRow]:
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            data = json.loads(line)
        except json.JSONDecodeError as exc:
            yield ImportRow(line=number, error=f"broken JSON: {exc.msg} at column {exc.colno}")
            continue
        if not isinstance(data, dict):
            yield ImportRow(line=number, error="not a JSON object")
            continue
        yield _row(
            number, data.get("id"), data.get("reference"), data.get("verdicts"), data.get("note")
        )


def parse_csv(text: str) -> Iterator[ImportRow]:
    reader = csv.reader(text.splitlines(keepends=True), strict=True)
    start = 1
    try:
        header = next(reader)
    except StopIteration:
        return
    except csv.Error as exc:
        yield ImportRow(line=1, error=f"broken CSV header: {exc}")
        return
    columns = [h.strip().lower() for h in header]
    if "id" not in columns or "reference" not in columns:
        yield ImportRow(line=1, error="CSV header must name the columns id and reference")
        return
    id_at, ref_at = columns.index("id"), columns.index("reference")
    verdicts_at = columns.index("verdicts") if "verdicts" in columns else None
    note_at = columns.index("note") if "note" in columns else None
    start = reader.line_num + 1
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            yield ImportRow(line=start, error=f"broken CSV row: {exc}")
            start = reader.line_num + 1
            continue
        line, start = start, reader.line_num + 1
        if not any(f.strip() for f in fields):
            continue
        if len(fields) != len(columns):
            yield ImportRow(
                line=line, error=f"broken CSV row: {len(fields)} fields, header has {len(columns)}"
            )
            continue
        verdicts_text = fields[verdicts_at].strip() if verdicts_at is not None else ""
        if not fields[ref_at].strip() and not verdicts_text:
            yield ImportRow(line=line, id=fields[id_at].strip() or None, blank=True)
            continue
        verdicts: object = None
        if verdicts_text:
            try:
                verdicts = json.loads(verdicts_text)
            except json.JSONDecodeError as exc:
                problem = f"verdicts: broken JSON: {exc.msg}"
                yield ImportRow(line=line, id=fields[id_at], error=problem)
                continue
        note = fields[note_at] if note_at is not None and fields[note_at].strip() else None
        yield _row(line, fields[id_at], fields[ref_at] or None, verdicts, note)


def _row(
    line: int, rid: object, reference: object, verdicts: object = None, note: object = None
) -> ImportRow:
    if not isinstance(rid, str) or not rid.strip():
        return ImportRow(line=line, error="missing id (a non-empty string)")
    if reference is not None and not isinstance(reference, str):
        return ImportRow(line=line, id=rid, error="reference must be a string")
    if note is not None and not isinstance(note, str):
        return ImportRow(line=line, id=rid, error="note must be a string")
    parsed: list[VerdictInput] = []
    if verdicts is not None:
        if not isinstance(verdicts, list):
            return ImportRow(line=line, id=rid, error="verdicts must be a list")
        for i, item in enumerate(verdicts):
            problem = verdict_problem(item)
            if problem is not None:
                return ImportRow(line=line, id=rid, error=f"verdicts[{i}]: {problem}")
            parsed.append(
                VerdictInput(
                    reason=item["reason"],
                    verdict=item["verdict"],
                    interaction_id=item.get("interaction_id"),
                )
            )
    return ImportRow(line=line, id=rid, reference=reference, verdicts=tuple(parsed), note=note)


def verdict_problem(item: object) -> str | None:
    """Why ``item`` is not a verdict object (None: it is one)."""
    if not isinstance(item, dict):
        return "not an object"
    for key in ("reason", "verdict"):
        if not isinstance(item.get(key), str) or not item[key]:
            return f"{key} must be a non-empty string"
    if item["verdict"] not in VERDICTS:
        return f"verdict must be one of {', '.join(VERDICTS)}"
    answer = item.get("interaction_id")
    if answer is not None and not isinstance(answer, str):
        return "interaction_id must be a string"
    return None
