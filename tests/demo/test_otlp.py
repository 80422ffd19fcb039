"""`rag-monitor demo --traffic-format otlp`: the traffic as OpenInference traces, same report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.support import ROOT

RECORDS = 24


def demo_report(tmp_path: Path, traffic_format: str) -> dict[str, Any]:
    report = tmp_path / f"{traffic_format}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
    env["PYTHONPATH"] = str(ROOT)
    command = [sys.executable, "-m", "monitor", "demo", "--records", str(RECORDS),
               "--traffic-format", traffic_format, "--report-json", str(report),
               "--workdir", str(tmp_path / "work")]  # fmt: skip
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240,
                            cwd=ROOT, stdin=subprocess.DEVNULL)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    out: dict[str, Any] = json.loads(report.read_text(encoding="utf-8"))
    return out


@pytest.mark.kafka
@pytest.mark.postgres
def test_otlp_traffic_gives_the_report_of_the_interaction_records(tmp_path: Path) -> None:
    records = demo_report(tmp_path, "interaction")
    traces = demo_report(tmp_path, "otlp")
    assert traces["consumed"] == 2 * RECORDS  # two span messages per trace
    assert traces["committed_offsets"] == 2 * RECORDS
    assert traces["invalid"] == 0 and traces["skipped"] == {}
    for key in ("scored", "flagged", "hallucination", "flags_any", "flags_hallucination",
                "flagged_by_label", "flag_reasons"):  # fmt: skip
        assert traces[key] == records[key], key

    # control answers are drawn by a hash of the interaction id, and a trace's id is its
    # trace id: the flagged rows are the same, the control rows are another draw
    def flagged_queued(report: dict[str, Any]) -> int:
        return int(report["backlog_interactions"]) - int(report["backlog_controls"])

    assert flagged_queued(traces) == flagged_queued(records) > 0
    # the offline means are over the annotated rows, controls included: another draw of
    # controls gives other means, so only their shape is compared
    assert traces["offline_means"].keys() == records["offline_means"].keys()
    assert all(0.0 <= v <= 1.0 for v in traces["offline_means"].values())
    assert traces["scored"] == RECORDS
