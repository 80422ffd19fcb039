"""The demo in a subprocess, for the end-to-end tests: its stderr collected, and every
process it started."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from tests.support import ROOT
from tests.support.kafka import BROKER_ENV
from tests.support.waits import wait_until_sync


@dataclass
class DemoProcess:
    """The demo in a subprocess, its stderr collected, and every process it started."""

    proc: subprocess.Popen[str]
    stderr: list[str] = field(default_factory=list)
    stdout: list[str] = field(default_factory=list)
    pids: set[int] = field(default_factory=set)
    dirs: set[Path] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def start_watching(self) -> None:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._threads = [
            threading.Thread(target=self._read, args=(self.proc.stderr, self.stderr), daemon=True),
            threading.Thread(target=self._read, args=(self.proc.stdout, self.stdout), daemon=True),
            threading.Thread(target=self._watch, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    @staticmethod
    def _read(stream: Any, into: list[str]) -> None:
        for line in stream:
            into.append(line)

    @property
    def output(self) -> str:
        return "".join(self.stdout)

    def _watch(self) -> None:
        """Every process below the demo (the broker; pg_ctl and, briefly, the postmaster)."""
        try:
            root = psutil.Process(self.proc.pid)
        except psutil.NoSuchProcess:
            return
        while not self._stop.is_set() and self.proc.poll() is None:
            try:
                for child in root.children(recursive=True):
                    self._note(child)
            except psutil.NoSuchProcess:
                return
            time.sleep(0.05)  # sampling: children come and go, no event says when

    def _note(self, p: psutil.Process) -> None:
        try:
            cmdline = p.cmdline()
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            return
        if not any(("noida" in c or "postgres" in c or "tansu" in c) for c in cmdline[:1]):
            return
        self.pids.add(p.pid)
        for flag in ("--data-dir", "-D"):
            if flag in cmdline:
                data = Path(cmdline[cmdline.index(flag) + 1])
                self.dirs.add(data.parent)

    def note_postgres(self, port: int) -> None:
        """The postmaster (reparented to init by pg_ctl) and its children, by their port."""
        for p in psutil.process_iter(["pid", "cmdline"]):
            cmdline = p.info["cmdline"] or []
            if cmdline and "postgres" in cmdline[0] and str(port) in cmdline:
                self._note(p)
                try:
                    for child in p.children(recursive=True):
                        self.pids.add(child.pid)
                except psutil.NoSuchProcess:
                    pass

    def wait_for_line(self, pattern: str, timeout: float) -> re.Match[str]:
        regex = re.compile(pattern)
        found: list[re.Match[str]] = []

        def printed() -> bool:
            found.extend(m for line in list(self.stderr) if (m := regex.search(line)))
            if not found and self.proc.poll() is not None:
                raise AssertionError(f"the demo exited; no stderr line matching {what()}")
            return bool(found)

        def what() -> str:
            return f"{pattern!r}:\n{''.join(self.stderr)}"

        wait_until_sync(printed, timeout, lambda: f"a stderr line matching {what()}")
        return found[0]

    def finish(self, timeout: float) -> int:
        """Wait for the exit (kill after ``timeout``), collect the output, close the pipes."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            # stop it the way a user would (so it cleans up), kill only if that fails
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(30)
            self._stop.set()
            for thread in self._threads:
                thread.join(10)
            raise AssertionError(
                f"demo did not finish in {timeout:g} s:\n{''.join(self.stderr)}"
            ) from None
        finally:
            self._stop.set()
            for thread in self._threads:
                thread.join(10)
            for stream in (self.proc.stdout, self.proc.stderr):
                if stream is not None:
                    stream.close()
        return code

    def stop(self, sig: int = signal.SIGINT, timeout: float = 60) -> int:
        """Send ``sig`` (Ctrl-C by default) and `finish`: the exit code."""
        self.proc.send_signal(sig)
        return self.finish(timeout)

    def close(self) -> None:
        """For a test's ``finally``: a demo still running is stopped as a user would
        (SIGTERM), and its output collected and pipes closed either way."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        self.finish(timeout=60)

    def assert_nothing_left(self) -> None:
        def alive() -> set[int]:
            return {pid for pid in self.pids if _alive(pid)}

        wait_until_sync(lambda: not alive(), 10, lambda: f"no process left; alive: {alive()}")
        for d in self.dirs:
            assert not d.exists(), f"directory left behind: {d}"


def _alive(pid: int) -> bool:
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def start_demo(args: list[str], env: dict[str, str] | None = None) -> DemoProcess:
    """``rag-monitor demo ARGS`` on the suite's broker (`BROKER_ENV`), unless ARGS name one."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
    environment.update(env or {})
    broker = [] if "--broker" in args else ["--broker", os.environ.get(BROKER_ENV) or "noida"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "monitor", "demo", *broker, *args],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    demo = DemoProcess(proc)
    demo.start_watching()
    return demo


def backlog_cli(dsn: str, *args: str) -> str:
    """``rag-monitor backlog ARGS`` against ``dsn`` (a held demo's Postgres); its stdout."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
    env["RAG_MONITOR_PG_DSN"] = dsn
    done = subprocess.run(
        [sys.executable, "-m", "monitor", "backlog", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def wait_for_report(
    path: Path, demo: DemoProcess, timeout: float, *, printed: bool = False
) -> dict[str, Any]:
    """The demo's ``--report-json`` once written (and, with ``printed``, once the report
    is on stdout too)."""

    def written() -> bool:
        if path.exists() and (not printed or "elapsed:" in demo.output):
            return True
        if demo.proc.poll() is not None:
            raise AssertionError(f"the demo exited without a report at {path}:\n{what()}")
        return False

    def what() -> str:
        return f"the report at {path}:\n{demo.output}\n{''.join(demo.stderr)}"

    wait_until_sync(written, timeout, what, interval=0.2)
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data
