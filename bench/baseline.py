"""The ``monitor`` package as of an older commit, for a baseline measured in the same run."""

from __future__ import annotations

import io
import subprocess
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def monitor_at(ref: str, into: Path) -> Path:
    """Commit ``ref``'s whole ``monitor`` package (read-only ``git archive``) under ``into``;
    run a process there (its working directory comes first on its path) for that commit's code."""
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, "monitor"],
        check=True,
        capture_output=True,
    ).stdout
    tarfile.open(fileobj=io.BytesIO(archive)).extractall(into, filter="data")
    return into
