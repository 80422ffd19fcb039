"""What the review app accepts: queue filters, page cursors, review bodies and forms.

Each parser checks its input field by field and raises `Invalid` naming the
first bad field (the API answers 422 ``{"error", "field"}``, a page shows it).
Cursors are opaque to clients: the sort key and id of the last row of a page,
as URL-safe base64 JSON (keyset pagination over `BacklogStore.queue`). Pure.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from monitor.backlog.calibration import VERDICTS
from monitor.backlog.reviews import VerdictInput
from monitor.backlog.rows import QUEUE_ORDERS, STATUSES, QueueOrder

MAX_LIMIT = 200
DEFAULT_LIMIT = 50
MAX_TEXT = 20_000
_REASON = re.compile(r"[a-z_]{1,40}")


# --- cursors


def encode_cursor(key: Any, row_id: str) -> str:
    def plain(part: Any) -> Any:
        return part.isoformat() if isinstance(part, datetime) else part

    value = [plain(k) for k in key] if isinstance(key, tuple) else plain(key)
    raw = json.dumps([value, row_id], separators=(",", ":")).encode("utf-8")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str, order: QueueOrder) -> tuple[Any, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key, row_id = json.loads(raw)
        if not isinstance(row_id, str):
            raise ValueError("id")
        if order == "newest":
            return datetime.fromisoformat(key), row_id
        if order == "risk":
            both, risk, created = key
            if not isinstance(both, bool):
                raise ValueError("key")
            if isinstance(risk, bool) or not isinstance(risk, int | float):
                raise ValueError("key")
            return (both, float(risk), datetime.fromisoformat(created)), row_id
        if not isinstance(key, int):
            raise ValueError("key")
        return key, row_id
    except (ValueError, TypeError, binascii.Error, json.JSONDecodeError) as exc:
        raise Invalid("cursor", "not a cursor this API returned") from exc


# --- input


class Invalid(Exception):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class ReviewInput:
    version: int
    reference: str | None
    verdicts: tuple[VerdictInput, ...]
    note: str | None
    discard: bool


def _text(data: Mapping[str, Any], name: str) -> str | None:
    value = data.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(name, f"{name} must be a string")
    if len(value) > MAX_TEXT:
        raise Invalid(name, f"{name} is longer than {MAX_TEXT} characters")
    return value


def parse_review(data: object) -> ReviewInput:
    """The JSON body of ``POST /api/rows/{id}/review``; Invalid names the bad field."""
    if not isinstance(data, dict):
        raise Invalid("body", "the body must be a JSON object")
    unknown = set(data) - {"version", "reference", "verdicts", "note", "discard"}
    if unknown:
        raise Invalid(sorted(unknown)[0], f"unknown field {sorted(unknown)[0]!r}")
    version = data.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise Invalid("version", "version must be the row's version (a positive integer)")
    discard = data.get("discard", False)
    if not isinstance(discard, bool):
        raise Invalid("discard", "discard must be true or false")
    raw = data.get("verdicts", [])
    if not isinstance(raw, list):
        raise Invalid("verdicts", "verdicts must be a list")
    verdicts: list[VerdictInput] = []
    for i, item in enumerate(raw):
        if not isinstance(item, dict):
            raise Invalid(f"verdicts[{i}]", "a verdict is an object")
        answer = item.get("interaction_id")
        if not isinstance(answer, str) or not answer:
            raise Invalid(f"verdicts[{i}].interaction_id", "interaction_id must be a string")
        reason = item.get("reason")
        if not isinstance(reason, str) or not _REASON.fullmatch(reason):
            raise Invalid(f"verdicts[{i}].reason", "reason must be a flag reason")
        verdict = item.get("verdict")
        if verdict not in VERDICTS:
            raise Invalid(f"verdicts[{i}].verdict", f"verdict must be one of {', '.join(VERDICTS)}")
        verdicts.append(VerdictInput(reason=reason, verdict=verdict, interaction_id=answer))
    return ReviewInput(
        version=version,
        reference=_text(data, "reference"),
        verdicts=tuple(verdicts),
        note=_text(data, "note"),
        discard=discard,
    )


def parse_form(form: Mapping[str, str]) -> tuple[ReviewInput, dict[tuple[str, str], str]]:
    """The row page's form as a review (and the verdicts chosen, to redisplay on errors)."""
    try:
        version = int(form.get("version", ""))
    except ValueError as exc:
        raise Invalid("version", "version must be an integer") from exc
    answers = {
        key.removeprefix("answer-"): value
        for key, value in form.items()
        if key.startswith("answer-")
    }
    chosen: dict[tuple[str, str], str] = {}
    verdicts: list[dict[str, str]] = []
    for key, value in form.items():
        match = re.fullmatch(r"verdict-(\d+)-([a-z_]+)", key)
        if match is None or not value:
            continue
        answer = answers.get(match.group(1))
        if answer is None:
            raise Invalid(key, "a verdict for an answer the form did not show")
        chosen[(answer, match.group(2))] = value
        verdicts.append({"interaction_id": answer, "reason": match.group(2), "verdict": value})
    data: dict[str, Any] = {
        "version": version,
        "reference": form.get("reference"),
        "note": form.get("note"),
        "verdicts": verdicts,
        "discard": form.get("action") == "discard",
    }
    return parse_review(data), chosen


def parse_filters(
    q: Mapping[str, str],
) -> tuple[str | None, str | None, str | None, QueueOrder]:
    """The queue's filters (status, reason, route) and order from a query string."""
    status = q.get("status") or None
    if status is not None and status not in STATUSES:
        raise Invalid("status", f"status must be one of {', '.join(STATUSES)}")
    reason = q.get("reason") or None
    if reason is not None and not _REASON.fullmatch(reason):
        raise Invalid("reason", "reason must be a flag reason")
    order = q.get("order") or QUEUE_ORDERS[0]
    if order not in QUEUE_ORDERS:
        raise Invalid("order", f"order must be one of {', '.join(QUEUE_ORDERS)}")
    route = q.get("route") or None
    return status, reason, route, order


def parse_limit(q: Mapping[str, str]) -> int:
    """The ``limit`` of ``GET /api/rows``: 1 to MAX_LIMIT, DEFAULT_LIMIT when absent."""
    try:
        limit = int(q.get("limit", DEFAULT_LIMIT))
    except ValueError as exc:
        raise Invalid("limit", "limit must be an integer") from exc
    if not 1 <= limit <= MAX_LIMIT:
        raise Invalid("limit", f"limit must be between 1 and {MAX_LIMIT}")
    return limit
