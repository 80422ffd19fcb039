"""The Grafana dashboard dashboards/rag-monitor.json.

Every panel query must parse (promtool), name only metrics that the exporter
(`monitor.telemetry.Exporter`, served by `monitor.http.MetricsServer`)
really serves on /metrics, and return data from a real Prometheus server
scraping that running exporter.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import socket
import subprocess
import threading
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from monitor.http import MetricsServer
from monitor.telemetry import Exporter
from tests.support import ROOT, load_script
from tests.support.tools import require_tool
from tests.support.waits import wait_until_sync

DASHBOARD = ROOT / "dashboards" / "rag-monitor.json"
RULES = ROOT / "dashboards" / "alerts.yaml"

#: Grafana variables and what they become for promtool and for the live test.
SUBSTITUTIONS = {
    "$__rate_interval": "15s",
    "$__interval": "5s",
    "$__range": "1m",
    "${route}": ".*",
    "$route": ".*",
    "${namespace}": ".*",
    "$namespace": ".*",
    "${job}": ".*",
    "$job": ".*",
}
PROMQL_WORDS = {
    "and",
    "or",
    "unless",
    "offset",
    "bool",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "inf",
    "nan",
    "atan2",
}
#: Exported families the dashboard may leave out, and why.
NOT_ON_DASHBOARD = {
    "rag_monitor_hallucinations_total",  # unweighted; the weighted rate is shown instead
    "rag_monitor_no_context_total",  # the same: its weighted share is on the dashboard
}
#: Metrics a panel shows before this exporter serves them (none now); once the exporter
#: serves one, the test below says so: drop it here and give it a value in `populate`.
NOT_YET_EXPORTED: set[str] = set()


def lint() -> ModuleType:
    """scripts/dashboard_lint.py, the check (and fix) of the deployment filters."""
    return load_script("scripts/dashboard_lint.py")


def tool(name: str) -> str:
    """promtool or prometheus, both from the Debian package ``prometheus``."""
    return require_tool(name, "prometheus")


def dashboard() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return loaded


def panels() -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for panel in dashboard()["panels"]:
        found.append(panel)
        found.extend(panel.get("panels", []))
    return found


def queries() -> list[tuple[str, str]]:
    """(panel title, PromQL with Grafana variables substituted) for every target."""
    out = []
    for panel in panels():
        for target in panel.get("targets", []):
            expr = target["expr"]
            for var, value in SUBSTITUTIONS.items():
                expr = expr.replace(var, value)
            out.append((panel["title"], expr))
    return out


def metric_names(expr: str) -> set[str]:
    """Metric names in a PromQL expression (strings, matchers, ranges, grouping removed)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = re.sub(r"\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = re.findall(r"(?<![\w:.])([A-Za-z_:][\w:]*)(?![\w:])(?!\s*\()", text)
    return {name for name in names if name.lower() not in PROMQL_WORDS}


# --- a live exporter -------------------------------------------------------


def populate(exporter: Exporter) -> None:
    """Give every labelled metric a child, with the label values the panels filter on."""
    exporter.records_consumed.labels(topic="rag-interactions").inc(50)
    exporter.records_sampled.inc(10)
    exporter.records_invalid.labels(reason="not_json").inc()
    exporter.records_skipped.labels(reason="budget").inc()
    exporter.records_scored.inc(8)
    for metric in ("faithfulness", "response_relevancy", "context_utility"):
        for route in ("chat", "search"):
            exporter.metric_score.labels(metric=metric, route=route, judge="llm").observe(0.7)
        for verdict in ("pass", "fail", "unscoreable"):
            exporter.verdicts.labels(metric=metric, verdict=verdict, judge="llm").inc()
        exporter.judge_tokens.labels(metric=metric, kind="prompt").inc(900)
        exporter.judge_tokens.labels(metric=metric, kind="completion").inc(100)
    for route in ("chat", "search"):
        exporter.hallucinations.labels(route=route, judge="llm").inc()
        exporter.scored_weight.labels(route=route, judge="llm").inc(40)
        exporter.hallucination_weight.labels(route=route, judge="llm").inc(2)
        exporter.no_context.labels(route=route, judge="llm").inc()
        exporter.no_context_weight.labels(route=route, judge="llm").inc(10)
    exporter.judge_requests.labels(outcome="ok").inc(30)
    exporter.judge_requests.labels(outcome="timeout").inc()
    exporter.judge_request_duration.observe(0.8)
    exporter.token_budget_remaining.set(150_000)
    exporter.token_budget_share.set(0.5)
    exporter.judge_info.labels(kind="llm", model="gpt-4o-mini", role="primary").set(1)
    exporter.sample_rate.set(0.1)
    exporter.consumer_lag.labels(partition="0").set(12)
    exporter.backlog_enqueued.labels(reason="faithfulness").inc()
    exporter.backlog_write_errors.inc(0)
    exporter.backlog_size.labels(status="pending").set(3)
    exporter.calibration.update(
        {"hallucination": 0.8, "low_relevancy": None},
        0.02,
        (0.07, 0.05, 0.09),
        {("hallucination", "confirmed"): 8, ("hallucination", "false_alarm"): 2},
    )
    exporter.traces.labels(outcome="assembled").inc(8)
    exporter.trace_buffer_traces.set(4)
    exporter.trace_buffer_bytes.set(40_000)


@pytest.fixture
def exporter_url() -> Iterator[tuple[Exporter, str]]:
    """The exporter served by `monitor.http.MetricsServer` on loopback, on a loop of its own."""
    exporter = Exporter()
    server = MetricsServer(exporter.registry, "127.0.0.1", 0)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=10)
    try:
        yield exporter, f"127.0.0.1:{server.port}"
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def exposed_names(metrics_text: str) -> set[str]:
    """Sample names a scrape of this text can produce (also for families with no child yet)."""
    suffixes = {
        "counter": ("_total", "_created"),
        "histogram": ("_bucket", "_sum", "_count", "_created"),
        "summary": ("", "_sum", "_count", "_created"),
        "gauge": ("",),
    }
    names: set[str] = set()
    for family in text_string_to_metric_families(metrics_text):
        names.update(family.name + s for s in suffixes.get(family.type, ("",)))
        names.update(sample.name for sample in family.samples)
    return names


def fetch(url: str, timeout: float = 5.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as response:
        body: bytes = response.read()
    return body.decode("utf-8")


# --- static checks -----------------------------------------------------------


def test_datasource_namespace_job_and_route_are_template_variables() -> None:
    listed = dashboard()["templating"]["list"]
    assert [v["name"] for v in listed][:4] == ["datasource", "namespace", "job", "route"]
    variables = {v["name"]: v for v in listed}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("namespace", "job", "route"):
        assert variables[name]["type"] == "query"
        assert variables[name]["includeAll"] and variables[name]["multi"]
        assert variables[name]["allValue"] == ".*"  # "All" also matches a missing label
    # each variable offers the values left by the ones before it
    assert 'namespace=~"$namespace"' in variables["job"]["query"]["query"]
    assert 'job=~"$job"' in variables["route"]["query"]["query"]
    for panel in panels():
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}", panel["title"]


def test_every_query_filters_by_namespace_and_job() -> None:
    script = lint()
    assert script.problems(dashboard()) == []
    checked = 0
    for panel in panels():
        for target in panel.get("targets", []):
            for name, matchers in script.selectors(target["expr"]):
                assert matchers["namespace"] == ("=~", "$namespace"), (panel["title"], name)
                assert matchers["job"] == ("=~", "$job"), (panel["title"], name)
                checked += 1
    assert checked >= 30


def test_lint_finds_and_fixes_an_unfiltered_panel() -> None:
    script = lint()
    assert list(script.selectors('a{x="rag_monitor_y"} + rag_monitor_z{a="b"}')) == [
        ("rag_monitor_z", {"a": ("=", "b")})
    ]
    broken = copy.deepcopy(dashboard())
    target = broken["panels"][1]["targets"][0]
    target["expr"] = target["expr"].replace('namespace=~"$namespace",', "")
    broken["panels"][1]["datasource"] = {"type": "prometheus", "uid": "prom-1"}
    broken["templating"]["list"] = [
        v for v in broken["templating"]["list"] if v["name"] not in {"namespace", "job"}
    ]
    found = script.problems(broken)
    assert any("lacks namespace" in p for p in found)
    assert any("datasource is not" in p for p in found)
    assert any("variables start" in p for p in found)
    assert script.dump(script.fix(broken)) == DASHBOARD.read_text(encoding="utf-8")
    assert script.add_filters("sum(rate(rag_monitor_x_total[5m]))") == (
        'sum(rate(rag_monitor_x_total{namespace=~"$namespace",job=~"$job"}[5m]))'
    )
    with pytest.raises(ValueError):
        script.add_filters('rag_monitor_x_total{job="fixed"}')


def test_budget_share_panel_sits_in_the_judge_row() -> None:
    top = dashboard()["panels"]
    titles = [p["title"] for p in top]
    share = titles.index("Token budget share by replica")
    rows = [i for i, p in enumerate(top) if p["type"] == "row"]
    assert max(i for i in rows if i < share) == titles.index("Judge")
    for earlier, later in zip(top, top[1:], strict=False):  # no panel overlaps the next row
        if later["type"] == "row":
            assert earlier["gridPos"]["y"] + earlier["gridPos"]["h"] <= later["gridPos"]["y"]


def test_panel_ids_are_unique_and_titles_present() -> None:
    ids = [panel["id"] for panel in panels()]
    assert len(ids) == len(set(ids))
    assert all(panel["title"] for panel in panels())


def test_every_panel_expression_parses(tmp_path: Path) -> None:
    found = queries()
    assert len(found) >= 15
    rules = {
        "groups": [
            {
                "name": "dashboard",
                "rules": [
                    {"record": f"dashboard:query_{i}", "expr": expr}
                    for i, (_, expr) in enumerate(found)
                ],
            }
        ]
    }
    path = tmp_path / "dashboard-rules.yaml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    result = subprocess.run(
        [tool("promtool"), "check", "rules", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_metric_name_extraction() -> None:
    expr = (
        'histogram_quantile(0.9, sum by (le) (rate(a_bucket{x="y z", route=~".*"}[5m])))'
        " / on (job) group_left b_total offset 1d and vector(1) > 1e-3"
    )
    assert metric_names(expr) == {"a_bucket", "b_total"}


def test_panels_name_only_metrics_the_exporter_serves(
    exporter_url: tuple[Exporter, str],
) -> None:
    _, address = exporter_url
    served = exposed_names(fetch(f"http://{address}/metrics"))
    assert "rag_monitor_backlog_size" in served
    assert fetch(f"http://{address}/healthz") == "ok\n"  # what the Dockerfile HEALTHCHECK asks
    assert not NOT_YET_EXPORTED & served, (
        "now exported: drop it from NOT_YET_EXPORTED and give it a value in populate()"
    )
    used: set[str] = set()
    for title, expr in queries():
        names = metric_names(expr)
        assert names <= served | NOT_YET_EXPORTED, (
            f"{title!r} names metrics not served: {names - served}"
        )
        used |= names
    families = {
        f.name + ("_total" if f.type == "counter" else "")
        for f in text_string_to_metric_families(fetch(f"http://{address}/metrics"))
        if not f.name.endswith("_created")  # prometheus_client's creation timestamps
    }
    unused = {
        family
        for family in families - NOT_ON_DASHBOARD
        if not any(name == family or name.startswith(family + "_") for name in used)
    }
    assert unused == set(), "exported metrics without a panel"


# --- a real Prometheus scraping a live exporter ------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def query(base: str, expr: str) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    reply = json.loads(fetch(url))
    assert reply["status"] == "success", reply
    result: list[dict[str, Any]] = reply["data"]["result"]
    return result


def test_every_panel_returns_data_from_a_real_prometheus(
    exporter_url: tuple[Exporter, str], tmp_path: Path
) -> None:
    prometheus = tool("prometheus")
    exporter, address = exporter_url
    populate(exporter)
    config = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "rule_files": [str(RULES)],
        "scrape_configs": [{"job_name": "rag-monitor", "static_configs": [{"targets": [address]}]}],
    }
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config), encoding="utf-8")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    log = (tmp_path / "prometheus.log").open("w")
    proc = subprocess.Popen(
        [
            prometheus,
            f"--config.file={tmp_path / 'prometheus.yml'}",
            f"--storage.tsdb.path={tmp_path / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=tmp_path,
    )
    stop = threading.Event()

    def traffic() -> None:  # keep counters moving so rates are not all zero
        while not stop.wait(0.3):
            populate(exporter)

    ticker = threading.Thread(target=traffic, daemon=True)
    ticker.start()
    try:
        pending = {
            expr: title for title, expr in queries() if not metric_names(expr) & NOT_YET_EXPORTED
        }

        def every_panel_has_data() -> bool:
            assert proc.poll() is None, (tmp_path / "prometheus.log").read_text()
            try:
                for expr in list(pending):
                    if query(base, expr):
                        del pending[expr]
            except OSError:
                pass  # not listening yet
            return not pending

        wait_until_sync(
            every_panel_has_data,
            90,
            lambda: f"data in every panel; without: {sorted(set(pending.values()))}",
            interval=1.0,
        )
        rules = json.loads(fetch(f"{base}/api/v1/rules"))["data"]["groups"]
        loaded = [rule for group in rules for rule in group["rules"]]
        assert len(loaded) == sum(
            len(group["rules"]) for group in yaml.safe_load(RULES.read_text())["groups"]
        )
        assert all(not rule.get("lastError") for rule in loaded), loaded
    finally:
        stop.set()
        ticker.join(timeout=5)
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)
        log.close()
