-- What the sidecar scored, in total, flagged or not: the denominator of the hallucination
-- rate, so the raw and the calibrated rate are over the same traffic as the sidecar's
-- scored_weight_total. One row, added to by the backlog sink in each batch's transaction.
CREATE TABLE backlog_traffic (
    id boolean PRIMARY KEY DEFAULT true CHECK (id),
    -- records with a faithfulness score, and those below the faithfulness threshold
    scored bigint NOT NULL DEFAULT 0,
    hallucinations bigint NOT NULL DEFAULT 0,
    -- the same, each record weighted 1/p (p: its inclusion probability)
    scored_weight double precision NOT NULL DEFAULT 0,
    hallucination_weight double precision NOT NULL DEFAULT 0,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The reasons each interaction was queued for (an answer's and a row's reasons are the
-- union over the interactions merged into them): counted per interaction, they are what
-- rag_monitor_backlog_enqueued_total{reason} counts. NULL for interactions queued before.
ALTER TABLE backlog_interactions ADD COLUMN reasons text[];
