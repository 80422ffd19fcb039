"""Review pages with a big backlog: latency per request of the queue and row pages.

    python -m bench.review_pages [--rows 100000] [--requests 200] [--seed 3]

Fills a fresh schema of an embedded Postgres (``RAG_MONITOR_PG_DSN`` instead, if
set) with ``--rows`` backlog rows in the shape the sink stores them (a question,
three contexts, one answer with its statements; every fourth row a second answer,
every tenth a verdict; statuses and reasons mixed), inserted with set-based SQL
(writing them through the sink one by one would take most of an hour), then
vacuumed and analysed as autovacuum would. Then
`monitor.review.app.ReviewApp` serves them on 127.0.0.1 and one client asks,
one request at a time, for each kind of page ``--requests`` times: the queue
(first page; by status; by reason; most seen; 200 pages deep through keyset
cursors), a random row's page, and the same through the JSON API; then the
calibration read the sidecar does on its slow interval, 10 times. Prints p50,
p95 and max per kind, in milliseconds, as a Markdown table (target for the
pages: p95 < 100 ms).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

import aiohttp
import asyncpg

from monitor.backlog.store import BacklogStore
from monitor.config import Settings
from monitor.review.app import ReviewApp
from monitor.sinks.backlog import BacklogSink
from tests.support.embedded import EmbeddedPostgres

ROOT = Path(__file__).resolve().parents[1]

FILL = """
INSERT INTO backlog (id, status, reasons, question_hash, seen_count, record, route, judge,
                     inclusion_probability, online_scores, online_details, created_at,
                     updated_at, last_seen_at)
SELECT 'row-' || g,
       (ARRAY['pending','pending','pending','annotated','evaluated','discarded'])[1 + g % 6],
       CASE WHEN g % 3 = 0 THEN ARRAY['hallucination']
            WHEN g % 3 = 1 THEN ARRAY['hallucination','low_relevancy']
            ELSE ARRAY['low_utility'] END,
       md5('q' || g), 1 + (g * 7919) % 40,
       jsonb_build_object(
           'id', 'row-' || g,
           'user_input', 'How do I handle expense claim number ' || g || ' for a trip abroad?',
           'response', 'You must attach every receipt over 100 dollars and file within '
                       || (g % 60) || ' days. Your manager approves it.',
           'retrieved_contexts', jsonb_build_array(
               jsonb_build_object('text', repeat('Receipts are needed for expenses over $100. ', 8),
                                  'id', 'doc-' || (g % 500), 'score', 0.91),
               jsonb_build_object('text', repeat('Claims are filed within 30 days. ', 10),
                                  'id', 'doc-' || (g % 700), 'score', 0.84),
               jsonb_build_object('text', repeat('Managers approve travel. ', 12),
                                  'id', 'doc-' || (g % 900), 'score', 0.77)),
           'metadata', jsonb_build_object('route', 'route-' || (g % 8))),
       'route-' || (g % 8), 'local', 0.1,
       jsonb_build_object('faithfulness', 0.3, 'response_relevancy', 0.6, 'context_utility', 0.7),
       jsonb_build_object('faithfulness', jsonb_build_object('statements', jsonb_build_array(
           jsonb_build_object('statement', 'You must attach every receipt over 100 dollars',
                              'verdict', 1, 'reason', 'the first context says so'),
           jsonb_build_object('statement', 'file within ' || (g % 60) || ' days',
                              'verdict', 0, 'reason', 'the contexts say 30 days')))),
       now() - make_interval(secs => ($1 - g) * 13), now(), now()
FROM generate_series(1, $1) AS g
"""

ANSWERS = """
INSERT INTO backlog_answers (interaction_id, backlog_id, answer_key, reasons, record,
                             online_scores, online_details, judge, inclusion_probability,
                             weight, weight_squares, seen_count, created_at)
SELECT id, id, md5(id), reasons, record, online_scores, online_details, judge, 0.1,
       seen_count * 10.0, seen_count * 100.0, seen_count, created_at
FROM backlog;
INSERT INTO backlog_answers (interaction_id, backlog_id, answer_key, reasons, record,
                             online_scores, online_details, judge, inclusion_probability,
                             weight, weight_squares, created_at)
SELECT id || '-b', id, md5(id || '-b'), ARRAY['hallucination'],
       jsonb_set(record, '{response}', '"Receipts are never needed."'),
       online_scores, online_details, judge, 0.1, 10.0, 100.0, created_at + interval '1 s'
FROM backlog WHERE substr(id, 5)::int % 4 = 0;
INSERT INTO backlog_interactions (interaction_id, backlog_id, answer_id)
SELECT interaction_id, backlog_id, interaction_id FROM backlog_answers;
INSERT INTO backlog_verdicts (backlog_id, interaction_id, reason, verdict, reviewer)
SELECT backlog_id, interaction_id, 'hallucination',
       (ARRAY['confirmed','false_alarm','unsure'])[1 + length(interaction_id) % 3], 'bench'
FROM backlog_answers WHERE substr(backlog_id, 5)::int % 10 = 0;
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


async def run(dsn: str, rows: int, requests: int, seed: int) -> None:
    schema = f"bench_{uuid.uuid4().hex[:8]}"
    conn = await asyncpg.connect(dsn)
    await conn.execute(f'CREATE SCHEMA "{schema}"')
    await conn.close()
    scoped = dsn + ("&" if "?" in dsn else "?") + f"search_path={schema}"
    settings = Settings(control_share=0.0)
    sink = BacklogSink(BacklogStore(scoped, settings, pool_size=4), settings)
    await sink.start()
    try:
        await sink.store.migrate()
        started = time.perf_counter()
        conn = await asyncpg.connect(scoped)
        try:
            await conn.execute(FILL, rows)
            await conn.execute(ANSWERS)
            # what autovacuum does to a table in service (visibility map, statistics)
            await conn.execute("VACUUM (ANALYZE)")
            answers = await conn.fetchval("SELECT count(*) FROM backlog_answers")
        finally:
            await conn.close()
        print(
            f"filled {rows} rows, {answers} answers in {time.perf_counter() - started:.1f} s",
            file=sys.stderr,
        )
        sample = await sink.store.get("row-4")
        assert sample is not None and len(sample.answers) == 2  # the shape the pages read

        app = ReviewApp(sink.store)
        await app.start("127.0.0.1", 0)
        base = f"http://127.0.0.1:{app.port}"
        rng = random.Random(seed)
        async with aiohttp.ClientSession() as http:
            cursors: list[str] = []
            cursor = None
            for _ in range(200):  # walk 200 pages deep, keep their cursors
                params = {"limit": "50", **({"cursor": cursor} if cursor else {})}
                async with http.get(base + "/api/rows", params=params) as r:
                    cursor = (await r.json())["next"]
                cursors.append(cursor)

            def row_id() -> str:
                return f"row-{rng.randint(1, rows)}"

            kinds: list[tuple[str, object]] = [
                ("queue `/`", lambda: "/"),
                ("queue `/?status=pending`", lambda: "/?status=pending"),
                ("queue `/?reason=low_relevancy`", lambda: "/?reason=low_relevancy"),
                ("queue `/?order=seen`", lambda: "/?order=seen"),
                ("queue, up to 200 pages deep (cursor)", lambda: f"/?cursor={rng.choice(cursors)}"),
                ("row page `/rows/{id}`", lambda: f"/rows/{row_id()}"),
                ("`GET /api/rows?limit=50`", lambda: "/api/rows?limit=50"),
                ("`GET /api/rows/{id}`", lambda: f"/api/rows/{row_id()}"),
            ]
            results: list[tuple[str, list[float]]] = []
            for name, path in kinds:
                times: list[float] = []
                for i in range(requests + 10):
                    t0 = time.perf_counter()
                    async with http.get(base + path()) as r:  # type: ignore[operator]
                        await r.read()
                        assert r.status == 200, (name, r.status)
                    if i >= 10:  # the first few warm the pool and the caches
                        times.append((time.perf_counter() - t0) * 1000)
                results.append((name, times))
        await app.stop()
        # the calibration the sidecar reads every RAG_MONITOR_CALIBRATION_INTERVAL_SECONDS
        # (and /api/calibration at most every 15 s): the query and the estimator, uncached
        calibration: list[float] = []
        for _ in range(10):
            t0 = time.perf_counter()
            await sink.store.calibration_snapshot()
            calibration.append((time.perf_counter() - t0) * 1000)
        results.append(("calibration read (`calibration_snapshot`, 10 times)", calibration))
    finally:
        await sink.aclose()
        conn = await asyncpg.connect(dsn)
        await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        await conn.close()

    print(
        f"\n{rows} backlog rows ({answers} answers), {requests} requests per kind, one at a"
        " time; Python " + platform.python_version()
    )
    print("\n| request | p50 ms | p95 ms | max ms |\n|---|---:|---:|---:|")
    for name, times in results:
        print(
            f"| {name} | {statistics.median(times):.1f} | {percentile(times, 0.95):.1f} |"
            f" {max(times):.1f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    external = os.environ.get("RAG_MONITOR_PG_DSN")
    if external:
        asyncio.run(run(external, args.rows, args.requests, args.seed))
        return
    pg = EmbeddedPostgres()
    try:
        dsn = pg.start()
        asyncio.run(run(dsn, args.rows, args.requests, args.seed))
    finally:
        pg.close()


if __name__ == "__main__":
    main()
