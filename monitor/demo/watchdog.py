"""The demo's watchdog: stops what the demo started when the demo dies without stopping it.

See docs/demo.md, "The stages, and what Ctrl-C does".
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

#: how long each signal gets to end a process before the next, stronger one
GRACE_SECONDS = 5.0


class Watchdog:
    """The demo's side: start the watchdog process, tell it what to stop, release it."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._pipe: IO[bytes] | None = None

    def start(self) -> None:
        self._process = subprocess.Popen(
            [sys.executable, "-m", "monitor.demo.watchdog"],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._pipe = self._process.stdin

    def group(self, pid: int) -> None:
        self._say(f"group {pid}")

    def postmaster(self, data_dir: Path) -> None:
        self._say(f"postmaster {data_dir}")

    def path(self, directory: Path) -> None:
        self._say(f"path {directory}")

    def release(self) -> None:
        """Everything is stopped: the watchdog exits without touching anything."""
        self._say("done")
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()
        process, self._process = self._process, None
        if process is not None:
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(10)

    def _say(self, line: str) -> None:
        if self._pipe is None:
            return
        with contextlib.suppress(OSError):
            self._pipe.write(line.encode() + b"\n")
            self._pipe.flush()


def main() -> int:
    """The watchdog process: read the demo's lines until the pipe closes, then act."""
    for sig in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)  # it ends only when the demo is gone
    groups: list[int] = []
    postmasters: list[Path] = []
    paths: list[Path] = []
    for raw in sys.stdin.buffer:
        kind, _, value = raw.decode(errors="replace").rstrip("\n").partition(" ")
        if kind == "done":
            return 0
        if kind == "group" and value.isdigit():
            groups.append(int(value))
        elif kind == "postmaster" and value:
            postmasters.append(Path(value))
        elif kind == "path" and value:
            paths.append(Path(value))
    for pid in groups:
        _end(pid, (signal.SIGTERM, signal.SIGKILL), group=True)
    for data_dir in postmasters:
        postmaster = _postmaster_pid(data_dir)
        if postmaster is not None:
            _end(postmaster, (signal.SIGQUIT, signal.SIGKILL), group=False)
    for path in paths:
        shutil.rmtree(path, ignore_errors=True)
    if groups or postmasters or paths:
        said = "the demo was killed; its watchdog stopped the broker and Postgres it had started"
        with contextlib.suppress(OSError):
            print(f"rag-monitor demo: {said} and removed their files", file=sys.stderr)
    return 0


def _postmaster_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def _end(pid: int, signals: tuple[signal.Signals, ...], *, group: bool) -> None:
    """Send each signal in turn until the process (or group leader) is gone."""
    for sig in signals:
        try:
            os.killpg(pid, sig) if group else os.kill(pid, sig)
        except ProcessLookupError:
            return
        deadline = time.monotonic() + GRACE_SECONDS
        while time.monotonic() < deadline:
            if not _alive(pid):
                return
            time.sleep(0.05)


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, dead and not yet reaped by init, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError, IndexError):
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        return state != "Z"
    return True


if __name__ == "__main__":
    sys.exit(main())
