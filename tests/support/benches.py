"""Running a bench's short version from a test, as a separate process at the repository's root."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import pytest

from tests.support import ROOT

#: a short bench's own limit
BENCH_SECONDS = 840
#: the marks of a test module that runs a short bench: slow, on Postgres, and a timeout a
#: minute above the bench's own
BENCH_MARKS = [pytest.mark.slow, pytest.mark.postgres, pytest.mark.timeout(BENCH_SECONDS + 60)]


@dataclass(frozen=True)
class BenchRun:
    returncode: int
    #: the tail of what the bench printed (stdout, then stderr), for the assertion messages
    output: str


def run_bench(module: str, *args: str) -> BenchRun:
    """``python -m module args`` at the repository's root, stdin closed, within
    `BENCH_SECONDS`; the caller checks the exit status after what the bench wrote."""
    result = subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BENCH_SECONDS,
        stdin=subprocess.DEVNULL,
    )
    return BenchRun(result.returncode, (result.stdout + result.stderr)[-6000:])
