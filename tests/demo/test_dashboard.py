"""A live dashboard on the demo: the recipe of docs/operations.md, with a real Prometheus.

The recipe (between the ``dashboard-recipe`` markers of docs/operations.md) runs
the demo with ``--pace`` and a fixed metrics port, and a Prometheus (Debian's
``prometheus``) with the page's ``prometheus.yml``; only the two ports are
changed to free ones. While the paced traffic is still being scored, the
expression of the dashboard's *Weighted hallucination rate* panel (read from
``dashboards/rag-monitor.json``, Grafana's variables filled in) must give a
rate through Prometheus's query API. Before any record is consumed, /metrics
already holds every labelled series at 0.
"""

from __future__ import annotations

import json
import math
import re
import shlex
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor.demo.report import DemoReport
from tests.support import ROOT
from tests.support.demo import DemoProcess, start_demo
from tests.support.embedded import free_port
from tests.support.tools import require_tool
from tests.support.waits import wait_until_sync

RECIPE_PORT = "9108"
PANEL = "Weighted hallucination rate"


def recipe() -> tuple[list[str], str, list[str]]:
    """The demo's argv, the prometheus.yml text and Prometheus's argv, from docs/operations.md."""
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    start = text.index("<!-- dashboard-recipe")
    block = text[start : text.index("<!-- /dashboard-recipe -->", start)]
    fenced = re.findall(r"^```(\w+)\n(.*?)^```", block, flags=re.S | re.M)
    commands = [shlex.split(body.strip()) for lang, body in fenced if lang == "console"]
    (config,) = [body for lang, body in fenced if lang == "yaml"]
    (demo,) = [c for c in commands if c[0] == "rag-monitor"]
    (prometheus,) = [c for c in commands if c[0] == "prometheus"]
    return demo, config, prometheus


def panel_expression(rate_interval: str = "30s") -> str:
    """The panel's first query, with Grafana's variables filled in (every value, "All")."""
    dashboard = json.loads((ROOT / "dashboards" / "rag-monitor.json").read_text("utf-8"))

    def panels(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
        out = []
        for p in items:
            out.append(p)
            out.extend(panels(p.get("panels", [])))
        return out

    (panel,) = [p for p in panels(dashboard["panels"]) if p.get("title") == PANEL]
    expr: str = panel["targets"][0]["expr"]
    expr = expr.replace("$__rate_interval", rate_interval)
    return re.sub(r"\$\{?\w+\}?", ".*", expr)  # in label matchers `=~"$var"`: match all


def query(port: int, expr: str) -> list[dict[str, Any]]:
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            body = json.loads(response.read())
    except OSError:
        return []
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def series_at_zero(url: str) -> dict[str, set[tuple[tuple[str, str], ...]]]:
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    out: dict[str, set[tuple[tuple[str, str], ...]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.value == 0 and sample.labels:
                out.setdefault(sample.name, set()).add(tuple(sorted(sample.labels.items())))
    return out


@pytest.mark.kafka
@pytest.mark.postgres
def test_the_readme_dashboard_recipe_shows_a_hallucination_rate_during_a_paced_run(
    tmp_path: Path,
) -> None:
    prometheus_bin = require_tool("prometheus", "prometheus")
    demo_argv, config, prometheus_argv = recipe()
    assert "--pace" in demo_argv and "--hold" in demo_argv
    metrics_port, web_port = str(free_port()), free_port()
    demo_argv = [metrics_port if a == RECIPE_PORT else a for a in demo_argv]
    (tmp_path / "prometheus.yml").write_text(config.replace(RECIPE_PORT, metrics_port), "utf-8")
    with open(tmp_path / "prometheus.log", "wb") as log:
        prometheus = subprocess.Popen(
            [prometheus_bin, *prometheus_argv[1:], f"--web.listen-address=127.0.0.1:{web_port}"],
            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=log, stdin=subprocess.DEVNULL,
        )  # fmt: skip
    demo: DemoProcess = start_demo(demo_argv[2:])
    expr = panel_expression()
    rates: list[float] = []
    try:
        served = demo.wait_for_line(r"serving (http://\S+/metrics)", 120).group(1)
        assert served == f"http://127.0.0.1:{metrics_port}/metrics"
        # before the sidecar consumed anything: the labelled series exist, at 0
        zero = series_at_zero(served)
        for name in ("rag_monitor_scored_weight_total", "rag_monitor_hallucination_weight_total"):
            routes = {dict(labels)["route"] for labels in zero.get(name, set())}
            assert {"other", "none"} <= routes, (name, routes)
        assert (("reason", "schema"),) in zero["rag_monitor_records_invalid_total"]
        assert (("reason", "budget_thinned"),) in zero["rag_monitor_records_skipped_total"]

        def a_rate() -> bool:
            assert demo.proc.poll() is None, "".join(demo.stderr)
            if "rag-monitor demo — report" in demo.output:
                raise AssertionError("the paced run ended before Prometheus saw a rate")
            found = [float(r["value"][1]) for r in query(web_port, expr)]
            rates[:] = [v for v in found if math.isfinite(v) and v > 0]
            return bool(rates)

        wait_until_sync(
            a_rate, 180, lambda: f"a rate from {expr!r}:\n{''.join(demo.stderr)}", interval=1.0
        )
        up = query(web_port, 'up{job="rag-monitor-demo"}')
        assert [r["value"][1] for r in up] == ["1"]
        # a ratio of two rates Prometheus extrapolates each on its own (a series whose
        # window starts near 0 is extrapolated less): a few records into a run it can
        # pass 1 by a little (1.05 seen); a swapped or wrong expression is far off
        assert all(0 < v <= 1.25 for v in rates), rates

        def reported() -> bool:
            assert demo.proc.poll() is None, demo.output
            return f"/metrics:     {served} (up for 600 s after this report)" in demo.output

        wait_until_sync(reported, 180, lambda: f"the report's /metrics line:\n{demo.output}")
    finally:
        code = demo.stop()
        prometheus.terminate()
        prometheus.wait(30)
    assert code == 0, "".join(demo.stderr)
    demo.assert_nothing_left()


def test_the_reports_metrics_lines_with_and_without_hold() -> None:
    report = DemoReport(judge="local judge", judge_kind="local")
    report.metrics_url = "http://127.0.0.1:9108/metrics"
    without = report.render()
    assert "/metrics:     http://127.0.0.1:9108/metrics was up during the run" in without
    assert "scrape_configs" not in without and "--hold SECONDS" in without
    report.hold_seconds = 600
    held = report.render()
    assert "/metrics:     http://127.0.0.1:9108/metrics (up for 600 s after this report)" in held
    assert "static_configs: [{targets: ['127.0.0.1:9108']}]" in held
    assert "dashboards/rag-monitor.json" in held and "dashboards/rag-monitor.json" in without
    report.review = True  # --review: everything stays up until Ctrl-C, whatever --hold says
    reviewed = report.render()
    assert "/metrics:     http://127.0.0.1:9108/metrics (up after this report until Ctrl-C)" in (
        reviewed
    )
    assert "up for 600 s" not in reviewed and "static_configs" in reviewed
