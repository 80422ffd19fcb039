-- Review: every distinct flagged answer of a question, reviewer verdicts per
-- answer and reason, and a version on backlog rows for optimistic locking.

-- bumped by every change a reviewer should not overwrite blindly: a new answer
-- or reason, a reference, a review, a discard
ALTER TABLE backlog ADD COLUMN version integer NOT NULL DEFAULT 1;
ALTER TABLE backlog ADD COLUMN review_note text;
ALTER TABLE backlog ADD COLUMN reviewed_at timestamptz;
ALTER TABLE backlog ADD COLUMN reviewed_by text;

-- One row per distinct answer of a backlog row, keyed by the first interaction
-- that gave it. Interactions whose normalised answer (and control-ness) matches
-- are merged into it: seen_count counts them, weight sums their 1/pi (pi = the
-- chance the interaction was queued at all: the sample rate, times the control
-- share for control answers), reasons is the union of their reasons.
CREATE TABLE backlog_answers (
    interaction_id         text PRIMARY KEY,
    backlog_id             text NOT NULL REFERENCES backlog (id),
    answer_key             text NOT NULL,
    reasons                text[] NOT NULL,
    -- the answer's own interaction after PII redaction (response, contexts, ...)
    record                 jsonb NOT NULL,
    online_scores          jsonb NOT NULL DEFAULT '{}'::jsonb,
    online_details         jsonb NOT NULL DEFAULT '{}'::jsonb,
    judge                  text,
    inclusion_probability  double precision,
    weight                 double precision NOT NULL CHECK (weight > 0),
    -- sum of 1/pi^2: the variance of a weighted total needs it (1/pi^2 - 1/pi per interaction)
    weight_squares         double precision NOT NULL CHECK (weight_squares > 0),
    seen_count             integer NOT NULL DEFAULT 1 CHECK (seen_count >= 1),
    created_at             timestamptz NOT NULL DEFAULT now(),
    last_seen_at           timestamptz NOT NULL DEFAULT now(),
    UNIQUE (backlog_id, answer_key)
);

-- rows queued before this migration kept one answer: it becomes their only answer
-- (under a key no new answer can match, since the old row merged every answer)
INSERT INTO backlog_answers (
    interaction_id, backlog_id, answer_key, reasons, record, online_scores,
    online_details, judge, inclusion_probability, weight, weight_squares, seen_count,
    created_at, last_seen_at
)
SELECT id, id, 'legacy:' || id, reasons, record, online_scores, online_details, judge,
       inclusion_probability,
       seen_count / greatest(coalesce(inclusion_probability, 1.0), 1e-9),
       seen_count / greatest(coalesce(inclusion_probability, 1.0), 1e-9) ^ 2,
       seen_count, created_at, last_seen_at
FROM backlog;

-- which answer each interaction was merged into (NULL for rows queued before this
-- migration: their interactions all belong to the row's one legacy answer)
ALTER TABLE backlog_interactions ADD COLUMN answer_id text;
UPDATE backlog_interactions SET answer_id = backlog_id;

-- Verdicts, append-only: a later verdict on the same (answer, reason) supersedes
-- an earlier one; the history stays (verdicts per day, who changed what).
CREATE TABLE backlog_verdicts (
    id              bigserial PRIMARY KEY,
    backlog_id      text NOT NULL REFERENCES backlog (id),
    interaction_id  text NOT NULL REFERENCES backlog_answers (interaction_id),
    reason          text NOT NULL,
    verdict         text NOT NULL CHECK (verdict IN ('confirmed', 'false_alarm', 'unsure')),
    reviewer        text NOT NULL,
    note            text,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX backlog_verdicts_latest_idx
    ON backlog_verdicts (interaction_id, reason, created_at DESC, id DESC);
CREATE INDEX backlog_verdicts_backlog_id_idx ON backlog_verdicts (backlog_id);

-- the queue pages: newest or most-seen first, all rows or one status, keyset-paged
CREATE INDEX backlog_created_idx ON backlog (created_at DESC, id DESC);
CREATE INDEX backlog_status_created_idx ON backlog (status, created_at DESC, id DESC);
CREATE INDEX backlog_seen_idx ON backlog (seen_count DESC, id DESC);
CREATE INDEX backlog_status_seen_idx ON backlog (status, seen_count DESC, id DESC);
CREATE INDEX backlog_reasons_idx ON backlog USING gin (reasons);
CREATE INDEX backlog_route_idx ON backlog (route);
