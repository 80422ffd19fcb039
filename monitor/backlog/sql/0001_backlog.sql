-- The golden-set backlog: one row per distinct (normalised) question, keyed by
-- the id of the first interaction that asked it.
--   pending -> annotated (reference added) -> evaluating (leased by an offline
--   runner) -> evaluated; or discarded. An expired lease is claimable again.

CREATE TABLE backlog (
    id                     text PRIMARY KEY,
    status                 text NOT NULL DEFAULT 'pending'
                           CHECK (status IN ('pending', 'annotated', 'evaluating',
                                             'evaluated', 'discarded')),
    reasons                text[] NOT NULL,
    question_hash          text NOT NULL,
    seen_count             integer NOT NULL DEFAULT 1 CHECK (seen_count >= 1),
    -- the interaction after PII redaction: user_input, retrieved_contexts, response, ...
    record                 jsonb NOT NULL,
    -- what was redacted: [{"kind": "email", "count": 2}, ...] (never the values)
    redactions             jsonb NOT NULL DEFAULT '[]'::jsonb,
    route                  text,
    judge                  text,
    inclusion_probability  double precision,
    online_scores          jsonb NOT NULL DEFAULT '{}'::jsonb,
    online_details         jsonb NOT NULL DEFAULT '{}'::jsonb,
    reference              text,
    offline_scores         jsonb,
    offline_details        jsonb,
    lease_owner            text,
    lease_expires_at       timestamptz,
    evaluation_count       integer NOT NULL DEFAULT 0,
    created_at             timestamptz NOT NULL DEFAULT now(),
    updated_at             timestamptz NOT NULL DEFAULT now(),
    last_seen_at           timestamptz NOT NULL DEFAULT now(),
    annotated_at           timestamptz,
    evaluated_at           timestamptz
);

CREATE UNIQUE INDEX backlog_question_hash_key ON backlog (question_hash);
CREATE INDEX backlog_status_idx ON backlog (status, updated_at);

-- every interaction id ever queued, so a redelivery is recognised even when its
-- question was merged into another row (seen_count counts ids, not deliveries)
CREATE TABLE backlog_interactions (
    interaction_id  text PRIMARY KEY,
    backlog_id      text NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX backlog_interactions_backlog_id_idx ON backlog_interactions (backlog_id);
