"""The backlog as read back: statuses, rows, their answers and verdicts. Pure types.

See docs/review.md, "The backlog".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Literal

from monitor.flags import HALLUCINATION
from monitor.metrics.faithfulness import LOCAL_FLAGGED
from monitor.records import Context, Interaction

PENDING = "pending"
ANNOTATED = "annotated"
EVALUATING = "evaluating"
EVALUATED = "evaluated"
DISCARDED = "discarded"
STATUSES = (PENDING, ANNOTATED, EVALUATING, EVALUATED, DISCARDED)


@dataclass(frozen=True)
class Verdict:
    """A reviewer's latest verdict on one reason of one answer."""

    reason: str
    verdict: str
    reviewer: str
    note: str | None
    at: str

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class JudgeFlags:
    """Which judges flagged an answer a hallucination: the LLM judge, the local judge."""

    llm: bool = False
    local: bool = False

    @property
    def both(self) -> bool:
        return self.llm and self.local

    def describe(self) -> str:
        """``both judges``, ``the LLM judge``, ``the local judge`` or ``neither judge``."""
        if self.both:
            return "both judges"
        if self.llm or self.local:
            return "the LLM judge" if self.llm else "the local judge"
        return "neither judge"

    def as_json(self) -> dict[str, bool]:
        return {"llm": self.llm, "local": self.local, "both": self.both}


def judge_flags(
    judge: str | None, reasons: Sequence[str], details: Mapping[str, Any]
) -> JudgeFlags:
    """Which judges flagged an answer, from what the backlog stores of it (as
    `monitor.backlog.queries.LLM_FLAGGED` and ``LOCAL_FLAGGED`` read it in SQL): the judge
    that scored it flagged it when it carries the hallucination reason; on an LLM judge's
    answer, the local judge flagged it when its risk screen said so (``local_flagged`` in
    the faithfulness details; absent, e.g. the answer was not screened: not flagged)."""
    own = HALLUCINATION in reasons
    if judge == "local":
        return JudgeFlags(llm=False, local=own)
    faithfulness = details.get("faithfulness")
    screened = isinstance(faithfulness, Mapping) and faithfulness.get(LOCAL_FLAGGED) is True
    return JudgeFlags(llm=judge == "llm" and own, local=screened)


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
    #: the judge that scored it: its kind (``llm``, ``local``) and model (None: not recorded)
    judge: str | None = None
    judge_model: str | None = None

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
            judge=data.get("judge"),
            judge_model=data.get("judge_model"),
        )

    @property
    def response(self) -> str:
        return str(self.record.get("response", ""))

    @property
    def flagged_by(self) -> JudgeFlags:
        """Which judges flagged this answer a hallucination (`judge_flags`)."""
        return judge_flags(self.judge, self.reasons, self.online_details)

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
            "judge": self.judge,
            "judge_model": self.judge_model,
            "flagged_by": self.flagged_by.as_json(),
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


@dataclass(frozen=True)
class BacklogStats:
    counts: dict[str, int]
    interactions: int
    seen_total: int
    oldest_pending: datetime | None
    #: interactions per reason they were queued for (one can have several; interactions
    #: queued before migration 0004 are in none): what backlog_enqueued_total counts
    interactions_by_reason: dict[str, int] = field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(self.counts.values())


@dataclass(frozen=True)
class JudgeCount:
    """A judge that scored queued answers: its kind, its model (None: not recorded), and
    how many answers it scored."""

    kind: str | None
    model: str | None
    answers: int

    def describe(self) -> str:
        """``the local judge (builtin)``, ``the LLM judge (gpt-4o-mini)``, in words."""
        return describe_judge(self.kind, self.model)

    def as_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model, "answers": self.answers}


def describe_judge(kind: str | None, model: str | None) -> str:
    """A judge in words, from what the backlog stores of it."""
    if kind is None:
        return "more than one judge"
    name = {"llm": "the LLM judge", "local": "the local judge"}.get(kind, f"the {kind} judge")
    return f"{name} ({model})" if model else f"{name} (model not recorded)"


QueueOrder = Literal["risk", "newest", "seen"]
#: the queue's orders, the default first: ``risk`` puts the rows with an answer both judges
#: flagged first, then the rows whose answers the local judge thinks likeliest to hold an
#: unsupported claim (their highest ``hallucination_probability``; -1 for rows whose judge
#: gives none, last), then the newest
QUEUE_ORDERS: tuple[QueueOrder, ...] = ("risk", "newest", "seen")


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
    #: the highest ``hallucination_probability`` of the row's answers (-1: none given)
    risk: float = -1.0
    #: whether the LLM judge, the local judge, and both (on the same answer) flagged an
    #: answer of the row a hallucination (`judge_flags`)
    llm_flagged: bool = False
    local_flagged: bool = False
    both_flagged: bool = False

    def flagged_by(self) -> str:
        """Which judges flagged the row's answers, in a word or two: ``both`` (the same
        answer), ``LLM``, ``local``, ``LLM, local`` (each a different answer), or ``none``."""
        if self.both_flagged:
            return "both"
        named = [
            name for name, on in (("LLM", self.llm_flagged), ("local", self.local_flagged)) if on
        ]
        return ", ".join(named) or "none"

    def sort_key(self, order: QueueOrder) -> Any:
        if order == "risk":
            return (self.both_flagged, self.risk, self.created_at)
        return self.created_at if order == "newest" else self.seen_count
