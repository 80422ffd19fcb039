"""The fault bench's short version as a regression test: a replica killed for good, the broker
restarted under load and Postgres down, each on real processes (bench/faults.py --quick).

The full bench (every scenario, the soak, the throughput table) is a benchmark run by hand;
docs/operations.md has its table. This keeps the three faults the issue names for CI.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.benches import BENCH_MARKS, run_bench

pytestmark = BENCH_MARKS


def test_nothing_is_lost_duplicated_or_overspent_under_the_short_fault_bench(
    tmp_path: Path,
) -> None:
    rows_file = tmp_path / "rows.json"
    ran = run_bench(
        "bench.faults",
        "--quick",
        "--scenarios",
        "kill,broker,postgres",
        "--json",
        str(rows_file),
        "--clean",
    )
    output = ran.output
    assert rows_file.exists(), output
    rows = {row["scenario"]: row for row in json.loads(rows_file.read_text())}
    assert set(rows) == {"kill", "broker", "postgres"}, output
    for name, row in rows.items():
        assert "FAILED" not in row["note"] and "NOT CAUGHT UP" not in row["note"], (name, output)
        assert row["produced"] > 0 and row["scored"] > 0, (name, output)
        assert row["lost"] == 0, (name, output)
        assert row["dup_backlog"] == 0 and row["backlog_missing"] == 0, (name, output)
        # at most the budget and one record's tokens (bench.faults.over_budget), on every
        # broker: the kill row runs on Tansu, which drops offset-commit metadata
        assert 0 < row["budget_record"] < 0.01, (name, output)
        assert row["budget"] <= 1.0 + row["budget_record"], (name, output)
    assert ran.returncode == 0, output
