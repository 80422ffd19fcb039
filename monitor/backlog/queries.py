"""The backlog's SQL statements, and the connection they run on.

Every statement is parameterised (``$n``); no value is ever put into the text.
The tables are created by the migrations in ``sql/`` (`monitor.backlog.migrations`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol


class Connection(Protocol):
    """What the backlog's transactions use of a connection (an asyncpg one, from the store)."""

    async def execute(self, query: str, *args: Any) -> str: ...

    async def executemany(self, command: str, args: Iterable[Sequence[Any]]) -> None: ...

    async def fetch(self, query: str, *args: Any) -> list[Any]: ...

    async def fetchrow(self, query: str, *args: Any) -> Any: ...

    async def fetchval(self, query: str, *args: Any) -> Any: ...

    def transaction(self) -> AbstractAsyncContextManager[Any]: ...


ENQUEUE = """
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

# a pending row holds the record of the lowest interaction id that asked its question, not
# of whichever arrived first: the offline metrics read its contexts, so the same traffic
# gives the same figures in any delivery order (byte order: the same under any collation)
KEEP_LOWEST = """
UPDATE backlog SET
    record = $2, redactions = $3, route = $4, judge = $5, inclusion_probability = $6,
    online_scores = $7, online_details = $8, trace_id = $9, span_id = $10
WHERE id = $1 AND status = 'pending' AND record->>'id' COLLATE "C" > $11 COLLATE "C"
"""

LINK = """
UPDATE backlog_interactions SET backlog_id = $2, answer_id = $3, reasons = $4
WHERE interaction_id = $1
"""

#: interactions per reason they were queued for (what backlog_enqueued_total counts)
INTERACTIONS_BY_REASON = """
SELECT r AS reason, count(*) AS n FROM backlog_interactions, unnest(reasons) AS r GROUP BY r
"""

# the interaction's answer: a new one, or merged into the row's answer with the same key
ADD_ANSWER = """
INSERT INTO backlog_answers AS a (
    interaction_id, backlog_id, answer_key, reasons, record, online_scores, online_details,
    judge, inclusion_probability, weight, weight_squares, judge_model
)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10::float8, $10::float8 * $10::float8, $11)
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

BUMP = "UPDATE backlog SET version = version + 1, updated_at = now() WHERE id = $1"

# a row with its answers, each with its latest verdict per reason
ROW_SELECT = """
SELECT b.*, coalesce((
    SELECT jsonb_agg(jsonb_build_object(
        'interaction_id', a.interaction_id, 'reasons', to_jsonb(a.reasons),
        'record', a.record, 'online_scores', a.online_scores,
        'online_details', a.online_details, 'seen_count', a.seen_count,
        'weight', a.weight, 'judge', a.judge, 'judge_model', a.judge_model,
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

# Whether each judge flagged an answer ``a`` as a hallucination. The LLM judge: its answers
# with the hallucination reason. The local judge: its own answers with that reason, and on an
# LLM judge's answer what its risk screen said beside the verdict (the faithfulness details'
# local_flagged, `monitor.pipeline.local_probability`; absent, e.g. not screened: not flagged).
# `monitor.backlog.rows.judge_flags` reads an answer the same way.
LLM_FLAGGED = "(a.judge = 'llm' AND 'hallucination' = ANY(a.reasons))"
LOCAL_FLAGGED = """(CASE WHEN a.judge = 'local' THEN 'hallucination' = ANY(a.reasons)
    ELSE coalesce(a.online_details->'faithfulness'->'local_flagged' = 'true'::jsonb, false) END)"""

# the queue's rows with their sort keys, as a table the filters and the keyset read; the
# row's answers are read once (one aggregate per row): how many, the highest probability,
# and which judges flagged one of them (both_flagged: both the same answer)
QUEUE_SELECT = f"""
SELECT * FROM (SELECT id, status, b.reasons, b.seen_count, route, b.created_at, updated_at,
    version, left(b.record->>'user_input', 300) AS question, s.answers,
    (SELECT count(*) FROM backlog_verdicts v WHERE v.backlog_id = b.id) AS verdicts,
    coalesce(s.risk, -1) AS risk, coalesce(s.llm_flagged, false) AS llm_flagged,
    coalesce(s.local_flagged, false) AS local_flagged,
    coalesce(s.both_flagged, false) AS both_flagged
FROM backlog b CROSS JOIN LATERAL (
    SELECT count(*) AS answers,
        max((a.online_details->'faithfulness'->>'hallucination_probability')
            ::double precision) AS risk,
        bool_or({LLM_FLAGGED}) AS llm_flagged, bool_or({LOCAL_FLAGGED}) AS local_flagged,
        bool_or({LLM_FLAGGED} AND {LOCAL_FLAGGED}) AS both_flagged
    FROM backlog_answers a WHERE a.backlog_id = b.id
) s) q"""  # noqa: S608 - built only from the constant fragments above, no value

INSERT_VERDICT = """
INSERT INTO backlog_verdicts (backlog_id, interaction_id, reason, verdict, reviewer, note)
VALUES ($1, $2, $3, $4, $5, $6)
"""

REVIEWED = """
UPDATE backlog SET
    version = version + 1,
    review_note = coalesce($2, review_note),
    reviewed_at = now(),
    reviewed_by = $3,
    updated_at = now()
WHERE id = $1
RETURNING version
"""

# per stratum cell: answers with the same reasons, the same latest verdicts and the same
# judges' flags (the verdicts are few: their latest per answer is found once, then joined
# to the answers)
CALIBRATION_CELLS = f"""
WITH latest AS (
    SELECT DISTINCT ON (interaction_id, reason) interaction_id, reason, verdict
    FROM backlog_verdicts
    ORDER BY interaction_id, reason, created_at DESC, id DESC
), per_answer AS (
    SELECT interaction_id, jsonb_object_agg(reason, verdict) AS verdicts
    FROM latest GROUP BY interaction_id
)
SELECT a.reasons, p.verdicts, a.online_scores->>'faithfulness' IS NOT NULL AS scored,
       {LLM_FLAGGED} AS llm_flagged, {LOCAL_FLAGGED} AS local_flagged,
       count(*) AS n, sum(a.weight) AS w, sum(a.weight_squares) AS wsq,
       sum(a.weight * a.weight) AS w2
FROM backlog_answers a LEFT JOIN per_answer p ON p.interaction_id = a.interaction_id
GROUP BY 1, 2, 3, 4, 5
"""  # noqa: S608 - built only from the constant fragments above, no value

CLAIM = """
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

STORE_OFFLINE = """
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

RELEASE = """
UPDATE backlog SET status = 'annotated', lease_owner = NULL, lease_expires_at = NULL,
    updated_at = now()
WHERE id = $1 AND status = 'evaluating' AND lease_owner = $2
"""

ANNOTATE = """
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

TRAFFIC_ADD = """
INSERT INTO backlog_traffic AS t (id, scored, hallucinations, scored_weight, hallucination_weight)
VALUES (true, $1, $2, $3, $4)
ON CONFLICT (id) DO UPDATE SET
    scored = t.scored + EXCLUDED.scored,
    hallucinations = t.hallucinations + EXCLUDED.hallucinations,
    scored_weight = t.scored_weight + EXCLUDED.scored_weight,
    hallucination_weight = t.hallucination_weight + EXCLUDED.hallucination_weight,
    updated_at = now()
"""

TRAFFIC = "SELECT scored, hallucinations, scored_weight, hallucination_weight FROM backlog_traffic"

#: the judges that scored the queued answers: kind, model (NULL: not recorded), answers
JUDGES = """
SELECT judge, judge_model, count(*) AS answers FROM backlog_answers
GROUP BY 1, 2 ORDER BY 3 DESC, 1, 2
"""

VERDICT_COUNTS = "SELECT reason, verdict, count(*) AS n FROM backlog_verdicts GROUP BY 1, 2"
