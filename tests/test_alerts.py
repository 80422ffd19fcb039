"""The Prometheus rules in dashboards/alerts.yaml: syntax, unit tests, runbook links.

promtool comes from the Debian package ``prometheus``. Without it the tests
skip on a workstation and fail in CI (``CI`` set), so CI cannot go green
without running them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "dashboards" / "alerts.yaml"
RULE_TESTS = sorted((ROOT / "dashboards" / "tests").glob("*.yaml"))
RUNBOOK = ROOT / "docs" / "runbook.md"
RUNBOOK_PREFIX = "https://github.com/rag-monitor/rag-monitor/blob/main/docs/runbook.md#"


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool not found; install the Debian package `prometheus`")
        pytest.skip("promtool not found (apt-get install prometheus)")
    return found


def run_promtool(*args: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool(), *map(str, args)],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def alerts() -> list[dict[str, object]]:
    doc = yaml.safe_load(RULES.read_text(encoding="utf-8"))
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
        assert isinstance(labels, dict) and labels["severity"] in {"page", "ticket"}


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
        "rag_monitor:hallucination_ratio:rate5m > (14.4 * 0.05)",
        "rag_monitor:hallucination_ratio:rate5m >= 0",
    ),
    "page long window": (
        "rag_monitor:hallucination_ratio:rate1h > (14.4 * 0.05)",
        "rag_monitor:hallucination_ratio:rate1h >= 0",
    ),
    "ticket burn rate": ("(6 * 0.05)", "(3 * 0.05)"),
    "spike baseline": ("[1h] offset 1d", "[1h]"),
    "judge volume guard": (
        "rag_monitor_judge_requests_total[10m])) >= 20",
        "rag_monitor_judge_requests_total[10m])) >= 0",
    ),
    "budget duration": ("for: 30m", "for: 5m"),
    "lag growth": ("deriv(rag_monitor:consumer_lag:sum[15m]) > 0", "vector(1) > 0"),
    "lag dedup": ("max by (namespace, job, partition)", "sum by (namespace, job, partition)"),
    "absent up == 1": ('rag-monitor.*"} == 1)', 'rag-monitor.*"})'),
    "precision evidence": ('verdict=~"confirmed|false_alarm"', 'verdict=~".+"'),
    "precision level": ("(rag_monitor_flag_precision) < 0.5", "(rag_monitor_flag_precision) < 1"),
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
