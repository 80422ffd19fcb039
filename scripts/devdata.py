"""Where the benches and the training code find the dev data this repository cannot ship.

Three inputs come under licences that keep them out of the repository: HaluEval QA dev,
the long faithful answers (MTRAG-UN) and the NLI and fact-verification pairs the support
model trains on. They live in one folder outside the checkout, named by the environment
variable ``RAGMON_DEV_DATA`` and laid out as::

    $RAGMON_DEV_DATA/data/halueval_qa_dev.jsonl    (--halueval)
    $RAGMON_DEV_DATA/data/long_faithful_rag.jsonl  (--long)
    $RAGMON_DEV_DATA/nli/                          (--nli: one folder per source)

Each command's own option, when given, wins over the variable. There is no default
outside the repository: a command that needs one of them and finds neither stops with
one line naming the option, the variable and the file expected (exit status 2, `require`);
a bench that can run without it leaves that set out and says so (`find`). The variable is
not ``RAG_MONITOR_*``: that prefix belongs to the monitor's settings, and a variable of it
that is no setting stops every ``rag-monitor`` command.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

#: the folder holding the dev data, laid out as the module docstring shows
VARIABLE = "RAGMON_DEV_DATA"
ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class DevData:
    """One input that lives in the dev-data folder."""

    what: str  # as a sentence names it: "the HaluEval QA dev set"
    relative: str  # its place in the folder
    option: str  # the commands' option that names it directly

    def expected(self) -> str:
        """How to provide it, in the words every message uses."""
        return f"pass {self.option} PATH or set {VARIABLE} to a folder holding {self.relative}"


HALUEVAL = DevData("the HaluEval QA dev set", "data/halueval_qa_dev.jsonl", "--halueval")
LONG = DevData("the long-answer set", "data/long_faithful_rag.jsonl", "--long")
NLI = DevData("the NLI training pairs", "nli/", "--nli")


def located(entry: DevData, given: Path | None = None) -> Path | None:
    """Where ``entry`` should be: ``given`` (the command's option), else its place under
    ``$RAGMON_DEV_DATA``, else None. Whether anything is there is not checked."""
    if given is not None:
        return given
    folder = os.environ.get(VARIABLE, "").strip()
    return Path(folder) / entry.relative if folder else None


def find(entry: DevData, given: Path | None = None) -> Path | None:
    """`located`, when something is there; else None."""
    path = located(entry, given)
    return path if path is not None and path.exists() else None


def absent(entry: DevData, given: Path | None = None) -> str:
    """Why ``entry`` cannot be read, in one line."""
    path = located(entry, given)
    where = "" if path is None else f" at {path}"
    return f"no {entry.what.removeprefix('the ')}{where}: {entry.expected()}"


def require(entry: DevData, given: Path | None = None) -> Path:
    """`find`, or the command stopped: the `absent` line on stderr, exit status 2."""
    path = find(entry, given)
    if path is None:
        print(f"{_command()}: {absent(entry, given)}", file=sys.stderr)
        raise SystemExit(2)
    return path


def leaving_out(sets: str, entry: DevData, given: Path | None = None) -> None:
    """Say on stderr that a bench leaves ``sets`` out for want of ``entry``."""
    print(f"{_command()}: leaving out {sets}: {absent(entry, given)}", file=sys.stderr)


def _command() -> str:
    """The running command as it is typed after ``python -m`` (``bench.detection``)."""
    path = Path(sys.argv[0]).resolve()
    if path.is_relative_to(ROOT) and path.suffix == ".py":
        return ".".join(path.relative_to(ROOT).with_suffix("").parts)
    return path.name
