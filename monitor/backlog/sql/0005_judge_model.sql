-- Which judge scored each answer: `judge` already holds its kind (llm or local); this adds
-- its model as the judge reports it (the LLM judge's model, or the local judge's model
-- name), so the review pages can say whose verdicts the reviewers are checking. NULL for
-- answers queued before: their kind is known, their model is not.
ALTER TABLE backlog_answers ADD COLUMN judge_model text;
