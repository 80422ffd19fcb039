"""The load of a score run, the options `bench.ingest` and `bench.memory` share.

A module of its own, below both: `bench.memory` measures what the sidecar's imports cost,
so it reads these options before it imports `bench.ingest` (and all that ingest imports).
"""

from __future__ import annotations

import argparse


def load_options(parser: argparse.ArgumentParser) -> None:
    """The load of a score run: broker, records, partitions, judge latency, records in
    flight and the scorer's window."""
    parser.add_argument("--broker", choices=["noida", "tansu"], default="noida")
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.3)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--window", type=float, default=20.0)
