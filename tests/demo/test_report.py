"""The demo's report against everything else that shows its figures, on one demo run.

One run of ``rag-monitor demo`` (real broker, real Postgres, the local judge), held
open with ``--hold``: the printed report, the JSON report, ``/metrics`` and
``rag-monitor backlog stats`` (text and ``--json``, run against the demo's
Postgres) must give the same hallucination rates, flag precision, backlog sizes,
control count and verdict count. Also the report's text: the calibrated rate leads,
the raw one says what bounds the judge's error, and numbers are rounded for people.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from monitor.demo.production import AtProduction
from monitor.demo.report import DemoReport
from monitor.demo.statistics import RateEstimate
from monitor.flags import hallucination_rule
from tests.support.demo import backlog_cli, start_demo, wait_for_report

P = "rag_monitor_"


def scrape(url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value."""
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode("utf-8")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def by_label(metrics: dict[Any, float], name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = {}
    for (sample, labels), value in metrics.items():
        if sample == name:
            key = dict(labels)[label]
            out[key] = out.get(key, 0.0) + value
    return out


def total(metrics: dict[Any, float], name: str) -> float:
    return sum(v for (sample, _), v in metrics.items() if sample == name)


def one(metrics: dict[Any, float], name: str) -> float:
    values = [v for (sample, _), v in metrics.items() if sample == name]
    assert len(values) == 1, (name, values)
    return values[0]


@pytest.mark.kafka
@pytest.mark.postgres
def test_report_json_metrics_and_backlog_stats_agree(tmp_path: Path) -> None:
    report_path = tmp_path / "report.json"
    demo = start_demo(
        [
            "--records",
            "100",
            "--workdir",
            str(tmp_path / "work"),
            "--report-json",
            str(report_path),
            "--hold",
            "300",
        ]  # fmt: skip
    )
    try:
        report = wait_for_report(report_path, demo, timeout=240, printed=True)
        metrics = scrape(report["metrics_url"])
        stats = json.loads(backlog_cli(report["pg_dsn"], "stats", "--json"))
        stats_text = backlog_cli(report["pg_dsn"], "stats")
        printed = demo.output
        code = demo.stop()  # ends the hold
    finally:
        demo.close()
    assert code == 0, "".join(demo.stderr)
    cal = stats["calibration"]
    assert report["review_verdicts"] > 0 and cal["calibrated_rate"] is not None

    # --- the raw rate: the sidecar's counters = the JSON = the backlog's traffic totals
    h = report["hallucination"]
    counters = total(metrics, P + "hallucination_weight_total") / total(
        metrics, P + "scored_weight_total"
    )
    assert h["rate"] == pytest.approx(counters, abs=1e-12)
    assert cal["raw_rate"] == pytest.approx(counters, abs=1e-12)
    assert cal["traffic"]["scored"] == h["n"] and cal["traffic"]["hallucinations"] == h["events"]

    # --- the calibrated rate and its interval: JSON = /metrics = backlog stats
    for ours, series, theirs in (
        ("calibrated_rate", "hallucination_rate_calibrated", "calibrated_rate"),
        ("calibrated_low", "hallucination_rate_calibrated_lower", "lower"),
        ("calibrated_high", "hallucination_rate_calibrated_upper", "upper"),
    ):
        assert report[ours] == pytest.approx(one(metrics, P + series), abs=1e-12), ours
        assert report[ours] == pytest.approx(cal[theirs], abs=1e-12), ours

    # --- flag precision and the reviews behind it
    precision = by_label(metrics, P + "flag_precision", "reason")
    assert {r: v for r, v in cal["flag_precision"].items() if v is not None} == pytest.approx(
        precision
    )
    assert report["flag_precision"] == pytest.approx(cal["flag_precision"])
    assert report["flag_reviewed"] == {r: cal["reviewed"][r] for r in report["flag_reviewed"]}
    assert report["control_hallucination_share"] == pytest.approx(
        one(metrics, P + "control_hallucination_share")
    )
    assert report["control_reviewed"] == cal["reviewed"]["control"]
    assert report["review_verdicts"] == total(metrics, P + "review_verdicts_total")
    assert report["review_verdicts"] == cal["verdicts"]

    # --- the backlog: rows per status, interactions, controls, what was queued per reason
    assert report["backlog_status"] == stats["counts"]
    sizes = by_label(metrics, P + "backlog_size", "status")
    assert sizes == {k: float(v) for k, v in stats["counts"].items()}
    assert sizes["evaluated"] == report["offline_evaluated"] > 0
    assert report["backlog_rows"] == stats["rows"]
    assert report["backlog_interactions"] == stats["interactions"]
    # /metrics has every reason's series from the start, at 0 until one is queued
    enqueued = {
        k: v for k, v in by_label(metrics, P + "backlog_enqueued_total", "reason").items() if v
    }
    assert enqueued == {k: float(v) for k, v in stats["interactions_by_reason"].items()}
    assert report["backlog_enqueued"] == stats["interactions_by_reason"]
    assert report["backlog_controls"] == stats["interactions_by_reason"]["control"] > 0

    # --- the text: the same figures, the calibrated rate first, rounded for people
    lines = printed.splitlines()
    rate_lines = [line for line in lines if line.startswith("hallucination rate:")]
    assert len(rate_lines) == 1
    assert rate_lines[0].startswith(
        f"hallucination rate: {report['calibrated_rate']:.1%} (95% interval "
        f"{report['calibrated_low']:.1%} – {report['calibrated_high']:.1%}), calibrated by "
        f"{report['review_verdicts']} reviewer verdicts"
    )
    # the rule the rate counts, said once beside it, in the text and the JSON
    assert report["hallucination_rule"] == hallucination_rule({})
    assert [line for line in lines if line.startswith("  counted:")] == [
        f"  counted:      {hallucination_rule({})}"
    ]
    assert f"  counted: {hallucination_rule({})}" in stats_text
    raw_line = next(line for line in lines if line.startswith("  raw (judge):"))
    assert f"{h['rate']:.1%} (95% CI {h['low']:.1%} – {h['high']:.1%};" in raw_line
    error_line = next(line for line in lines if line.startswith("  judge error:"))
    reviewed = report["flag_reviewed"]["hallucination"]
    assert f"flag precision {report['flag_precision']['hallucination']:.1%} ({reviewed} " in (
        error_line
    )
    assert f"n = {h['n']}" in printed and f"n = {h['n']}.0" not in printed
    assert f"{report['backlog_controls']} of them control" in printed
    assert f"now: evaluated {report['offline_evaluated']}" in printed
    for line in stats_text.splitlines():
        if line.startswith("hallucination rate, calibrated:"):
            assert f"{100 * report['calibrated_rate']:.1f}%" in line
        if line.startswith("hallucination rate, raw (judge):"):
            assert f"{100 * h['rate']:.1f}%" in line
    assert stats_text.index("calibrated:") < stats_text.index("raw (judge):")
    demo.assert_nothing_left()


def test_report_rounds_for_people_and_keeps_full_precision_in_json() -> None:
    report = DemoReport(judge="j", judge_kind="local")
    report.hallucination = RateEstimate(
        rate=1 / 3, low=0.2, high=0.5, n=255, events=85, effective_n=255.0,
        weighted_events=85.0, weighted_total=255.0, method="Wilson score interval, 95%",
    )  # fmt: skip
    report.offline_means = {"context_utility": 0.9999999999}
    text = report.render()
    assert text.startswith("rag-monitor demo — report\n")  # no empty line before it
    assert "n = 255\n" in text and "255.0" not in text
    assert "0.9999999999" not in text and "1.000" in text
    assert "not calibrated" in text  # no verdicts: the raw rate leads, and says so
    data = report.as_json()
    assert data["offline_means"]["context_utility"] == 0.9999999999
    assert data["hallucination"]["rate"] == 1 / 3


def test_a_calibrated_rate_on_the_end_of_its_interval_says_why() -> None:
    report = DemoReport(judge="j", judge_kind="local")
    report.calibrated_rate, report.calibrated_low, report.calibrated_high = 0.176, 0.176, 0.449
    report.control_hallucination_share, report.control_reviewed = 0.0, 2
    report.review_verdicts = 34
    lines = report.render().splitlines()
    at = lines.index("hallucination rate: 17.6% (95% interval 17.6% – 44.9%), calibrated by "
                     "34 reviewer verdicts")  # fmt: skip
    said = "at the interval's lower end: none of the 2 reviewed control answers was a "
    calibrated = next(i for i, line in enumerate(lines) if line.startswith("  calibrated:"))
    assert at < calibrated
    assert lines[calibrated + 1].strip().startswith(said + "hallucination")
    report.calibrated_low = 0.12
    assert "interval's lower end" not in report.render()


def test_the_calibrated_rate_at_production_volume_stands_next_to_the_played_reviewers() -> None:
    report = DemoReport(judge="j", judge_kind="local")
    report.calibrated_rate, report.calibrated_low, report.calibrated_high = 0.25, 0.204, 0.318
    report.review_verdicts, report.review_answers = 440, 255
    report.production = AtProduction(
        control_share=0.01, reviewed=255, rounds=200, controls=0.64, calibrated=92,
        rate=0.147, low=0.13, high=0.62,
    )  # fmt: skip
    lines = report.render().splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("  production:"))
    assert lines[at] == (
        "  production:   at the default control share (1%) the same 255 reviewed answers hold "
        "0.6 control answers on average (200 rounds simulated from this run):"
    )
    assert lines[at + 1] == (
        "                no calibrated rate in 54% of the rounds (no control verdict); in the "
        "others typically 14.7% (95% interval 13.0% – 62.0%)"
    )
    head = next(i for i, line in enumerate(lines) if line.startswith("hallucination rate:"))
    assert lines[head].startswith("hallucination rate: 25.0% (95% interval 20.4% – 31.8%)")
    assert head < at
    assert report.as_json()["production"]["controls"] == 0.64


def _calibrated_report(
    raw: float, calibrated: float, precision: float, control: float
) -> DemoReport:
    report = DemoReport(judge="j", judge_kind="local")
    report.hallucination = RateEstimate(
        rate=raw, low=raw - 0.05, high=raw + 0.05, n=255, events=round(raw * 255),
        effective_n=255.0, weighted_events=raw * 255, weighted_total=255.0,
        method="Wilson score interval, 95%",
    )  # fmt: skip
    report.calibrated_rate, report.calibrated_low, report.calibrated_high = (
        calibrated, calibrated - 0.03, calibrated + 0.05,
    )  # fmt: skip
    report.review_verdicts, report.review_answers = 470, 258
    report.flag_precision = {"hallucination": precision}
    report.flag_reviewed = {"hallucination": 126}
    report.control_hallucination_share, report.control_reviewed = control, 31
    report.control_share = 0.5
    report.production = AtProduction(
        control_share=0.01, reviewed=258, rounds=200, controls=0.7, calibrated=98,
        rate=0.2, low=0.18, high=0.6,
    )  # fmt: skip
    return report


def test_the_first_screen_says_why_the_raw_rate_is_off_and_where_the_controls_come_from() -> None:
    """One sentence under the calibrated rate: the gap to the raw rate, from the report's own
    figures, and its cause (the flags' precision); then where the control verdicts come from."""
    report = _calibrated_report(raw=0.506, calibrated=0.228, precision=0.388, control=0.065)
    lines = report.render().splitlines()
    head = next(i for i, line in enumerate(lines) if line.startswith("hallucination rate:"))
    assert head < 5
    assert lines[head + 1] == (
        "  in short:     the judge's raw rate, 50.6%, is 27.8 points (2.2 times) above the "
        "calibrated 22.8% because reviewers confirmed only 38.8% of its hallucination flags "
        "(61% were false alarms), which outweighs the 6.5% of reviewed unflagged answers that "
        "did hallucinate."
    )
    assert lines[head + 2] == (
        "  controls:     the 31 control verdicts are on unflagged answers this run queued for "
        "review at a control share of 50% and the labels judged, where production's default of "
        "1% would give far fewer (production below)"
    )
    # other figures, other words: nothing in the sentence is fixed text
    other = _calibrated_report(raw=0.30, calibrated=0.25, precision=0.8, control=0.0)
    said = next(line for line in other.render().splitlines() if "in short:" in line)
    assert "30.0%, is 5.0 points (1.2 times) above the calibrated 25.0%" in said
    assert "confirmed only 80.0%" in said and "outweighs" not in said
    # an LLM judge that misses more than it invents: the raw rate below, and why
    under = _calibrated_report(raw=0.10, calibrated=0.16, precision=0.9, control=0.08)
    said = next(line for line in under.render().splitlines() if "in short:" in line)
    assert "10.0%, is 6.0 points below the calibrated 16.0% because 8.0% of the reviewed " in said
    # no verdicts, no calibrated rate: no sentence to say
    bare = DemoReport(judge="j", judge_kind="local")
    bare.hallucination = report.hallucination
    assert "in short:" not in bare.render() and "controls:" not in bare.render()
