"""The documentation stays true: its tables match the code, its commands work, its links resolve.

The documentation is README.md and the pages of docs/ (one page per concept).

- The settings table of docs/configuration.md lists every `Settings` field (as
  its ``RAG_MONITOR_*`` variable) with the real default, and nothing else.
- The options table of docs/demo.md lists every option of ``rag-monitor demo``
  once, in the parser's order.
- Every command in a fenced ``console``/``bash`` block is checked: each
  ``rag-monitor …`` parses with the real parser (`monitor.cli.build_parser`);
  the cheap ones run for real (help, ``score`` with the local judge, the
  backlog workflow against a real Postgres); every other program has a
  checker below (paths exist, promtool runs the rules, …). A command nobody
  checks fails the test, so a new documented command needs a checker here.
- The YAML settings example is a valid settings file.
- Every relative link (and its ``#anchor``) of README.md, docs/, CHANGELOG.md and
  the chart's README points at something that exists.
- README.md starts with the two commands of a fresh machine, and the test
  command is the one CI runs.

The demo itself runs end to end in tests/demo/test_run.py, the dashboard recipe
of docs/operations.md in tests/demo/test_dashboard.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry
from pydantic import BaseModel, SecretStr

from monitor.cli import build_parser
from monitor.config import PREFIX, Settings, TokenBudgetSpec, load_settings
from monitor.records import Context, Interaction, MetricResult, ScoredRecord
from monitor.scoring import OFFLINE_METRICS, ONLINE_METRICS
from monitor.telemetry import PREFIX as SERIES_PREFIX
from monitor.telemetry import Exporter
from tests.support import ROOT
from tests.support.tools import require_tool

README = ROOT / "README.md"
DOCS = ROOT / "docs"
CONFIGURATION = DOCS / "configuration.md"
DEMO = DOCS / "demo.md"
TRAFFIC = ROOT / "monitor" / "demo" / "traffic.jsonl"
#: the Markdown files whose relative links must resolve
LINKED = (
    README,
    *sorted(DOCS.glob("*.md")),
    ROOT / "CHANGELOG.md",
    ROOT / "helm" / "rag-monitor" / "README.md",
)

TABLE_START = "<!-- settings-table"
TABLE_END = "<!-- /settings-table -->"
DEMO_TABLE_START = "<!-- demo-options"
DEMO_TABLE_END = "<!-- /demo-options -->"

# ----------------------------------------------------------------------------- parsing


def readme() -> str:
    return README.read_text(encoding="utf-8")


def documentation() -> str:
    """README.md, then every page of docs/, in name order."""
    pages = [README, *sorted(DOCS.glob("*.md"))]
    return "\n".join(page.read_text(encoding="utf-8") for page in pages)


def fenced_blocks(text: str, languages: tuple[str, ...]) -> Iterator[str]:
    for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, flags=re.S | re.M):
        if match.group(1) in languages:
            yield match.group(2)


def command_lines(text: str) -> list[str]:
    """Every command of the console/bash blocks, continuation lines joined."""
    lines: list[str] = []
    for block in fenced_blocks(text, ("console", "bash", "shell", "sh")):
        pending = ""
        for raw in block.splitlines():
            line = raw.rstrip()
            if line.startswith("$ "):
                line = line[2:]
            if line.endswith("\\"):
                pending += line[:-1] + " "
                continue
            line = (pending + line).strip()
            pending = ""
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


@dataclass
class Simple:
    """One simple command of a README line: environment, argv, redirections."""

    line: str
    env: dict[str, str] = field(default_factory=dict)
    argv: list[str] = field(default_factory=list)
    stdout: str | None = None
    stdin: str | None = None

    @property
    def program(self) -> str:
        return self.argv[0] if self.argv else ""


def simple_commands(line: str) -> list[Simple]:
    lexer = shlex.shlex(line, posix=True, punctuation_chars="|&;<>")
    lexer.whitespace_split = True
    out: list[Simple] = []
    current = Simple(line)
    tokens = list(lexer)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token in ("&&", "||", "|", ";"):
            out.append(current)
            current = Simple(line)
        elif token in (">", ">>", "<"):
            target = tokens[i + 1]
            if token == "<":
                current.stdin = target
            else:
                current.stdout = target
            i += 1
        elif not current.argv and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", token):
            key, _, value = token.partition("=")
            current.env[key] = value
        else:
            current.argv.append(token)
        i += 1
    out.append(current)
    return [c for c in out if c.argv]


def all_simple_commands() -> list[Simple]:
    return [c for line in command_lines(documentation()) for c in simple_commands(line)]


def rag_monitor_commands() -> list[Simple]:
    return [c for c in all_simple_commands() if c.program == "rag-monitor"]


# --------------------------------------------------------------------- settings table


def render_default(value: Any) -> str:
    """How the table spells a default (the same function wrote the table)."""
    if value is None:
        return "(unset)"
    if isinstance(value, SecretStr):
        return "(set)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, TokenBudgetSpec):
        if value.unlimited:
            return "unlimited"
        units = {86400: "d", 3600: "h", 60: "m", 1: "s"}
        for seconds, unit in units.items():
            if value.window_seconds == seconds:
                return f"{value.tokens}/{unit}"
        return str(value)
    if isinstance(value, dict):
        return json.dumps(value, separators=(", ", ": ")) if value else "{}"
    if isinstance(value, list):
        if not value:
            return "(empty)"
        if all(isinstance(v, str) for v in value):
            return ",".join(value)
        return json.dumps(
            [v.model_dump() if isinstance(v, BaseModel) else v for v in value],
            separators=(", ", ": "),
        )
    return str(value)


def table_rows(path: Path, start_marker: str, end_marker: str) -> list[list[str]]:
    """The cells of each body row of the table between two markers of a page."""
    text = path.read_text(encoding="utf-8")
    start = text.index(start_marker)
    end = text.index(end_marker, start)
    rows: list[list[str]] = []
    for line in text[start:end].splitlines():
        if line.startswith("| `"):
            rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
    return rows


def settings_table() -> dict[str, tuple[str, str]]:
    """variable name -> (default cell, meaning cell)"""
    rows: dict[str, tuple[str, str]] = {}
    for cells in table_rows(CONFIGURATION, TABLE_START, TABLE_END):
        assert len(cells) == 3, f"settings row must have 3 cells: {cells}"
        name = cells[0].strip("`")
        assert name not in rows, f"{name} listed twice"
        rows[name] = (cells[1], cells[2])
    return rows


def unquote(cell: str) -> str:
    return cell[1:-1] if cell.startswith("`") and cell.endswith("`") else cell


def test_every_setting_is_in_the_table_and_nothing_else() -> None:
    table = settings_table()
    expected = {PREFIX + name.upper() for name in Settings.model_fields}
    missing = sorted(expected - set(table))
    extra = sorted(set(table) - expected)
    assert not missing, f"docs/configuration.md settings table lacks {missing}"
    assert not extra, f"docs/configuration.md lists unknown settings {extra}"


def test_table_order_follows_config() -> None:
    expected = [PREFIX + name.upper() for name in Settings.model_fields]
    assert list(settings_table()) == expected


def test_table_defaults_are_the_real_defaults() -> None:
    table = settings_table()
    for name, info in Settings.model_fields.items():
        cell, meaning = table[PREFIX + name.upper()]
        assert unquote(cell) == render_default(info.get_default(call_default_factory=True)), name
        assert meaning, f"{name} has no meaning in docs/configuration.md"


def test_every_settings_variable_named_in_the_documentation_exists() -> None:
    known = {PREFIX + name.upper() for name in Settings.model_fields}
    named = set(re.findall(r"(RAG_MONITOR_[A-Z0-9_]+)", documentation()))
    assert named - known == set(), f"the docs name unknown settings: {sorted(named - known)}"


def test_yaml_example_is_a_valid_settings_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in list(os.environ):
        if key.startswith(PREFIX) or key == "OPENAI_API_KEY":
            monkeypatch.delenv(key)
    blocks = [  # a Prometheus configuration is checked by tests/demo/test_dashboard.py
        b for b in fenced_blocks(documentation(), ("yaml",)) if not b.startswith("scrape_configs:")
    ]
    assert blocks, "the docs have no YAML settings example"
    empty = tmp_path / "empty.yaml"
    empty.write_text("{}\n", encoding="utf-8")
    defaults = load_settings(empty)
    for i, block in enumerate(blocks):
        path = tmp_path / f"settings{i}.yaml"
        path.write_text(block, encoding="utf-8")
        settings = load_settings(path)  # an unknown key or a bad value: ConfigError
        named = {k.lower() for k in yaml.safe_load(block)}
        changed = {n for n in Settings.model_fields if getattr(settings, n) != getattr(defaults, n)}
        # the file took effect, and only for the settings it names
        assert changed and changed <= named, (sorted(changed), sorted(named))


# --------------------------------------------------------------------------- commands


#: the venv each of the README's two commands starts with: Debian's and Ubuntu's own python3
#: refuse ``pip install`` outside one (``externally-managed-environment``)
VENV = "python3 -m venv .venv && . .venv/bin/activate"
DEMO_COMMAND = f"{VENV} && pip install '.[demo]' && rag-monitor demo"
TEST_COMMAND = f"{VENV} && pip install -e '.[dev]' && python3 -m pytest"


def test_readme_starts_with_the_two_commands() -> None:
    text = readme()
    lines = text.splitlines()
    assert lines[0] == "# rag-monitor"
    assert DEMO_COMMAND in lines[:12]
    first, second = [block.strip() for block in fenced_blocks(text, ("console",))][:2]
    assert (first, second) == (DEMO_COMMAND, TEST_COMMAND)


def test_the_readme_commands_install_into_the_venv_they_make() -> None:
    """Each command makes ``.venv``, activates it, and only then runs pip: nothing reaches the
    system's Python, and the programs after pip are the venv's."""
    for command in (DEMO_COMMAND, TEST_COMMAND):
        steps = simple_commands(command)
        assert [s.argv[:3] for s in steps[:2]] == [
            ["python3", "-m", "venv"],
            [".", ".venv/bin/activate"],
        ], command
        assert steps[0].argv[3] == ".venv" and steps[2].program == "pip", command
    ignored = (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
    assert ".venv/" in ignored, "the README's venv would show up in git status"


def test_the_readme_says_how_long_the_tests_take() -> None:
    """The test command's cost, said before anyone waits for it."""
    head = readme().split("## ", 1)[0]
    assert re.search(r"about \d+ minutes on two cores", head), "README: how long the tests take"


def test_ci_runs_the_readmes_test_command() -> None:
    """.ci/run runs the README's test command as written, on a line of its own (its status
    kept), then scripts/check without the suite it has just run."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    runs = [line for line in ci if TEST_COMMAND in line and not line.lstrip().startswith("#")]
    assert len(runs) == 1, f".ci/run does not run the README's test command {TEST_COMMAND!r}"
    assert runs[0].startswith(TEST_COMMAND), runs[0]
    assert "bash scripts/check --suite-done" in ci
    # scripts/check still runs the same suite for a developer, and skips it only when told
    check = (ROOT / "scripts" / "check").read_text(encoding="utf-8")
    assert "run_pytest python3 -m pytest\n" in check
    assert "--suite-done) suite=0" in check


# ------------------------------------------------------------------- demo options


def demo_options_table() -> list[str]:
    """The option of each row of docs/demo.md's table (``--records`` of ``--records N``)."""
    rows = table_rows(DEMO, DEMO_TABLE_START, DEMO_TABLE_END)
    assert rows, "docs/demo.md has no options table"
    return [cells[0].strip("`").split()[0] for cells in rows]


def demo_parser_options() -> list[str]:
    import argparse

    parser = build_parser()
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    demo = subparsers.choices["demo"]
    return [
        max(action.option_strings, key=len)
        for action in demo._actions
        if action.option_strings and not isinstance(action, argparse._HelpAction)
    ]


def test_demo_md_says_the_demos_control_share_and_productions() -> None:
    """The report's `controls:` line, as docs/demo.md explains it: the shares are the code's."""
    from monitor.demo.production import CONTROL_SHARE
    from monitor.demo.run import DEMO_CONTROL_SHARE

    said = " ".join(DEMO.read_text(encoding="utf-8").split())
    assert f"queues at a control share of {DEMO_CONTROL_SHARE:.0%}".replace("%", " %") in said
    assert f"production's default is {CONTROL_SHARE:.0%}".replace("%", " %") in said


def test_demo_options_table_lists_each_option_once() -> None:
    table = demo_options_table()
    twice = sorted({o for o in table if table.count(o) > 1})
    assert not twice, f"docs/demo.md lists {twice} more than once"


def test_demo_options_table_matches_the_parser() -> None:
    assert demo_options_table() == demo_parser_options()


@pytest.mark.parametrize("command", rag_monitor_commands(), ids=lambda c: " ".join(c.argv)[:60])
def test_rag_monitor_command_parses(command: Simple) -> None:
    parser = build_parser()
    try:
        args = parser.parse_args(command.argv[1:])
    except SystemExit as exc:  # argparse reports and exits
        pytest.fail(f"README command does not parse: {command.line!r} (exit {exc.code})")
    assert callable(args.handler)
    for key in command.env:
        if key.startswith(PREFIX):
            assert key[len(PREFIX) :].lower() in Settings.model_fields, key


def test_every_readme_command_has_a_checker() -> None:
    unchecked = sorted({c.program for c in all_simple_commands()} - set(CHECKERS))
    assert not unchecked, f"no checker in tests/test_docs.py for README programs {unchecked}"


def _check_pip(c: Simple) -> None:
    assert c.argv[1] == "install", c.line
    target = c.argv[-1]
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    m = re.fullmatch(r"\.(?:\[(\w+)\])?", target)
    assert m, f"pip installs something other than this repository: {c.line}"
    if m.group(1):
        assert m.group(1) in pyproject["project"]["optional-dependencies"], c.line


def _check_python(c: Simple) -> None:
    args = c.argv[1:]
    if args[:2] == ["-m", "venv"]:
        assert args[2:] == [".venv"], f"the README's venv is .venv: {c.line!r}"
    elif args[:2] == ["-m", "pytest"]:
        for path in args[2:]:
            if not path.startswith("-"):
                assert (ROOT / path).exists(), f"{path} in {c.line!r} does not exist"
    elif args and args[0].endswith(".py"):
        assert (ROOT / args[0]).is_file(), c.line
    else:
        raise AssertionError(f"unexpected python command {c.line!r}")


def _check_paths_exist(c: Simple) -> None:
    assert shutil.which(c.program) or c.program in ("helm", "kubectl", "docker", "promtool"), (
        f"{c.program} is not installed"
    )
    for arg in c.argv[1:]:
        if arg.startswith(("monitor", "tests", "bench", "dashboards", "helm/", "scripts")):
            assert list(ROOT.glob(arg)), f"{arg} in {c.line!r} does not exist"


def _check_curl(c: Simple) -> None:
    url = c.argv[-1]
    assert re.fullmatch(r"localhost:\d+/(metrics|healthz|readyz)", url), c.line


def _check_grep(c: Simple) -> None:
    assert c.argv[-1].lstrip("^").startswith("rag_monitor_"), c.line


def _without_namespace(argv: list[str]) -> list[str]:
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg in ("-n", "--namespace"):
            skip = True
        else:
            out.append(arg)
    return out


def _check_kubectl(c: Simple) -> None:
    argv = _without_namespace(c.argv)
    assert argv[1:4] == ["create", "secret", "generic"], c.line
    keys = [a.split("=", 2)[1] for a in argv if a.startswith("--from-literal=")]
    assert keys
    for key in keys:
        assert key.startswith(PREFIX) and key[len(PREFIX) :].lower() in Settings.model_fields, key
    # the chart reads exactly these variable names from an existing Secret
    values = (ROOT / "helm" / "rag-monitor" / "values.yaml").read_text(encoding="utf-8")
    assert "existingSecret" in values


def _check_helm(c: Simple) -> None:
    """The chart exists; every ``--set`` names a chart value, ``settings.*`` a real setting."""
    import yaml

    chart = next(a for a in c.argv if a.startswith("helm/"))
    assert (ROOT / chart / "Chart.yaml").is_file(), f"{chart} is not a chart"
    values = yaml.safe_load((ROOT / chart / "values.yaml").read_text(encoding="utf-8"))
    argv = c.argv
    for i, arg in enumerate(argv):
        if arg != "--set":
            continue
        key = argv[i + 1].split("=", 1)[0]
        head, _, rest = key.partition(".")
        assert head in values, f"{key}: no value {head!r} in {chart}/values.yaml"
        if head == "settings":
            assert rest in Settings.model_fields, f"{key}: not a setting of monitor/config.py"


def _check_kafka_topics(c: Simple) -> None:
    """The ledger topic as the sidecar makes it: its name at the default group, one partition,
    its configs."""
    from monitor.kafka.ledger import LEDGER_TOPIC_CONFIGS, ledger_topic

    argv = c.argv
    assert "--create" in argv, c.line
    assert argv[argv.index("--topic") + 1] == ledger_topic(Settings()), c.line
    assert argv[argv.index("--partitions") + 1] == "1", c.line
    configs = dict(argv[i + 1].split("=", 1) for i, a in enumerate(argv) if a == "--config")
    assert configs == LEDGER_TOPIC_CONFIGS, c.line


def _check_docker(c: Simple) -> None:
    if c.argv[1] == "push":  # the image a `docker build` of the same page tagged
        assert len(c.argv) == 3 and ":" in c.argv[2], c.line
        return
    assert c.argv[1] == "build" and c.argv[-1] == ".", c.line
    assert (ROOT / "Dockerfile").is_file()


def _check_promtool(c: Simple) -> None:
    _check_paths_exist(c)


def _check_script(c: Simple) -> None:
    """A script of the repository (``scripts/check``): there, and executable."""
    script = ROOT / c.program
    assert script.is_file() and os.access(script, os.X_OK), f"{c.program} is not executable"


def _check_activate(c: Simple) -> None:
    """``. .venv/bin/activate``, after the same line made that venv."""
    assert c.argv[1:] == [".venv/bin/activate"], c.line
    assert "python3 -m venv .venv && " in c.line.split(". .venv/bin/activate")[0], c.line


def _check_rag_monitor(c: Simple) -> None:
    test_rag_monitor_command_parses(c)


CHECKERS: dict[str, Callable[[Simple], None]] = {
    "rag-monitor": _check_rag_monitor,
    "pip": _check_pip,
    "python3": _check_python,
    "python": _check_python,
    "ruff": _check_paths_exist,
    "mypy": _check_paths_exist,
    "promtool": _check_promtool,
    "prometheus": _check_paths_exist,  # the dashboard recipe: tests/demo/test_dashboard.py
    "curl": _check_curl,
    "grep": _check_grep,
    "kubectl": _check_kubectl,
    "helm": _check_helm,
    "docker": _check_docker,
    "kafka-topics.sh": _check_kafka_topics,
    ".": _check_activate,
    "scripts/check": _check_script,
    "./scripts/check": _check_script,
}


@pytest.mark.parametrize(
    "command",
    [c for c in all_simple_commands() if c.program != "rag-monitor"],
    ids=lambda c: " ".join(c.argv)[:60],
)
def test_other_command_checks(command: Simple) -> None:
    checker = CHECKERS.get(command.program)
    assert checker is not None, f"no checker for {command.line!r}"
    checker(command)


def test_promtool_commands_run() -> None:
    promtool = require_tool("promtool", "prometheus")
    commands = [c for c in all_simple_commands() if c.program == "promtool"]
    assert commands
    for c in commands:
        argv = [promtool, *[str(p) for a in c.argv[1:] for p in _glob(a)]]
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{c.line}: {done.stdout}{done.stderr}"


def _glob(arg: str) -> list[str]:
    if "*" in arg:
        return sorted(str(p.relative_to(ROOT)) for p in ROOT.glob(arg))
    return [arg]


def test_traffic_generator_command_reproduces_the_bundled_set(tmp_path: Path) -> None:
    commands = [c for c in all_simple_commands() if c.argv[1:2] == ["scripts/make_demo_traffic.py"]]
    assert commands, "README no longer shows how to regenerate the traffic set"
    out = tmp_path / "traffic.jsonl"
    done = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "make_demo_traffic.py"), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == TRAFFIC.read_bytes(), "the committed traffic set is stale"


# ------------------------------------------------------- rag-monitor commands, for real

#: README subcommands run for real below
RUN_HERE = {"score", "migrate", "backlog", "offline"}
#: README subcommands exercised elsewhere (they need a broker)
RUN_ELSEWHERE = {
    "demo": "tests/demo/test_run.py runs the demo end to end",
    "run": "tests/commands/test_run.py runs the sidecar against a real broker",
    "review": "tests/review/test_api.py and tests/review/test_browser.py serve the page",
}


def subcommand(c: Simple) -> str:
    args = c.argv[1:]
    while args and args[0].startswith("-"):
        args = args[2:] if args[0] in ("--config",) else args[1:]
    return args[0] if args else ""


def step_name(c: Simple) -> str:
    """``backlog export`` for backlog actions, else the subcommand."""
    return " ".join(c.argv[1:3]) if subcommand(c) == "backlog" else subcommand(c)


def test_every_rag_monitor_command_is_run_somewhere() -> None:
    for c in rag_monitor_commands():
        assert subcommand(c) in RUN_HERE | set(RUN_ELSEWHERE), c.line


def run_readme_command(
    c: Simple, cwd: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith(PREFIX)}
    environment.update(env)
    environment.update(c.env)
    stdout = open(cwd / c.stdout, "w", encoding="utf-8") if c.stdout else None
    try:
        return subprocess.run(
            [sys.executable, "-m", "monitor", *c.argv[1:]],
            cwd=cwd,
            env=environment,
            stdout=stdout if stdout is not None else subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            timeout=180,
        )
    finally:
        if stdout is not None:
            stdout.close()


def test_score_command_runs(tmp_path: Path) -> None:
    commands = [c for c in rag_monitor_commands() if subcommand(c) == "score"]
    assert commands
    lines = TRAFFIC.read_text(encoding="utf-8").splitlines()[:3]
    for c in commands:
        source = next(a for a in c.argv[2:] if a.endswith(".jsonl"))
        (tmp_path / source).write_text("\n".join(lines) + "\n", encoding="utf-8")
        done = run_readme_command(c, tmp_path, {})
        assert done.returncode == 0, done.stderr
        out = (tmp_path / c.stdout).read_text() if c.stdout else done.stdout
        results = [json.loads(line) for line in out.splitlines()]
        assert [r["id"] for r in results] == [json.loads(line)["id"] for line in lines]
        wanted = c.argv[c.argv.index("--metrics") + 1].split(",") if "--metrics" in c.argv else None
        for r in results:
            if wanted:
                assert sorted(r["scores"]) == sorted(wanted)


def _flagged_record(rid: str) -> ScoredRecord:
    interaction = Interaction(
        id=rid,
        user_input="When do I need a receipt for travel expenses? Mail me at a.b@example.com",
        retrieved_contexts=(
            Context(text="A receipt is required for any travel expense over $75."),
        ),
        response="You need a receipt for expenses over $25, and lodging is never reimbursed.",
        metadata={"route": "hr-policy"},
    )
    return ScoredRecord(
        interaction=interaction,
        results={"faithfulness": MetricResult(metric="faithfulness", score=0.0, judge="local")},
        inclusion_probability=1.0,
    )


@pytest.mark.postgres
async def test_backlog_workflow_commands_run(tmp_path: Path, pg_dsn: str) -> None:
    """migrate → stats → export → import → offline, as the README shows them, for real."""
    from monitor.backlog.store import BacklogStore
    from monitor.sinks.backlog import BacklogSink

    order = ["migrate", "backlog stats", "backlog export", "backlog import", "offline"]
    workflow = ("migrate", "backlog", "offline")
    commands = [c for c in rag_monitor_commands() if subcommand(c) in workflow]
    seen = [step_name(c) for c in commands]
    assert [s for s in order if s in seen] == order, f"README backlog workflow changed: {seen}"
    env = {"RAG_MONITOR_PG_DSN": pg_dsn}
    for c in commands:
        name = step_name(c)
        if name == "backlog stats":
            # something to look at: one flagged interaction, written by the real sink
            settings = Settings(control_share=0.0)
            sink = BacklogSink(BacklogStore(pg_dsn, settings), settings)
            await sink.start()
            try:
                await sink.write([_flagged_record("readme-1")])
            finally:
                await sink.aclose()
        if name == "backlog import":
            exported = next(a for a in _exports(commands))
            rows = [json.loads(line) for line in (tmp_path / exported).read_text().splitlines()]
            assert [r["id"] for r in rows] == ["readme-1"]
            assert "a.b@example.com" not in rows[0]["user_input"]  # redacted
            target = tmp_path / c.argv[-1]
            target.write_text(
                "".join(
                    json.dumps({"id": r["id"], "reference": "Receipts are required over $75."})
                    + "\n"
                    for r in rows
                ),
                encoding="utf-8",
            )
        done = await asyncio.to_thread(run_readme_command, c, tmp_path, env)
        assert done.returncode == 0, f"{c.line}: {done.stdout}{done.stderr}"
        if name == "backlog stats":
            assert re.search(r"pending\s+1", done.stdout), done.stdout
        if name == "offline":
            assert "1 row(s) evaluated" in done.stdout, done.stdout


def _exports(commands: list[Simple]) -> Iterator[str]:
    for c in commands:
        if c.argv[1:3] == ["backlog", "export"] and "--out" in c.argv:
            yield c.argv[c.argv.index("--out") + 1]


# ------------------------------------------------------------------------ metrics

METRICS = DOCS / "metrics.md"


def test_metrics_table_lists_every_metric_once_with_when_it_runs() -> None:
    rows = table_rows(METRICS, "<!-- metrics-table", "<!-- /metrics-table -->")
    listed = [(cells[0].strip("`"), cells[2]) for cells in rows]
    expected = [(m, "online") for m in ONLINE_METRICS] + [(m, "offline") for m in OFFLINE_METRICS]
    assert listed == expected


def test_the_flag_rule_tables_demo_rows_say_what_they_count() -> None:
    """The bench's demo rows (hallucinated and faithful answers only) and the demo report's
    rate (every answer with a faithfulness score, off-topic included) differ; the page says
    by how much, from the traffic's own labels."""
    labels = [json.loads(line)["metadata"]["label"] for line in TRAFFIC.read_text().splitlines()]
    hallucinated = labels.count("hallucinated")
    bench = hallucinated + labels.count("faithful")
    report = len(labels) - labels.count("evasive")  # the evasive ones are unscoreable
    text = METRICS.read_text(encoding="utf-8")
    rows = [r for r in re.findall(r"^\| (.+) \|$", text, flags=re.M) if "| demo |" in f"| {r} |"]
    assert rows, "the flag-rule table has no demo row"
    for row in rows:
        assert f"| {100 * hallucinated / bench:.1f} % |" in f"| {row} |", row
    said = " ".join(text.split())
    assert f"({bench} of the demo's {len(labels)})" in said
    assert f"({report} answers with a faithfulness score;" in said
    assert f"the {labels.count('off_topic')} off-topic answers" in said
    assert f"the {labels.count('evasive')} evasive ones have none" in said
    assert f"{100 * hallucinated / report:.1f} % ({hallucinated} of {report})" in said


def test_every_exported_series_is_named_in_metrics_md() -> None:
    """Each family the exporter registers appears in the page's series list."""
    text = METRICS.read_text(encoding="utf-8")
    start = text.index("## Prometheus series and endpoints")
    section = text[start : text.index("\n## ", start + 1)]
    named = set(re.findall(r"`([a-z_]+)(?:\{[^}`]*\})?`", section))
    registry = CollectorRegistry()
    Exporter(registry)
    families = sorted({family.name for family in registry.collect()})
    assert families
    missing = [
        name
        for name in families
        if {
            name.removeprefix(SERIES_PREFIX),
            name.removeprefix(SERIES_PREFIX) + "_total",
        }.isdisjoint(named)
    ]
    assert not missing, f"docs/metrics.md does not name {missing}"


# --------------------------------------------------------------------------- links

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    return {slug(m.group(1)) for m in re.finditer(r"^#{1,6} (.+)$", text, flags=re.M)}


def relative_links(path: Path) -> Iterator[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(encoding="utf-8"), flags=re.S | re.M)
    text = re.sub(r"`[^`\n]*`", "", text)  # inline code is not a link
    for match in LINK.finditer(text):
        target = match.group(1)
        if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:, …
            yield target


@pytest.mark.parametrize("page", LINKED, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in relative_links(page):
        file_part, _, anchor = target.partition("#")
        resolved = (page.parent / file_part).resolve() if file_part else page
        if not resolved.exists() or ROOT.resolve() not in (resolved, *resolved.parents):
            broken.append(target)
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: links that do not resolve: {broken}"


def test_the_screenshot_script_takes_the_row_the_readme_describes() -> None:
    """docs/img/review.png is retaken by scripts/review_screenshot.py on its default row: the
    README names that row, and the bundled traffic asks that question."""
    from tests.support import load_script

    question = load_script("scripts/review_screenshot.py").QUESTION
    asked = [json.loads(line)["user_input"] for line in TRAFFIC.read_text().splitlines()]
    assert any(q.startswith(question) for q in asked), question
    said = " ".join(readme().split())
    assert "at the row about cancelling a monthly plan" in said and "monthly plan" in question
    assert "`python3 scripts/review_screenshot.py` takes it again, on the same row" in said


def test_the_link_check_sees_links() -> None:
    """The checker finds the README's links, so a broken one cannot slip through unparsed."""
    links = list(relative_links(README))
    assert "docs/img/review.png" in links
    assert "docs/operations.md#delivery" in links
    assert slug("Prometheus series and endpoints") == "prometheus-series-and-endpoints"
    assert slug("The `demo` extra, and why") == "the-demo-extra-and-why"


#: a module docstring's pointer: docs/PAGE.md, "Heading" (quotes may be typographic)
DOCSTRING_POINTER = re.compile(r"(docs/[\w-]+\.md),\s+[\"“]([^\"”]+)[\"”]")


def test_docstring_pointers_name_real_headings() -> None:
    """Every `docs/PAGE.md, "Heading"` a runtime module names is a heading of that page."""
    seen = 0
    broken = []
    for path in sorted((ROOT / "monitor").rglob("*.py")):
        text = " ".join(path.read_text(encoding="utf-8").split())
        for page, heading in DOCSTRING_POINTER.findall(text):
            seen += 1
            target = ROOT / page
            if not target.exists() or slug(heading) not in anchors(target):
                broken.append(f"{path.relative_to(ROOT)}: {page}, {heading!r}")
    assert seen > 20, "the pattern no longer finds the docstrings' pointers"
    assert not broken, broken
