"""Sources and sinks never import each other: each is handed what it reports to.

Nor does aiokafka reach past the Kafka edge (`monitor.kafka`, `monitor.sources.kafka`).

The imports are read from the source files with `ast` (every ``import``, ``from ...
import``, relative or inside a function, and ``importlib.import_module("...")`` with a
literal name), so a lazy import inside a method counts as much as one at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.support import ROOT

PACKAGE = ROOT / "monitor"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported_modules(path: Path, name: str | None = None) -> set[str]:
    """Every module ``path`` imports, as absolute dotted names (``from a import b``: a and a.b).

    ``name`` is the module's dotted name (by default, from its place under ``monitor/``).
    """
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    name = name if name is not None else module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.add(target)
            found.update(f"{target}.{alias.name}" for alias in node.names)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute | ast.Name)
            and (node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id)
            == "import_module"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            found.add(node.args[0].value)
    return found


def within(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def files(package: str) -> list[Path]:
    found = sorted((PACKAGE / package).rglob("*.py"))
    assert found, f"no modules under monitor/{package}"
    return found


@pytest.mark.parametrize(
    ("layer", "forbidden"), [("sources", "monitor.sinks"), ("sinks", "monitor.sources")]
)
def test_sources_and_sinks_never_import_each_other(layer: str, forbidden: str) -> None:
    crossing = {
        module_name(path): sorted(m for m in imported_modules(path) if within(m, forbidden))
        for path in files(layer)
    }
    assert {name: found for name, found in crossing.items() if found} == {}


def test_aiokafka_is_imported_only_at_the_kafka_edge() -> None:
    importers = {
        module_name(path)
        for path in sorted(PACKAGE.rglob("*.py"))
        if any(within(m, "aiokafka") for m in imported_modules(path))
    }
    assert "monitor.sources.kafka" in importers
    outside = {m for m in importers if not within(m, "monitor.kafka")} - {"monitor.sources.kafka"}
    assert outside == set()


def test_the_import_walk_sees_every_kind_of_import(tmp_path: Path) -> None:
    # the walk itself, on the real tree: a top-level import and a relative package name
    kafka = imported_modules(PACKAGE / "sources" / "kafka.py")
    assert "monitor.sources.offsets" in kafka and "monitor.telemetry.Exporter" in kafka
    assert module_name(PACKAGE / "sources" / "__init__.py") == "monitor.sources"
    # and on a module written to break the rule in each way the walk must catch
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import importlib\n"
        "from ..sinks import SinkError\n"
        "def later():\n"
        "    import monitor.sinks.prometheus\n"
        "    return importlib.import_module('monitor.sinks.backlog')\n",
        encoding="utf-8",
    )
    found = imported_modules(probe, "monitor.sources.probe")
    assert {"monitor.sinks", "monitor.sinks.prometheus", "monitor.sinks.backlog"} <= found
