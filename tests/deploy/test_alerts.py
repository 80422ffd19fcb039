"""The Prometheus rules: dashboards/alerts.yaml and the chart's renderings of them.

The rules are defined once, in the Helm chart (templates/_rules.tpl, tuned by
its `prometheusRule` values); dashboards/alerts.yaml is their rendering at the
default values (scripts/render_alerts.py, through Helm's Go SDK). promtool
checks and unit-tests that file, and a rendering at non-default values
(dashboards/tests/tuned/).

promtool comes from the Debian package ``prometheus``. Without it the tests
skip on a workstation and fail in CI (``CI=true``; `tests.support.tools`), so CI
cannot go green without running them.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType
from typing import Any

import helm_python as helm
import pytest
import yaml

from tests.support import ROOT, load_script
from tests.support.tools import require_tool

RULES = ROOT / "dashboards" / "alerts.yaml"
RULE_TESTS = sorted((ROOT / "dashboards" / "tests").glob("*.yaml"))
RUNBOOK = ROOT / "docs" / "runbook.md"
RUNBOOK_PREFIX = "https://github.com/rag-monitor/rag-monitor/blob/main/docs/runbook.md#"
TUNED = ROOT / "dashboards" / "tests" / "tuned"


def render_script() -> ModuleType:
    return load_script("scripts/render_alerts.py")


def promtool() -> str:
    return require_tool("promtool", "prometheus")


def run_promtool(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def alerts(text: str | None = None) -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8") if text is None else text)
    return [rule for group in doc["groups"] for rule in group["rules"] if "alert" in rule]


def test_rules_file_passes_promtool_check() -> None:
    result = run_promtool("check", "rules", RULES)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_rule_unit_tests_pass() -> None:
    assert RULE_TESTS, "no promtool unit tests in dashboards/tests"
    result = run_promtool("test", "rules", *RULE_TESTS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_alert_is_unit_tested_firing_and_quiet() -> None:
    fired: set[str] = set()
    quiet: set[str] = set()
    for path in RULE_TESTS:
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        for group in doc["tests"]:
            for case in group.get("alert_rule_test", []):
                expected = case.get("exp_alerts") or []
                (fired if expected else quiet).add(case["alertname"])
    names = {str(rule["alert"]) for rule in alerts()}
    assert names - fired == set(), "alerts never proven to fire"
    assert names - quiet == set(), "alerts never proven to stay quiet"


def runbook_anchors() -> set[str]:
    anchors = set()
    for line in RUNBOOK.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return anchors


def test_every_alert_links_its_runbook_section() -> None:
    anchors = runbook_anchors()
    for rule in alerts():
        annotations = rule["annotations"]
        assert isinstance(annotations, dict)
        url = str(annotations["runbook_url"])
        assert url.startswith(RUNBOOK_PREFIX), url
        assert url.removeprefix(RUNBOOK_PREFIX) == str(rule["alert"]).lower()
        assert url.removeprefix(RUNBOOK_PREFIX) in anchors, f"no runbook section for {url}"
        labels = rule["labels"]
        assert isinstance(labels, dict) and labels["severity"] in {"critical", "warning"}


def test_rules_file_is_the_charts_default_rendering() -> None:
    assert RULES.read_text(encoding="utf-8") == render_script().render_rules(), (
        "dashboards/alerts.yaml is out of date: run python3 scripts/render_alerts.py"
    )


def test_default_severities_are_critical_for_the_fast_burn_and_warning_otherwise() -> None:
    severities = {rule["alert"]: rule["labels"]["severity"] for rule in alerts()}
    assert severities.pop("RagMonitorHallucinationBudgetBurnFast") == "critical"
    assert set(severities.values()) == {"warning"}


# --- the rules at non-default chart values -----------------------------------


def tuned_values() -> dict[str, Any]:
    values: dict[str, Any] = yaml.safe_load((TUNED / "values.yaml").read_text(encoding="utf-8"))
    return values


def test_tuned_rendering_passes_its_promtool_tests(tmp_path: Path) -> None:
    text = render_script().render_rules(tuned_values())
    (tmp_path / "alerts.yaml").write_text(text, encoding="utf-8")
    shutil.copy(TUNED / "tuned.yaml", tmp_path / "tuned.yaml")
    check = run_promtool("check", "rules", "alerts.yaml", cwd=tmp_path)
    assert check.returncode == 0, check.stdout + check.stderr
    result = run_promtool("test", "rules", "tuned.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_tuned_promtool_tests_fail_against_the_default_rules(tmp_path: Path) -> None:
    shutil.copy(RULES, tmp_path / "alerts.yaml")
    shutil.copy(TUNED / "tuned.yaml", tmp_path / "tuned.yaml")
    result = run_promtool("test", "rules", "tuned.yaml", cwd=tmp_path)
    assert result.returncode != 0, "the tuned cases pass at the defaults: they test nothing"
    for name in ("fast burn", "slow burn", "calibrated rate above a 2% SLO",
                 "no context above 10%", "judge errors", "lag above 50"):  # fmt: skip
        assert f"name: {name}" in result.stdout + result.stderr, name


def test_tuned_values_reach_every_alert() -> None:
    rules = alerts(render_script().render_rules(tuned_values()))
    names = {rule["alert"] for rule in rules}
    assert names == {rule["alert"] for rule in alerts()} - {"RagMonitorAbsent"}
    for rule in rules:
        assert rule["labels"]["team"] == "search"
        assert rule["annotations"]["runbook_url"] == (
            "https://wiki.example.com/rag/runbook#" + rule["alert"].lower()
        )
    by_name = {rule["alert"]: rule for rule in rules}
    assert by_name["RagMonitorHallucinationBudgetBurnFast"]["for"] == "5m"
    assert "(10 * 0.02)" in by_name["RagMonitorHallucinationBudgetBurnFast"]["expr"]
    assert "increase6h >= 20" in by_name["RagMonitorHallucinationBudgetBurnSlow"]["expr"]
    assert "increase1h >= 20" in by_name["RagMonitorHallucinationSpike"]["expr"]


def test_every_alert_off_leaves_the_recording_rules(tmp_path: Path) -> None:
    off = {name: {"enabled": False} for name in {str(rule["alert"]) for rule in alerts()}}
    text = render_script().render_rules({"prometheusRule": {"alerts": off}})
    groups = [group["name"] for group in yaml.safe_load(text)["groups"]]
    assert groups == ["rag-monitor.recording"]
    (tmp_path / "alerts.yaml").write_text(text, encoding="utf-8")
    result = run_promtool("check", "rules", "alerts.yaml", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_alert_durations_must_be_prometheus_durations() -> None:
    chart = helm.Chart.load(str(ROOT / "helm" / "rag-monitor"))
    with pytest.raises(helm.HelmError):
        chart.validate_schema(
            {"prometheusRule": {"alerts": {"RagMonitorAbsent": {"for": "10 minutes"}}}}
        )


# Each mutation removes one guard from the rules; the unit tests must notice.
MUTATIONS = {
    "page volume guard": (
        "rag_monitor:records_scored:increase1h >= 100",
        "rag_monitor:records_scored:increase1h >= 0",
    ),
    "ticket volume guard": (
        "rag_monitor:records_scored:increase6h >= 100",
        "rag_monitor:records_scored:increase6h >= 0",
    ),
    "page short window": (
        'rag_monitor:hallucination_ratio:rate5m{judge="llm"} > (14.4 * 0.05)',
        'rag_monitor:hallucination_ratio:rate5m{judge="llm"} >= 0',
    ),
    "page long window": (
        'rag_monitor:hallucination_ratio:rate1h{judge="llm"} > (14.4 * 0.05)',
        'rag_monitor:hallucination_ratio:rate1h{judge="llm"} >= 0',
    ),
    # no page from a judge's known bias: the local judge's raw rate is not held to the SLO
    "burn on any judge": ('{judge="llm"}', ""),
    "ratios across judges": ("sum by (namespace, job, judge)", "sum by (namespace, job)"),
    "calibrated point, not its lower bound": (
        "(rag_monitor_hallucination_rate_calibrated_lower) > 0.05",
        "(rag_monitor_hallucination_rate_calibrated) > 0.05",
    ),
    "calibrated duration": (
        "for: 1h\n        labels:\n          severity: warning\n        "
        "annotations:\n          summary: \"Reviewers' verdicts",
        "for: 1m\n        labels:\n          severity: warning\n        "
        "annotations:\n          summary: \"Reviewers' verdicts",
    ),
    "ticket burn rate": ("(6 * 0.05)", "(3 * 0.05)"),
    "spike baseline": ("[1h] offset 1d", "[1h]"),
    "judge volume guard": (
        "rag_monitor_judge_requests_total[10m])) >= 20",
        "rag_monitor_judge_requests_total[10m])) >= 0",
    ),
    "budget duration": ("for: 30m", "for: 5m"),
    "idle replica guard": (
        "(rag_monitor_token_budget_share) == 0",
        "(rag_monitor_token_budget_share) == 42",
    ),
    "exhausted despite a share": (
        "(rag_monitor_token_budget_share) == 0",
        "(rag_monitor_token_budget_share) >= 0",
    ),
    "lag growth": ("deriv(rag_monitor:consumer_lag:sum[15m]) > 0", "vector(1) > 0"),
    "lag dedup": ("max by (namespace, job, partition)", "sum by (namespace, job, partition)"),
    "absent up == 1": ('rag-monitor.*"} == 1)', 'rag-monitor.*"})'),
    # flag precision: the last 7 days' verdicts, against a level (LLM judge) or the judge's own
    "precision evidence": ('verdict=~"confirmed|false_alarm"', 'verdict=~".+"'),
    "precision volume guard": (
        "rag_monitor:review_verdicts:informative7d >= 30",
        "rag_monitor:review_verdicts:informative7d >= 0",
    ),
    "precision level": (
        "rag_monitor:flag_precision:last7d < 0.5",
        "rag_monitor:flag_precision:last7d < 0.3",
    ),
    # the local judge's steady precision is no news: the level is an LLM judge's only
    "precision level for any judge": ('{kind="llm", role="primary"}', ""),
    "precision against its own past": (
        "(rag_monitor:flag_precision:before7d - 0.2)",
        "(rag_monitor:flag_precision:before7d + 0.2)",
    ),
    "precision's past on few verdicts": (
        "rag_monitor:review_verdicts:informative offset 7d >= 30",
        "rag_monitor:review_verdicts:informative offset 7d >= 0",
    ),
    "precision replicas counted once": (
        "max by (namespace, job, reason, verdict) (",
        "sum by (namespace, job, reason, verdict) (",
    ),
    "control answers are no flag": ('reason!="control"', 'reason!="none"'),
    "no-context level": (
        "rag_monitor:no_context_ratio:rate30m > 0.2",
        "rag_monitor:no_context_ratio:rate30m > 0.01",
    ),
    "no-context share of all scored answers": (
        "sum by (namespace, job) (rate(rag_monitor_scored_weight_total[30m]))\n          )",
        "sum by (namespace, job) (rate(rag_monitor_scored_weight_total[30m])) * 0\n          )",
    ),
}


@pytest.mark.parametrize("name", sorted(MUTATIONS))
def test_unit_tests_catch_a_weakened_rule(name: str, tmp_path: Path) -> None:
    old, new = MUTATIONS[name]
    text = RULES.read_text(encoding="utf-8")
    assert text.count(old) >= 1, f"mutation {name!r} no longer applies"
    (tmp_path / "alerts.yaml").write_text(text.replace(old, new), encoding="utf-8")
    tests_dir = tmp_path / "tests"
    tests_dir.mkdir()
    for path in RULE_TESTS:
        shutil.copy(path, tests_dir / path.name)
    result = run_promtool("test", "rules", *sorted(tests_dir.iterdir()), cwd=tmp_path)
    assert result.returncode != 0, f"weakening {name!r} went unnoticed"
