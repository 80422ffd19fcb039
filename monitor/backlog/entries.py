"""What goes into the backlog: which scored records, their hashes, the redacted entry. Pure.

See docs/review.md, "The backlog".
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from monitor.config import Settings
from monitor.flags import CONTROL, flag_reasons
from monitor.records import ScoredRecord
from monitor.redaction import Redactor, summarize


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


def clean(value: Any) -> Any:
    """JSON-safe for Postgres: NaN/inf → null, NUL characters (rejected by text/jsonb) → U+FFFD."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd")
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {clean(str(k)): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
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
    #: the kind of judge that scored it (None: its metrics were scored by more than one)
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
    #: that judge's model, as the judge reports it (None: more than one, or not recorded)
    judge_model: str | None = None

    def row_values(self) -> tuple[Any, ...]:
        """The row's columns from ``record`` to ``span_id``, in their order: what
        `queries.ENQUEUE` ($4-$12) and `queries.KEEP_LOWEST` ($2-$10) write."""
        return (
            self.record,
            self.redactions,
            self.route,
            self.judge,
            self.inclusion_probability,
            self.online_scores,
            self.online_details,
            self.trace_id,
            self.span_id,
        )


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
        return clean(value if redactor is None else redactor.redact_value(value, counts))

    stored: dict[str, Any] = {
        "id": clean(interaction.id),
        "user_input": red(interaction.user_input),
        "retrieved_contexts": [
            {"text": red(c.text), "id": clean(c.id), "score": clean(c.score)}
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
    models = {r.judge_model for r in record.results.values()}
    control = list(reasons) == [CONTROL]
    chance = record.inclusion_probability * (control_share if control else 1.0)
    return Entry(
        id=clean(interaction.id),
        reasons=[clean(r) for r in reasons],
        question_hash=question_hash(stored["user_input"]),
        record=stored,
        redactions=[r.as_json() for r in summarize(counts, redactor.kinds if redactor else ())],
        route=clean(interaction.route),
        judge=judges.pop() if len(judges) == 1 else None,
        inclusion_probability=record.inclusion_probability,
        online_scores={name: clean(r.json_score()) for name, r in record.results.items()},
        online_details=details,
        answer_key=answer_key(stored["response"], control),
        weight=1.0 / max(chance, 1e-12),
        trace_id=interaction.trace_id,
        span_id=interaction.span_id,
        judge_model=clean(models.pop()) if len(models) == 1 else None,
    )
