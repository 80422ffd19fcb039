"""What a test needs from outside Python, and the one rule for when it is missing.

A test that needs a system tool (promtool, prometheus, stunnel4, chromium), a
Postgres server or a broker package asks for it here. When the thing is missing,
the test is **skipped** on a contributor's machine, with a message naming what to
install (the Debian package for a tool), and **fails** in CI (the environment
variable ``CI`` set to ``true``, as `.ci/run` runs), so a first ``pytest`` on a
workstation is not red for a tool nobody installed yet, and CI cannot go green by
skipping.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import NoReturn

import pytest

#: ``CI=true`` turns every "missing" skip into a failure
CI_ENV = "CI"
#: how a contributor gets every Python package the tests use
DEV_INSTALL = "pip install -e '.[dev]'"


def in_ci() -> bool:
    """True when ``CI`` is ``true`` (any case): a missing requirement fails instead of skipping."""
    return os.environ.get(CI_ENV, "").strip().lower() == "true"


def missing(what: str, install: str) -> NoReturn:
    """Skip the test (fail it in CI): ``what`` says what is missing, ``install`` how to get it."""
    message = f"{what}; {install}"
    if in_ci():
        pytest.fail(f"{message} (CI=true: a missing requirement fails)", pytrace=False)
    pytest.skip(message)


def require_tool(
    name: str, debian_package: str, *, path: str | None = None, aliases: tuple[str, ...] = ()
) -> str:
    """The executable ``name`` (or the file ``path``), or the test skipped/failed by `missing`.

    ``debian_package`` is the package that installs it (``prometheus`` for ``promtool``);
    ``aliases``: other names the same program goes by elsewhere (``stunnel`` for ``stunnel4``).
    """
    return require_program(
        name,
        f"install the Debian package `{debian_package}` (.ci/run does)",
        path=path,
        aliases=aliases,
    )


def require_program(
    name: str, install: str, *, path: str | None = None, aliases: tuple[str, ...] = ()
) -> str:
    """`require_tool` for a program that is not a Debian package (``install``: how to get it)."""
    for candidate in (path or name, *aliases):
        found = shutil.which(candidate)
        if found is not None:
            return found
    missing(f"{path} does not exist" if path else f"`{name}` is not on PATH", install)


def require_package(module: str, why: str, install: str = DEV_INSTALL) -> Path:
    """The directory of the top-level Python package ``module``, or the test skipped/failed by
    `missing` (``why``: what it is for; ``install``: how to get it)."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        missing(f"the Python package `{module}` ({why}) is not installed", install)
    return Path(spec.origin).parent
