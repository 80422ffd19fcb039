"""`rag-monitor run` for the end-to-end tests: in a subprocess (its environment, its metrics,
its log), or in-process for the length of a block (`serving`)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from monitor.app import Components, build, logged, serve
from monitor.config import Settings
from tests.fixtures.kafka import Topic
from tests.support import ROOT
from tests.support.embedded import Broker
from tests.support.judge_server import RecordingJudge
from tests.support.records import samples
from tests.support.waits import wait_until_sync

RUN = [sys.executable, "-m", "monitor", "run"]


def environment(broker: Broker, topic: Topic, judge: RecordingJudge, port: int,
                **extra: str) -> dict[str, str]:  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_MONITOR_")}
    env.update(
        {
            "PYTHONPATH": str(ROOT),
            "RAG_MONITOR_KAFKA_BOOTSTRAP_SERVERS": topic.bootstrap,
            "RAG_MONITOR_KAFKA_TOPIC": topic.name,
            "RAG_MONITOR_KAFKA_DLQ_TOPIC": topic.dlq,
            "RAG_MONITOR_KAFKA_GROUP_ID": topic.group,
            "RAG_MONITOR_KAFKA_SESSION_TIMEOUT_MS": str(broker.session_timeout_ms),
            "RAG_MONITOR_KAFKA_HEARTBEAT_INTERVAL_MS": str(broker.heartbeat_interval_ms),
            "RAG_MONITOR_JUDGE_BASE_URL": judge.base_url,
            "RAG_MONITOR_JUDGE_API_KEY": "test-key",
            "RAG_MONITOR_JUDGE_MAX_RETRIES": "3",
            "RAG_MONITOR_METRICS_HOST": "127.0.0.1",
            "RAG_MONITOR_METRICS_PORT": str(port),
            "RAG_MONITOR_TOKEN_BUDGET": "0",
            "RAG_MONITOR_SAMPLE_RATE": "0.5",
            "RAG_MONITOR_MAX_IN_FLIGHT": "16",
            "RAG_MONITOR_SHUTDOWN_GRACE_SECONDS": "10",
            "RAG_MONITOR_LOG_LEVEL": "debug",
        }
    )
    env.update(extra)
    return env


@contextlib.asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[Components]:
    """`rag-monitor run` in-process (`build` + `serve`) while the block runs; its end stops
    it, and it must exit 0."""
    parts = build(settings)
    stop = asyncio.Event()
    task = asyncio.create_task(serve(settings, stop, parts))
    try:
        yield parts
    finally:
        stop.set()
        assert await asyncio.wait_for(task, 30) == 0


async def stop_services(parts: Components) -> None:
    """Stop the services `build` made, last first, for a test that ran the parts itself
    (or none of them: what `build` made still holds threads and connections to let go)."""
    for part in reversed(parts.services):
        if part.stop is not None:
            await logged(part.name, part.stop)()


def readyz(port: int) -> tuple[int, dict[str, Any]]:
    """The status and JSON body of ``/readyz`` on a monitor's ``port`` (a 503 too)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


class Monitor:
    """One `rag-monitor run` subprocess; killed (by pid) if a test leaves it running."""

    def __init__(self, env: dict[str, str], port: int, log: Path) -> None:
        self.port = port
        self.log = log
        with open(log, "ab") as out:
            self.process = subprocess.Popen(RUN, env=env, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=ROOT)  # fmt: skip

    def metric(self, name: str) -> float:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return -1.0
        return sum(samples(text, name).values())

    def series(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        """The samples of ``name`` on /metrics, keyed by their sorted labels."""
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/metrics", timeout=2) as r:
            return samples(r.read().decode(), name)

    def wait_log(self, event: str, within: float) -> dict[str, object]:
        """The first JSON log line whose event is ``event``, once the process has written it."""
        found: list[dict[str, object]] = []

        def logged() -> bool:
            for line in self.log.read_text(errors="replace").splitlines():
                if line.startswith("{") and f'"{event}"' in line:
                    parsed: dict[str, object] = json.loads(line)
                    if parsed.get("event") == event:
                        found.append(parsed)
                        return True
            self._assert_running()
            return False

        wait_until_sync(logged, within, lambda: f"a {event!r} log line:\n{self.output()}")
        return found[0]

    def wait_metric(self, name: str, at_least: float, within: float) -> None:
        def reached() -> bool:
            self._assert_running()
            return self.metric(name) >= at_least

        wait_until_sync(reached, within, lambda: f"{name} >= {at_least}:\n{self.output()}")

    def _assert_running(self) -> None:
        if self.process.poll() is not None:
            raise AssertionError(f"monitor exited {self.process.returncode}:\n{self.output()}")

    def output(self) -> str:
        return self.log.read_text(errors="replace")[-4000:]

    def skipped(self) -> set[tuple[int, int]]:
        """(partition, offset) of records skipped with a reason (finished without a score)."""
        out = set()
        for line in self.log.read_text(errors="replace").splitlines():
            if '"record skipped"' in line:
                event = json.loads(line)
                out.add((event["partition"], event["offset"]))
        return out

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)
