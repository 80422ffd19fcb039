"""`rag-monitor demo --traffic-format otlp`: the traffic as OpenInference traces, same report."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
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
                "flagged_by_label", "flag_reasons", "backlog_rows", "annotated"):  # fmt: skip
        assert traces[key] == records[key], key
    # the rows differ in id (trace ids): the means add up in another order
    assert traces["offline_means"] == pytest.approx(records["offline_means"])
    assert traces["scored"] == RECORDS
