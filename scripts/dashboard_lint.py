#!/usr/bin/env python3
"""Check and fix the deployment filters of the Grafana dashboard.

Every panel of dashboards/rag-monitor.json reads the data source of the
`datasource` variable, and every rag-monitor series it selects carries
``namespace=~"$namespace"`` and ``job=~"$job"``, so one dashboard serves many
deployments without adding them up. ``--fix`` makes it so mechanically (adds
the variables, adds the matchers to every selector that lacks them, adds the
budget-share panel) and writes the chart's copy too; run it again after
merging panels from elsewhere. tests/deploy/test_dashboard.py calls `problems`.

Usage::

    python3 scripts/dashboard_lint.py           # list problems, exit 1 if any
    python3 scripts/dashboard_lint.py --fix     # fix them in both files
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "dashboards" / "rag-monitor.json"
CHART_COPY = ROOT / "helm" / "rag-monitor" / "files" / "rag-monitor.json"

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
#: The matchers every selector carries, in the order they are inserted.
FILTERS = {"namespace": "$namespace", "job": "$job"}
#: A string literal (skipped) or a rag-monitor metric name with its optional selector.
TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|(?P<name>\brag_monitor[\w:]*)(?P<sel>\{[^}]*\})?')
MATCHER = re.compile(r'(?P<label>\w+)\s*(?P<op>=~|!~|!=|=)\s*"(?P<value>(?:[^"\\]|\\.)*)"')
BUDGET_SHARE_TITLE = "Token budget share by replica"


def selectors(expr: str) -> Iterator[tuple[str, dict[str, tuple[str, str]]]]:
    """(metric name, {label: (operator, value)}) of every rag-monitor selector in a query."""
    for match in TOKEN.finditer(expr):
        if match["name"]:
            body = match["sel"] or "{}"
            yield (
                match["name"],
                {m["label"]: (m["op"], m["value"]) for m in MATCHER.finditer(body[1:-1])},
            )


def missing_filters(matchers: dict[str, tuple[str, str]], wanted: dict[str, str]) -> list[str]:
    return [label for label, var in wanted.items() if matchers.get(label) != ("=~", var)]


def add_filters(expr: str, wanted: dict[str, str] = FILTERS) -> str:
    """The query with `wanted` matchers added to every rag-monitor selector lacking them."""

    def fix(match: re.Match[str]) -> str:
        if not match["name"]:
            return match[0]
        body = (match["sel"] or "{}")[1:-1]
        have = {m["label"]: (m["op"], m["value"]) for m in MATCHER.finditer(body)}
        if any(label in have for label in missing_filters(have, wanted)):
            raise ValueError(f"{match[0]!r} filters {list(wanted)} some other way; fix it by hand")
        added = [f'{label}=~"{wanted[label]}"' for label in missing_filters(have, wanted)]
        if not added:
            return match[0]
        inner = ",".join([*added, body] if body.strip() else added)
        return f"{match['name']}{{{inner}}}"

    return TOKEN.sub(fix, expr)


def panels(dashboard: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for panel in dashboard["panels"]:
        yield panel
        yield from panel.get("panels", [])


def variable_filters(name: str) -> dict[str, str]:
    """What a template variable's own query filters by: the variables before it."""
    order = list(FILTERS)
    return {k: FILTERS[k] for k in order[: order.index(name)]} if name in FILTERS else FILTERS


def problems(dashboard: dict[str, Any]) -> list[str]:
    """Everything that keeps the dashboard from filtering by data source, namespace and job."""
    found: list[str] = []
    variables = [v["name"] for v in dashboard["templating"]["list"]]
    if variables[:3] != ["datasource", *FILTERS]:
        found.append(f"variables start {variables[:3]}, not datasource, namespace, job")
    for variable in dashboard["templating"]["list"]:
        if variable["type"] != "query":
            continue
        query = variable["query"]["query"] if isinstance(variable["query"], dict) else ""
        for name, matchers in selectors(query):
            for label in missing_filters(matchers, variable_filters(variable["name"])):
                found.append(f"variable {variable['name']}: {name} lacks {label}")
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        title = panel["title"]
        if panel.get("datasource") != DATASOURCE:
            found.append(f"{title!r}: datasource is not ${{datasource}}")
        for target in panel.get("targets", []):
            if target.get("datasource") != DATASOURCE:
                found.append(f"{title!r} {target['refId']}: datasource is not ${{datasource}}")
            for name, matchers in selectors(target["expr"]):
                for label in missing_filters(matchers, FILTERS):
                    found.append(f"{title!r} {target['refId']}: {name} lacks {label}")
    return found


def query_variable(name: str, label: str, query: str) -> dict[str, Any]:
    return {
        "name": name,
        "label": label,
        "type": "query",
        "datasource": dict(DATASOURCE),
        "definition": query,
        "query": {"query": query, "refId": "PrometheusVariableQueryEditor-VariableQuery"},
        "refresh": 2,
        "includeAll": True,
        "allValue": ".*",
        "multi": True,
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "sort": 1,
        "hide": 0,
        "regex": "",
        "options": [],
    }


def budget_share_panel(panel_id: int, y: int) -> dict[str, Any]:
    share = 'rag_monitor_token_budget_share{namespace=~"$namespace",job=~"$job"}'
    return {
        "type": "timeseries",
        "id": panel_id,
        "title": BUDGET_SHARE_TITLE,
        "description": (
            "Each replica spends token_budget x its assigned partitions / the topic's "
            "partitions, recomputed on every rebalance; the shares of a deployment add up to 1."
        ),
        "datasource": dict(DATASOURCE),
        "gridPos": {"h": 6, "w": 24, "x": 0, "y": y},
        "targets": [
            {
                "refId": "A",
                "datasource": dict(DATASOURCE),
                "expr": f"max by (namespace, job, instance) ({share})",
                "legendFormat": "{{instance}}",
            },
            {
                "refId": "B",
                "datasource": dict(DATASOURCE),
                "expr": f"sum by (namespace, job) ({share})",
                "legendFormat": "{{job}} total",
            },
        ],
        "fieldConfig": {"defaults": {"unit": "percentunit", "min": 0}, "overrides": []},
        "options": {
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "none"},
        },
    }


def add_budget_share(dashboard: dict[str, Any]) -> None:
    """The budget-share panel under the Judge row's panels; what is below moves down."""
    if any(p["title"] == BUDGET_SHARE_TITLE for p in panels(dashboard)):
        return
    top = dashboard["panels"]
    (judge,) = [i for i, p in enumerate(top) if p["type"] == "row" and p["title"] == "Judge"]
    end = next((i for i in range(judge + 1, len(top)) if top[i]["type"] == "row"), len(top))
    y = max(p["gridPos"]["y"] + p["gridPos"]["h"] for p in top[judge + 1 : end])
    panel = budget_share_panel(max(p["id"] for p in panels(dashboard)) + 1, y)
    for later in top[end:]:
        later["gridPos"]["y"] += panel["gridPos"]["h"]
        for inner in later.get("panels", []):
            inner["gridPos"]["y"] += panel["gridPos"]["h"]
    top.insert(end, panel)


def fix(dashboard: dict[str, Any]) -> dict[str, Any]:
    """Variables, datasources and matchers as `problems` wants them (idempotent)."""
    variables = dashboard["templating"]["list"]
    names = [v["name"] for v in variables]
    at = names.index("datasource") + 1
    if "namespace" not in names:
        query = "label_values(rag_monitor_sample_rate, namespace)"
        variables.insert(at, query_variable("namespace", "Namespace", query))
    if "job" not in names:
        query = 'label_values(rag_monitor_sample_rate{namespace=~"$namespace"}, job)'
        variables.insert(at + 1, query_variable("job", "Job", query))
    for variable in variables:
        if variable["type"] == "query" and isinstance(variable["query"], dict):
            query = add_filters(variable["query"]["query"], variable_filters(variable["name"]))
            variable["query"]["query"] = variable["definition"] = query
    add_budget_share(dashboard)
    for panel in panels(dashboard):
        if panel["type"] == "row":
            continue
        panel["datasource"] = dict(DATASOURCE)
        for target in panel.get("targets", []):
            target["datasource"] = dict(DATASOURCE)
            target["expr"] = add_filters(target["expr"])
    return dashboard


def dump(dashboard: dict[str, Any]) -> str:
    return json.dumps(dashboard, indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fix", action="store_true", help="fix both files in place")
    args = parser.parse_args(argv)
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    if args.fix:
        text = dump(fix(dashboard))
        DASHBOARD.write_text(text, encoding="utf-8")
        CHART_COPY.write_text(text, encoding="utf-8")
        dashboard = json.loads(text)
    found = problems(dashboard)
    for problem in found:
        print(problem, file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
