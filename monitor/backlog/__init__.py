"""The golden-set backlog in Postgres: what is queued, stored, reviewed, exported and migrated.

The modules, as the data flows: `entries` (which scored records are queued and
the redacted entry stored for each), `store` (the Postgres store, the only
asyncpg import) with its SQL text in `queries`, `reviews` (a reviewer's
verdicts and references), `calibration` (the hallucination rate those
verdicts correct), `rows` (the rows as read back), `export` and `annotations`
(the files people annotate), and `migrations` (the schema). The sink
(`monitor.sinks.backlog`) writes entries into the store; the offline runner
(`monitor.offline`) and the review app (`monitor.review`) use the store alone.

Row life cycle: pending → annotated (a reference was imported) → evaluating
(claimed by an offline runner with ``FOR UPDATE SKIP LOCKED`` under a lease;
an expired lease makes the row claimable again, so a crashed runner's rows come
back) → evaluated; or discarded.
"""
