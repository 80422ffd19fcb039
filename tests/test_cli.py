"""The command line's help: every command and option explained in plain words."""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from collections.abc import Iterator

import pytest

from monitor.cli import COMMANDS, build_parser
from tests.support import ROOT

#: what marks text written for the code, not for the people at the terminal
MARKUP = (
    (re.compile(r"`"), "RST or Markdown code markup"),
    (re.compile(r":[a-z]+:`"), "an RST role"),
    (re.compile(r"::\s*$", re.M), "an RST literal block"),
    (re.compile(r"\bmonitor\.[a-z_]+"), "a module path"),
    (re.compile(r"\bdocs/design\.md\b"), "the design document"),
)


def internal_class_names() -> set[str]:
    """The package's class names with two or more capitals (one-word ones are plain words)."""
    names = set()
    for path in (ROOT / "monitor").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef) and len(re.findall(r"[A-Z]", node.name)) >= 2:
                names.add(node.name.strip("_"))
    return names


def parsers(
    parser: argparse.ArgumentParser, path: str = "rag-monitor"
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from parsers(sub, f"{path} {name}")


def help_texts(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, str | None]]:
    """(where, text) for the parser's description and each of its arguments and commands."""
    yield f"{path}: description", parser.description
    for action in parser._actions:
        if action.help == argparse.SUPPRESS:
            continue
        name = "/".join(action.option_strings) or action.metavar or action.dest
        yield f"{path} {name}", action.help
        if isinstance(action, argparse._SubParsersAction):
            for choice in action._choices_actions:
                yield f"{path} {choice.dest}: listed", choice.help
    if parser.epilog is not None:
        yield f"{path}: epilog", parser.epilog


def every_help_text() -> list[tuple[str, str | None]]:
    return [item for path, p in parsers(build_parser()) for item in help_texts(p, path)]


def test_the_walk_reaches_every_command_and_option() -> None:
    paths = [path for path, _ in parsers(build_parser())]
    assert {path.split()[1] for path in paths[1:]} == set(COMMANDS)
    assert "rag-monitor backlog export" in paths
    wheres = [where for where, _ in every_help_text()]
    assert "rag-monitor offline --judge" in wheres
    assert "rag-monitor backlog export --format" in wheres
    assert "rag-monitor backlog discard ID" in wheres


def test_every_command_and_option_has_help() -> None:
    missing = [where for where, text in every_help_text() if not (text and text.strip())]
    assert missing == []


@pytest.mark.parametrize(("pattern", "what"), MARKUP, ids=[what for _, what in MARKUP])
def test_no_help_carries_markup_meant_for_the_code(pattern: re.Pattern[str], what: str) -> None:
    found = [where for where, text in every_help_text() if text and pattern.search(text)]
    assert found == [], f"{what} in help"


def test_no_help_names_an_internal_class() -> None:
    classes = internal_class_names()
    assert {"KafkaSource", "BacklogStore"} <= classes  # the scan found the package's classes
    found = {
        where: sorted(set(re.findall(r"\b[A-Za-z_]+\b", text)) & classes)
        for where, text in every_help_text()
        if text
    }
    assert {where: names for where, names in found.items() if names} == {}


def test_every_help_page_has_a_description_of_whole_sentences() -> None:
    for path, parser in parsers(build_parser()):
        page = parser.format_help()
        assert page.startswith(f"usage: {path}"), page
        # argparse prints the description after the usage
        description = page.split("\n\n")[1]
        assert description.rstrip().endswith("."), (path, description)


def test_run_help_is_written_for_users() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "monitor", "run", "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "Consume interactions from Kafka" in result.stdout
    assert "Exit codes: 0 stopped cleanly, 2 invalid settings, 3 Kafka unreachable" in " ".join(
        result.stdout.split()
    )


def test_version_is_the_packages_and_exits_0() -> None:
    import subprocess
    import sys
    import tomllib

    from tests.support import ROOT

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-m", "monitor", "--version"], capture_output=True,
                          text=True, timeout=60, env=env, cwd=ROOT)  # fmt: skip
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"rag-monitor {project['version']}\n",
        "",
    )
