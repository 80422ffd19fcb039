"""The dev data a test reads (HaluEval QA dev, the long answers, the NLI pairs), found in one
place.

The commands find it through `scripts.devdata`: an option, else ``$RAGMON_DEV_DATA``, and no
default outside the repository. A test looks under ``$RAGMON_DEV_DATA`` when it is set, else
in a folder ``shared`` beside the checkout, which is where CI lays it (``.ci/run`` runs
in a clone with that folder next to it); only the tests know that place. When the file is not there
the test is skipped, saying what is missing and where to lay it, or fails under ``CI=true``
(`tests.support.tools.missing`).
"""

from __future__ import annotations

from pathlib import Path

from scripts import devdata
from tests.support import ROOT
from tests.support.tools import missing

#: where CI lays the dev data: a folder ``shared`` beside the checkout, as the variable expects
CI_FOLDER = ROOT.parent / "shared"


def dev_data(entry: devdata.DevData, what: str, why: str, layout: str = "") -> Path:
    """Where ``entry`` is, or the test skipped (failed in CI): ``what`` is missing "at"
    the path looked at, ``why`` says what reads it, ``layout`` adds how to lay it out."""
    path = devdata.located(entry) or CI_FOLDER / entry.relative
    if not path.exists():
        missing(
            f"{what} at {path} ({why})",
            f"set {devdata.VARIABLE} to a folder holding {entry.relative}{layout}, or lay "
            "shared/ beside the repository, as CI does",
        )
    return path
