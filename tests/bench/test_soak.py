"""The soak's short version as a regression test: two real replicas at load on noida-db (and on
Tansu with its log in an S3 server), each killed and restarted once, the broker restarted once
(bench/soak.py, two minutes).

The long soak is a benchmark run by hand; docs/benchmarks.md has its table.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.benches import BENCH_MARKS, run_bench

pytestmark = BENCH_MARKS


def test_the_short_soak_loses_nothing_duplicates_nothing_and_keeps_the_budget(
    tmp_path: Path,
) -> None:
    out = tmp_path / "soak.json"
    ran = run_bench("bench.soak", "--rate", "100", "--minutes", "2", "--interval", "30",
                    "--kill-every", "40", "--restart-after", "10", "--broker-down", "8",
                    "--catch-up", "180", "--json", str(out), "--clean")  # fmt: skip
    output = ran.output
    assert out.exists(), output
    soak = json.loads(out.read_text())
    if soak["orphaned"] or soak["shared"]:
        # noida-db 0.2.3 gives a rejoining static member an assignment computed afresh
        # without rebalancing the other member (docs/operations.md): what it left to nobody
        # is lost to every consumer; the sidecar must have lost nothing anywhere else
        elsewhere = {p: n for p, n in soak["lost_by_partition"].items()
                     if int(p) not in soak["orphaned"] and n}  # fmt: skip
        assert not elsewhere and soak["dup_backlog"] == 0, output
        pytest.skip(f"the broker left partitions {soak['orphaned']} to no replica and gave "
                    f"{soak['shared']} to both (noida-db's static-membership fault)")  # fmt: skip
    assert soak["produced"] >= 100 * 60, output  # at least half the rate got through
    assert soak["caught_up"], output
    assert soak["lost"] == 0 and soak["dup_backlog"] == 0, output
    assert 0 < soak["budget"] <= 1.0, output
    events = [r["event"] for r in soak["recoveries"]]
    assert events == ["r1 restarted", "broker restarted", "r0 restarted"], output
    # back under one minute of traffic within 60 s of every restart
    assert all(r["seconds"] is not None and r["seconds"] <= 60 for r in soak["recoveries"]), output
    # the broker's restart says when it answered again, no later than the lag came back
    [broker] = [r for r in soak["recoveries"] if r["event"] == "broker restarted"]
    assert broker["answered"] is not None and broker["answered"] <= broker["seconds"], output
    assert all(r["answered"] is None for r in soak["recoveries"] if r is not broker), output
    scored = sum(r["scored"] for r in soak["intervals"])
    assert scored > 0, output
    assert ran.returncode == 0, output


def test_the_short_soak_on_tansu_with_its_log_in_s3_keeps_the_log_through_the_broker_restart(
    tmp_path: Path,
) -> None:
    """Tansu on its ``s3://`` storage engine (an S3 server on 127.0.0.1): its restart keeps
    the log and the commits, so the broker restart runs on Tansu too, and the replicas'
    memory stays under the 500 MiB line through it (Tansu honours the fetch limits)."""
    out = tmp_path / "soak.json"
    # the producer gathers 100 ms per batch: each batch is one object in the S3 server
    ran = run_bench("bench.soak", "--broker", "tansu-s3", "--linger", "100", "--rate", "100",
                    "--minutes", "2", "--interval", "30", "--kill-every", "40",
                    "--restart-after", "10", "--broker-down", "8", "--catch-up", "180",
                    "--json", str(out), "--clean")  # fmt: skip
    output = ran.output
    assert out.exists(), output
    soak = json.loads(out.read_text())
    assert soak["produced"] >= 100 * 60, output
    assert soak["caught_up"], output
    assert soak["lost"] == 0 and soak["dup_backlog"] == 0, output
    # every record the broker acknowledged was still in its log at the end
    assert soak["broker_missing"] == 0, output
    assert 0 < soak["budget"] <= 1.0, output
    events = [r["event"] for r in soak["recoveries"]]
    assert events == ["r1 restarted", "broker restarted", "r0 restarted"], output
    assert all(r["seconds"] is not None and r["seconds"] <= 60 for r in soak["recoveries"]), output
    peak_mib = max(mib for row in soak["intervals"] for mib in row["rss_max"].values())
    assert peak_mib < 500, output
    assert ran.returncode == 0, output
