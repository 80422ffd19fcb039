"""The demo's hold (`monitor.demo.hold`).

- in-process, on a real Postgres: ``/readyz`` while held checks the broker, Postgres and the
  backlog schema, and says false for each that is not so (an unmigrated schema, a broker
  port nobody listens on); ``--hold`` with ``--review`` serves the review page from the
  hold's start and past its end, until the stop event, with a line per stage;
- end to end (``rag-monitor demo --hold 300 --review`` in a subprocess): while held,
  ``/metrics`` answers, ``/readyz`` is ready with ``postgres`` and ``schema`` true,
  ``rag-monitor backlog stats`` works on the printed DSN, and the review page opens in a
  real browser (Debian's chromium via Playwright) with the rows the run queued; SIGINT
  then stops everything (exit 0), nothing left behind.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import re
import socket
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from playwright.sync_api import expect, sync_playwright
from prometheus_client.parser import text_string_to_metric_families

from monitor.config import Settings
from monitor.demo import DemoError
from monitor.demo.hold import hold
from monitor.demo.report import DemoReport
from monitor.http import MetricsServer
from monitor.review.forms import DEFAULT_LIMIT
from monitor.telemetry import Exporter
from tests.fixtures.postgres import SettingsFactory
from tests.support.backlog import migrate
from tests.support.demo import backlog_cli, start_demo
from tests.support.tools import require_tool
from tests.support.waits import wait_until

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"]
#: set to a directory to keep the screenshot (it is taken either way)
SHOTS = os.environ.get("RAGMON_TEST_SCREENSHOTS")
CTRL_C = "Ctrl-C stops everything and exits"


def unused_port() -> int:
    """A port nobody listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode("utf-8")


# ------------------------------------------------------------------------ in-process


def start_hold(
    settings: Settings,
    pg_dsn: str,
    server: MetricsServer,
    bootstrap: str,
    *,
    seconds: float,
    review_port: int | None,
) -> tuple[asyncio.Task[None], DemoReport, asyncio.Event, io.StringIO]:
    """The hold running as a task, with the report, stop event and stderr it writes to."""
    stop = asyncio.Event()
    report = DemoReport(judge="local", judge_kind="local")
    report.metrics_url = f"http://127.0.0.1:{server.port}/metrics"
    err = io.StringIO()
    task = asyncio.create_task(
        hold(
            settings,
            pg_dsn,
            server,
            bootstrap,
            seconds=seconds,
            review_port=review_port,
            report=report,
            stop=stop,
            err=err,
        )
    )
    return task, report, stop, err


@pytest.mark.postgres
async def test_readiness_while_held_checks_what_the_hold_keeps_up(
    pg_dsn: str, make_settings: SettingsFactory
) -> None:
    settings = make_settings()
    server = MetricsServer(Exporter().registry, "127.0.0.1", 0)
    await server.start()
    # the held `kafka` check is a TCP connect, so a plain listener stands in for the broker
    # here (closing it is the fault); the end-to-end test below checks the real broker
    broker = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", 0)
    broker_port = broker.sockets[0].getsockname()[1]
    readyz = f"http://127.0.0.1:{server.port}/readyz"
    task, report, stop, err = start_hold(
        settings, pg_dsn, server, f"127.0.0.1:{broker_port}", seconds=60, review_port=None
    )
    try:
        await wait_until(lambda: "holding for 60 s" in err.getvalue(), 30, "the hold line")
        async with aiohttp.ClientSession() as http:
            # the schema is empty: Postgres answers, the schema is behind
            async with http.get(readyz) as response:
                assert response.status == 503
                assert await response.json() == {
                    "ready": False,
                    "checks": {"kafka": True, "postgres": True, "schema": False},
                }
            await migrate(pg_dsn, settings)
            async with http.get(readyz) as response:
                assert response.status == 200
                assert await response.json() == {
                    "ready": True,
                    "checks": {"kafka": True, "postgres": True, "schema": True},
                }
            broker.close()
            await broker.wait_closed()
            async with http.get(readyz) as response:
                assert response.status == 503
                assert (await response.json())["checks"]["kafka"] is False
        stop.set()
        await asyncio.wait_for(task, 30)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        broker.close()
        await server.stop()
    lines = err.getvalue().splitlines()
    assert lines[0] == (
        f"demo: holding for 60 s: /metrics on {report.metrics_url}, Postgres at {pg_dsn} — "
        + CTRL_C
    )
    assert lines[-1] == "demo: Ctrl-C: stopping the hold and everything the demo started"
    assert report.review_url == ""


@pytest.mark.postgres
async def test_hold_and_review_serve_the_page_during_and_after_the_hold(
    pg_dsn: str, make_settings: SettingsFactory
) -> None:
    settings = make_settings()
    await migrate(pg_dsn, settings)
    server = MetricsServer(Exporter().registry, "127.0.0.1", 0)
    await server.start()
    task, report, stop, err = start_hold(
        settings, pg_dsn, server, f"127.0.0.1:{unused_port()}", seconds=1.0, review_port=0
    )
    try:
        await wait_until(lambda: "holding for 1 s" in err.getvalue(), 30, "the hold line")
        assert report.review_url.startswith("http://127.0.0.1:")
        async with aiohttp.ClientSession() as http:
            async with http.get(report.review_url) as response:  # during the hold
                assert response.status == 200
                assert "Nothing in this queue." in await response.text()
            await wait_until(lambda: "hold is over" in err.getvalue(), 30, "the end-of-hold line")
            await asyncio.sleep(0.5)  # a while past the hold, to show the demo did not end
            assert not task.done()  # the review page keeps the demo up past the hold
            async with http.get(report.review_url) as response:
                assert response.status == 200
            async with http.get(report.metrics_url) as response:
                assert response.status == 200
        stop.set()
        await asyncio.wait_for(task, 30)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await server.stop()
    assert err.getvalue().splitlines() == [
        f"demo: holding for 1 s: /metrics on {report.metrics_url}, review on "
        f"{report.review_url}, Postgres at {pg_dsn} — {CTRL_C}",
        f"demo: the 1 s hold is over; review on {report.review_url} and /metrics stay up — "
        + CTRL_C,
        "demo: Ctrl-C: stopping the hold and everything the demo started",
    ]
    with pytest.raises(aiohttp.ClientConnectionError):  # the page stopped with the hold
        async with aiohttp.ClientSession() as http, http.get(report.review_url):
            pass


@pytest.mark.postgres
async def test_a_hold_without_review_ends_on_its_own(
    pg_dsn: str, make_settings: SettingsFactory
) -> None:
    server = MetricsServer(Exporter().registry, "127.0.0.1", 0)
    report = DemoReport(judge="local", judge_kind="local")
    err = io.StringIO()
    stop = asyncio.Event()
    await asyncio.wait_for(
        hold(
            make_settings(),
            pg_dsn,
            server,
            f"127.0.0.1:{unused_port()}",
            seconds=0.3,
            review_port=None,
            report=report,
            stop=stop,
            err=err,
        ),
        30,
    )
    assert err.getvalue().splitlines()[-1] == "demo: the 0.3 s hold is over; stopping everything"
    # no hold asked for: nothing printed, nothing opened
    quiet = io.StringIO()
    await hold(
        make_settings(),
        "postgresql://nobody@127.0.0.1:1/none",
        server,
        "127.0.0.1:1",
        seconds=0,
        review_port=None,
        report=report,
        stop=stop,
        err=quiet,
    )
    assert quiet.getvalue() == ""


@pytest.mark.postgres
async def test_a_taken_review_port_is_a_clear_error(
    pg_dsn: str, make_settings: SettingsFactory
) -> None:
    server = MetricsServer(Exporter().registry, "127.0.0.1", 0)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(DemoError, match=f"review page on port {port}: .*--review-port 0"):
            await hold(
                make_settings(),
                pg_dsn,
                server,
                f"127.0.0.1:{unused_port()}",
                seconds=5,
                review_port=port,
                report=DemoReport(judge="local", judge_kind="local"),
                stop=asyncio.Event(),
                err=io.StringIO(),
            )


# ------------------------------------------------------------------------ end to end


def review_in_chromium(url: str, rows: int, shots: Path) -> None:
    """The review page the demo serves while held, in Debian's chromium; a screenshot kept."""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 900})
            page.goto(url)
            expect(page.locator("nav.tabs a.on")).to_contain_text(f"all {rows}")
            queue = page.locator("table.queue tbody tr")
            expect(queue).to_have_count(min(rows, DEFAULT_LIMIT))
            shots.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(shots / "demo-hold-review.png"), full_page=True)
            assert (shots / "demo-hold-review.png").stat().st_size > 10_000
            question = queue.first.locator("td a").inner_text()
            queue.first.locator("td a").click()
            page.wait_for_url("**/rows/**")
            expect(page.locator("h1.question")).to_have_text(question)
            expect(page.locator("section.answer").first).to_be_visible()
        finally:
            browser.close()


@pytest.mark.kafka
@pytest.mark.postgres
def test_demo_hold_with_review_end_to_end(tmp_path: Path) -> None:
    require_tool("chromium", "chromium", path=CHROMIUM)
    workdir = tmp_path / "work"
    report_path = tmp_path / "report.json"
    demo = start_demo(
        [
            "--records",
            "20",
            "--workdir",
            str(workdir),
            "--report-json",
            str(report_path),
            "--hold",
            "300",
            "--review",
            "--review-port",
            "0",
        ]  # fmt: skip
    )
    try:
        held = demo.wait_for_line(
            r"demo: holding for 300 s: /metrics on (\S+), review on (\S+), Postgres at (\S+) — "
            + re.escape(CTRL_C),
            240,
        )
        metrics_url, review_url, dsn = held.groups()
        pg_port = int(demo.wait_for_line(r"Postgres listening on 127\.0\.0\.1:(\d+)", 5).group(1))
        demo.note_postgres(pg_port)
        report: dict[str, Any] = json.loads(report_path.read_text(encoding="utf-8"))
        assert report["metrics_url"] == metrics_url and report["pg_dsn"] == dsn

        # /metrics, held
        status, text = get(metrics_url)
        assert status == 200
        consumed = sum(
            sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
            if sample.name == "rag_monitor_records_consumed_total"
        )
        assert consumed == report["consumed"] == 20
        # /readyz tells the truth while held
        status, body = get(metrics_url.removesuffix("/metrics") + "/readyz")
        assert status == 200, body
        assert json.loads(body) == {
            "ready": True,
            "checks": {"kafka": True, "postgres": True, "schema": True},
        }
        # the backlog, through the CLI, on the printed DSN
        counted = json.loads(backlog_cli(dsn, "stats", "--json"))
        assert counted["rows"] == report["backlog_rows"] > 0, counted
        assert counted["interactions"] == report["backlog_interactions"]

        # the review page, during the hold, in a real browser
        shots = Path(SHOTS) if SHOTS else tmp_path
        review_in_chromium(review_url, report["backlog_rows"], shots)

        code = demo.stop()
    finally:
        demo.close()
    stderr = "".join(demo.stderr)
    assert code == 0, stderr
    assert "until the report, Ctrl-C stops the run and everything it started (exit 130)" in stderr
    assert "demo: Ctrl-C: stopping the hold and everything the demo started" in stderr
    demo.assert_nothing_left()
    assert list(workdir.iterdir()) == []
