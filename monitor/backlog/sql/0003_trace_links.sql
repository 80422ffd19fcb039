-- The trace a backlog row came from (OpenTelemetry ids in hex, or the record's
-- metadata.trace_id / span_id), so a reviewer can open the request in Tempo or Jaeger.
ALTER TABLE backlog ADD COLUMN trace_id text, ADD COLUMN span_id text;

CREATE INDEX backlog_trace_id_idx ON backlog (trace_id) WHERE trace_id IS NOT NULL;
