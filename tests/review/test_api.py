"""The review app over real HTTP on 127.0.0.1 and a real Postgres: API, pages, security."""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from monitor.review.app import ReviewApp
from monitor.review.auth import TokenError, parse_tokens
from monitor.sinks.backlog import BacklogSink
from tests.support.backlog import fetch, scored
from tests.support.review import xss_record

pytestmark = pytest.mark.postgres


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


def base(app: ReviewApp) -> str:
    return f"http://127.0.0.1:{app.port}"


async def seed_rows(backlog: BacklogSink, n: int) -> None:
    for i in range(n):
        await backlog.write([scored(f"row-{i:02d}", f"question {i}", response=f"answer {i}")])


async def pages_of_rows(
    http: aiohttp.ClientSession, app: ReviewApp, limit: int
) -> list[list[dict[str, Any]]]:
    """Every page of ``/api/rows`` at ``limit`` rows a page, following the cursor to the end."""
    pages: list[list[dict[str, Any]]] = []
    cursor = None
    while True:
        params = {"limit": str(limit), **({"cursor": cursor} if cursor else {})}
        async with http.get(base(app) + "/api/rows", params=params) as r:
            assert r.status == 200
            body = await r.json()
        pages.append(body["rows"])
        cursor = body["next"]
        if cursor is None:
            return pages


async def test_the_queue_puts_the_likeliest_hallucination_first(
    app: ReviewApp, backlog: BacklogSink, http: aiohttp.ClientSession
) -> None:
    """By default the queue puts the rows with an answer both judges flagged first, then
    orders by the highest ``hallucination_probability`` of a row's answers (rows whose judge
    gives none last), paged by a cursor on both."""
    for rid, probability in (
        ("low", 0.2),
        ("none", None),
        ("both", 0.1),
        ("high", 0.95),
        ("mid", 0.6),
    ):
        statements = [{"statement": "Always attach it.", "verdict": 0}]
        details: dict[str, object] = {"statements": statements}
        if probability is not None:
            details["hallucination_probability"] = probability
            # the local judge's screen flags only the row "both"
            details["local_flagged"] = rid == "both"
        await backlog.write([scored(rid, f"question {rid}", details=details)])
    rows = [row for page in await pages_of_rows(http, app, 2) for row in page]
    assert [row["id"] for row in rows] == ["both", "high", "mid", "low", "none"]
    assert [row["flagged_by"] for row in rows] == ["both", "LLM", "LLM", "LLM", "LLM"]
    async with http.get(base(app) + "/api/rows", params={"order": "newest"}) as r:
        newest = (await r.json())["rows"]
    assert [row["id"] for row in newest] == ["mid", "high", "both", "none", "low"]
    assert [row["risk"] for row in newest] == [0.6, 0.95, 0.1, None, 0.2]
    async with http.get(base(app) + "/api/rows/both") as r:
        [answer] = (await r.json())["answers"]
    assert answer["flagged_by"] == {"llm": True, "local": True, "both": True}
    assert answer["details"]["faithfulness"]["local_flagged"] is True


async def test_rows_are_keyset_paged_and_filtered(
    app: ReviewApp, backlog: BacklogSink, http: aiohttp.ClientSession
) -> None:
    await seed_rows(backlog, 7)
    await backlog.store.discard(["row-03"])
    pages = await pages_of_rows(http, app, 3)
    assert len(pages) == 3
    seen = [row["id"] for page in pages for row in page]
    assert seen == [f"row-{i:02d}" for i in reversed(range(7))]  # newest first, no repeats
    async with http.get(base(app) + "/api/rows", params={"status": "discarded"}) as r:
        assert [row["id"] for row in (await r.json())["rows"]] == ["row-03"]
    async with http.get(base(app) + "/api/rows", params={"reason": "low_utility"}) as r:
        assert (await r.json())["rows"] == []
    for params, field in (
        ({"cursor": "garbage!"}, "cursor"),
        ({"limit": "0"}, "limit"),
        ({"status": "nope"}, "status"),
        ({"order": "random"}, "order"),
    ):
        async with http.get(base(app) + "/api/rows", params=params) as r:
            assert r.status == 422, params
            assert (await r.json())["field"] == field


async def test_row_review_200_409_422(
    app: ReviewApp, backlog: BacklogSink, http: aiohttp.ClientSession, pg_dsn: str
) -> None:
    await backlog.write([scored("r1", "When is a receipt needed?", response="Always.")])
    await backlog.write([scored("r2", "when is a receipt needed", response="Never.")])
    async with http.get(base(app) + "/api/rows/r1") as r:
        row = await r.json()
    assert row["question"] == "When is a receipt needed?"
    assert [a["interaction_id"] for a in row["answers"]] == ["r1", "r2"]
    assert row["answers"][1]["statements"][0]["statement"] == "Never."
    async with http.get(base(app) + "/api/rows/missing") as r:
        assert r.status == 404

    headers = {"X-CSRF-Token": app.csrf_token("local")}
    url = base(app) + "/api/rows/r1/review"
    review = {
        "version": row["version"],
        "reference": "Over $100.",
        "verdicts": [{"interaction_id": "r2", "reason": "hallucination", "verdict": "confirmed"}],
        "note": "policy 4.2",
    }
    async with http.post(url, json=review, headers=headers) as r:
        assert r.status == 200
        assert (await r.json())["version"] == row["version"] + 1
    stored = await fetch(pg_dsn, "SELECT interaction_id, verdict, reviewer FROM backlog_verdicts")
    assert [tuple(s) for s in stored] == [("r2", "confirmed", "local")]

    async with http.post(url, json={**review, "reference": "other"}, headers=headers) as r:
        assert r.status == 409  # the version we sent is stale now
        stale = await r.json()
    assert stale["field"] == "version" and stale["row"]["reference"] == "Over $100."
    assert stale["version"] == row["version"] + 1

    for body, field in (
        ({"reference": "x"}, "version"),
        (
            {
                "version": 1,
                "verdicts": [{"interaction_id": "r2", "reason": "hallucination", "verdict": "yes"}],
            },
            "verdicts[0].verdict",
        ),
        (
            {
                "version": 1,
                "verdicts": [
                    {"interaction_id": "zz", "reason": "hallucination", "verdict": "unsure"}
                ],
            },
            "verdicts[0].interaction_id",
        ),
        ({"version": 1, "colour": "red"}, "colour"),
        ({"version": 1, "note": 5}, "note"),
    ):
        async with http.post(url, json=body, headers=headers) as r:
            assert r.status == 422, body
            assert (await r.json())["field"] == field

    # a browser's post without the page's CSRF token, or not JSON: refused before reading
    async with http.post(url, json=review, headers={"Origin": base(app)}) as r:
        assert r.status == 403
    async with http.post(
        url, json=review, headers={"Origin": base(app), "X-CSRF-Token": "f" * 64}
    ) as r:
        assert r.status == 403
    async with http.post(url, data="version=2", headers=headers) as r:
        assert r.status == 403
    # a script on the machine (no Origin, no cookie) needs no CSRF token
    async with http.post(url, json={"version": stale["version"], "note": "a script"}) as r:
        assert r.status == 200
    async with http.get(base(app) + "/api/calibration") as r:
        cal = await r.json()
    assert cal["flag_precision"] == {"hallucination": 1.0}
    assert cal["verdicts"] == 1 and cal["calibrated_rate"] is None  # no control verdicts
    # one verdict on the LLM judge's flag: counted, too few for a figure (never a 0)
    assert cal["judge_precision"]["llm"] == {
        "judge": "llm",
        "reviewed": 1,
        "precision": None,
        "lower": None,
        "upper": None,
        "needed": 10,
    }
    assert cal["judge_precision"]["both"]["reviewed"] == 0


async def test_pages_escape_every_stored_text(
    app: ReviewApp, backlog: BacklogSink, http: aiohttp.ClientSession
) -> None:
    await backlog.write([xss_record("x1")])
    for path in ("/", "/rows/x1", "/calibration"):
        async with http.get(base(app) + path) as r:
            assert r.status == 200, path
            text = await r.text()
            assert "script-src 'self'" in r.headers["Content-Security-Policy"]
            assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert "<script>document" not in text and "<img src=x" not in text, path
        if path != "/calibration":
            assert "&lt;script&gt;document.title=&#x27;pwned&#x27;&lt;/script&gt;" in text, path
        # the only script a page loads is our own file
        assert re.findall(r"<script[^>]*>", text) == ['<script src="/static/review.js" defer>']
    async with http.get(base(app) + "/rows/x1") as r:
        text = await r.text()
    assert "&lt;img src=x onerror=&quot;document.title=&#x27;pwned&#x27;&quot;&gt;" in text


async def test_form_save_works_without_javascript_and_needs_its_csrf_token(
    app: ReviewApp, backlog: BacklogSink, http: aiohttp.ClientSession
) -> None:
    await seed_rows(backlog, 2)
    async with http.get(base(app) + "/rows/row-01") as r:
        page = await r.text()
    csrf = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert csrf is not None
    form = {
        "csrf": csrf.group(1),
        "version": "1",
        "answer-0": "row-01",
        "verdict-0-hallucination": "false_alarm",
        "reference": "A reference.",
        "note": "",
        "action": "save",
    }
    url = base(app) + "/rows/row-01"
    async with http.post(url, data={**form, "csrf": "0" * 64}, allow_redirects=False) as r:
        assert r.status == 403
    headers = {"Origin": "http://evil.example"}
    async with http.post(url, data=form, headers=headers, allow_redirects=False) as r:
        assert r.status == 403
    async with http.post(url, data=form, allow_redirects=False) as r:
        assert r.status == 303
        assert r.headers["Location"] == "/rows/row-00"  # the next (older) row
    row = await backlog.store.get("row-01")
    assert row is not None and row.reference == "A reference." and row.status == "annotated"
    assert row.answers[0].verdicts[0].verdict == "false_alarm"
    # the same form again: its version is stale now
    async with http.post(url, data=form, allow_redirects=False) as r:
        assert r.status == 409
        text = await r.text()
    assert "another reviewer saved this row first" in text
    assert 'name="version" value="2"' in text


async def test_tokens_are_required_off_loopback_and_name_the_reviewer(
    backlog: BacklogSink, http: aiohttp.ClientSession, caplog: pytest.LogCaptureFixture
) -> None:
    await seed_rows(backlog, 1)
    token = "s3cret-token-of-ana-0123"
    with pytest.raises(TokenError, match="without RAG_MONITOR_REVIEW_TOKENS"):
        await ReviewApp(backlog.store).start("0.0.0.0", 0)
    caplog.set_level(logging.DEBUG)
    app = ReviewApp(backlog.store, tokens=parse_tokens(f"ana:{token}, bo:another-token-0123456"))
    await app.start("0.0.0.0", 0)
    try:
        for path in ("/", "/rows/row-00", "/api/rows", "/api/calibration"):
            async with http.get(base(app) + path) as r:
                assert r.status == 401, path
                assert r.headers["WWW-Authenticate"].startswith("Bearer")
            async with http.get(
                base(app) + path, headers={"Authorization": "Bearer wrong-token-000000"}
            ) as r:
                assert r.status == 401, path
        auth = {"Authorization": f"Bearer {token}"}
        async with http.get(base(app) + "/api/rows", headers=auth) as r:
            assert r.status == 200
        async with http.post(
            base(app) + "/api/rows/row-00/review",
            headers=auth,
            json={
                "version": 1,
                "verdicts": [
                    {"interaction_id": "row-00", "reason": "hallucination", "verdict": "unsure"}
                ],
            },
        ) as r:
            assert r.status == 200  # a bearer token is no cookie: no CSRF header needed
        row = await backlog.store.get("row-00")
        assert row is not None and row.answers[0].verdicts[0].reviewer == "ana"
    finally:
        await app.stop()
    assert token not in caplog.text


def test_token_pairs_are_checked_without_echoing_them() -> None:
    assert parse_tokens("ana:0123456789abcdef bo:fedcba9876543210") == {
        "0123456789abcdef": "ana",
        "fedcba9876543210": "bo",
    }
    assert parse_tokens("") == {}
    repeated = "x:0123456789abcdef,y:0123456789abcdef"
    for bad in ("ana", "ana:short", "a b:0123456789abcdef", repeated):
        with pytest.raises(TokenError) as err:
            parse_tokens(bad)
        assert "0123456789abcdef" not in str(err.value) and "short" not in str(err.value)


def test_the_review_command_refuses_a_public_address_without_tokens_before_postgres() -> None:
    """No tokens off loopback is a settings error: exit 2 at once, whether Postgres is up or
    not (here nothing listens on the DSN's port)."""
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as sock:  # bound, not listening: a connection would be refused
        sock.bind(("127.0.0.1", 0))
        dsn = f"postgresql://u:pw@127.0.0.1:{sock.getsockname()[1]}/db"
        env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
        env.update(RAG_MONITOR_PG_DSN=dsn)
        refused = subprocess.run(
            [sys.executable, "-m", "monitor", "review", "--host", "0.0.0.0", "--port", "0"],
            env=env, capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.splitlines() == [
        "rag-monitor: refusing to listen on 0.0.0.0 without RAG_MONITOR_REVIEW_TOKENS"
        " (only a loopback address may go without tokens)"
    ]


def test_the_review_command_serves_until_interrupted(pg_dsn: str) -> None:
    import os
    import signal
    import subprocess
    import sys
    import urllib.request

    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
    env.update(RAG_MONITOR_PG_DSN=pg_dsn, RAG_MONITOR_MIGRATE_ON_START="true")
    refused = subprocess.run(
        [sys.executable, "-m", "monitor", "review", "--host", "0.0.0.0", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert refused.returncode == 2 and "RAG_MONITOR_REVIEW_TOKENS" in refused.stderr
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "review", "--port", "0"],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stderr is not None
        seen: list[str] = []
        match = None
        while match is None and len(seen) < 50:  # JSON log lines may come first
            seen.append(proc.stderr.readline())
            match = re.search(r"review: (http://127\.0\.0\.1:\d+/)", seen[-1])
        assert match, seen
        with urllib.request.urlopen(match.group(1), timeout=10) as response:
            assert "rag-monitor review" in response.read().decode("utf-8")
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0
        assert pg_dsn not in proc.stderr.read()  # the DSN (a secret) is never printed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stderr is not None:
            proc.stderr.close()
