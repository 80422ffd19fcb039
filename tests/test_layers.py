"""The layers of `monitor`: what may import what.

- No import cycle: neither between the packages of `monitor` (a package is the first two
  parts of a module's name: ``monitor.metrics``, ``monitor.judges``, ``monitor.pipeline``)
  nor between modules. The text helpers both the metrics and the judges use live below
  both (`monitor.text`), and the judge steps with the judges (`monitor.judges.steps`).
- No runtime module imports a build script (`is_build_script`: anything under
  ``scripts/`` or ``training/``, or a module named ``build_*``).
- Sources and sinks never import each other: each is handed what it reports to.
- aiokafka does not reach past the Kafka edge (`monitor.kafka`, `monitor.sources.kafka`).
- In the whole tree (`TREE`: the runtime, the build scripts, the benches, training, the
  tests), no module imports one that imports it back, and none imports a layer above its
  own (`LAYERS`).
- The demo's broker and Postgres reach the tests and benches through one module
  (`tests.support.embedded`).

The imports are read from the source files with `ast` (every ``import``, ``from ...
import``, relative or inside a function, and ``importlib.import_module("...")`` with a
literal name), so a lazy import inside a method counts as much as one at the top.
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.support import ROOT

PACKAGE = ROOT / "monitor"
#: the tree's top-level packages: every module under them is in `tree_graph`
TREE = ("monitor", "scripts", "bench", "training", "tests")
#: the tree's layers, bottom first (`layer_of`): a module imports from its own layer and
#: those below, never from one above. The tests' helpers sit below the benches, which run
#: the test suite's judge server and broker; training fits on the benches' data sets.
LAYERS = (
    ("monitor",),
    ("scripts",),
    ("tests.support", "tests.fixtures"),
    ("bench",),
    ("training",),
    ("tests",),
)
#: where the build scripts live (`is_build_script`): a runtime module must import none
BUILD_ROOTS = (ROOT / "scripts", ROOT / "training")


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = list(path.relative_to(package.parent).with_suffix("").parts)
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


@pytest.mark.parametrize(
    ("library", "edge"),
    [
        ("openai", {"monitor.judges.llm", "monitor.judges.failures"}),
        ("asyncpg", {"monitor.backlog.store"}),
    ],
)
def test_the_other_network_libraries_are_each_imported_at_one_edge(
    library: str, edge: set[str]
) -> None:
    importers = {
        module_name(path)
        for path in sorted(PACKAGE.rglob("*.py"))
        if any(within(m, library) for m in imported_modules(path))
    }
    assert importers == edge


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


# --- import cycles and build scripts

Graph = dict[str, set[str]]


def import_graph(package: Path = PACKAGE, build_roots: tuple[Path, ...] = BUILD_ROOTS) -> Graph:
    """Every module under ``package`` → the modules under it or under ``build_roots`` (the
    build scripts' folders) it imports.

    An imported name is resolved to the longest module it starts with (``from
    monitor.judges import Prompt`` → ``monitor.judges``); a module's import of itself
    is left out, and so is an import of anything else (the standard library, numpy).
    """
    paths = {module_name(path, package): path for path in sorted(package.rglob("*.py"))}
    known = set(paths) | {
        module_name(path, root) for root in build_roots for path in sorted(root.rglob("*.py"))
    }
    return _graph(paths, known)


def tree_graph(root: Path = ROOT, tops: Sequence[str] = TREE) -> Graph:
    """`import_graph` over the whole tree: every module under ``root``'s ``tops`` → the
    modules among them it imports."""
    paths = {
        module_name(path, root / top): path
        for top in tops
        for path in sorted((root / top).rglob("*.py"))
    }
    return _graph(paths, set(paths))


def _graph(paths: dict[str, Path], known: set[str]) -> Graph:
    """Each module of ``paths`` → the modules of ``known`` it imports (`import_graph`)."""
    graph: Graph = {}
    for name, path in paths.items():
        targets: set[str] = set()
        for imported in imported_modules(path, name):
            while imported and imported not in known:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def package_of(module: str) -> str:
    """The package a module belongs to: the first two parts of its name."""
    return ".".join(module.split(".")[:2])


def package_graph(graph: Graph) -> Graph:
    """`import_graph` between packages (`package_of`): an import inside a package is no edge."""
    packages: Graph = {package_of(m): set() for m in graph}
    for module, targets in graph.items():
        packages[package_of(module)].update(
            package_of(t) for t in targets if package_of(t) != package_of(module)
        )
    return packages


def cycles(graph: Graph) -> list[list[str]]:
    """One cycle through each strongly connected component of more than one node, as the
    path ``[a, b, ..., a]`` (Tarjan's algorithm, without recursion)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)
    return [_cycle_through(graph, component) for component in components]


def _cycle_through(graph: Graph, component: set[str]) -> list[str]:
    """The shortest path from the component's first node back to itself, inside it."""
    start = min(component)
    came_from: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following: list[str] = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(came_from[path[-1]])
                    return [*reversed(path), start]
                if nxt not in came_from:
                    came_from[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle in the component {sorted(component)}")  # pragma: no cover


def describe(cycle: list[str], graph: Graph) -> str:
    """``a → b → a``, each package step with the module imports that make it."""
    steps = []
    for a, b in zip(cycle, cycle[1:], strict=False):
        why = sorted(
            f"{m} imports {t}"
            for m, targets in graph.items()
            if package_of(m) == a
            for t in targets
            if package_of(t) == b
        )
        steps.append(f"{a} → {b}" + (f" ({'; '.join(why)})" if a != b and why else ""))
    return "\n  ".join(steps)


def is_build_script(module: str) -> bool:
    """A module that makes a shipped file rather than running in the monitor: anything under
    ``scripts/`` or ``training/`` (which fits models, with torch), or a module named
    ``build_*`` wherever it is."""
    return (
        module in ("scripts", "training")
        or module.startswith(("scripts.", "training."))
        or (module.rpartition(".")[2].startswith("build_"))
    )


def test_no_package_of_monitor_imports_another_that_imports_it_back() -> None:
    graph = import_graph()
    found = cycles(package_graph(graph))
    assert found == [], "import cycles between packages:\n  " + "\n  ".join(
        describe(c, graph) for c in found
    )


def test_no_module_of_monitor_imports_one_that_imports_it_back() -> None:
    graph = import_graph()
    found = cycles(graph)
    assert found == [], "import cycles between modules:\n  " + "\n  ".join(
        " → ".join(c) for c in found
    )


def runtime_imports_of_build_scripts(graph: Graph) -> dict[str, list[str]]:
    """The modules of ``graph`` that are no build script and import one, with what they import."""
    found = {
        module: sorted(t for t in targets if is_build_script(t))
        for module, targets in graph.items()
        if not is_build_script(module)
    }
    return {module: scripts for module, scripts in found.items() if scripts}


def test_no_runtime_module_imports_a_build_script() -> None:
    assert runtime_imports_of_build_scripts(import_graph()) == {}


def test_the_cycle_check_finds_and_prints_a_cycle(tmp_path: Path) -> None:
    # a tree that breaks each rule: two packages importing each other (through a third
    # module), two modules importing each other, and a runtime module using a build script
    tree = tmp_path / "monitor"
    sources = {
        "__init__.py": "",
        "a/__init__.py": "",
        "a/one.py": "from monitor.b.two import helper\n",
        "b/__init__.py": "",
        "b/two.py": "def helper() -> None:\n    from monitor.c import three\n",
        "c.py": "from .a import one\n",
        "d/__init__.py": "",
        "d/left.py": "from monitor.d import right\n",
        "d/right.py": "import monitor.d.left\nimport scripts.build_word_table\n",
        "d/build_index.py": "from monitor.d import left\n",
        "e.py": "def judge() -> None:\n    from training.fit import auroc\n",
    }
    for name, text in sources.items():
        (tree / name).parent.mkdir(parents=True, exist_ok=True)
        (tree / name).write_text(text, encoding="utf-8")
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    (scripts / "build_word_table.py").write_text("import monitor.d.left\n", encoding="utf-8")
    training = tmp_path / "training"
    training.mkdir()
    (training / "__init__.py").write_text("", encoding="utf-8")
    (training / "fit.py").write_text("def auroc() -> None: ...\n", encoding="utf-8")
    graph = import_graph(tree, (scripts, training))
    assert runtime_imports_of_build_scripts(graph) == {
        "monitor.d.right": ["scripts.build_word_table"],
        "monitor.e": ["training.fit"],
    }
    assert cycles(package_graph(graph)) == [["monitor.a", "monitor.b", "monitor.c", "monitor.a"]]
    assert cycles(graph) == [
        ["monitor.a.one", "monitor.b.two", "monitor.c", "monitor.a.one"],
        ["monitor.d.left", "monitor.d.right", "monitor.d.left"],
    ]
    printed = describe(["monitor.a", "monitor.b", "monitor.c", "monitor.a"], graph)
    assert "monitor.a → monitor.b (monitor.a.one imports monitor.b.two)" in printed
    assert "monitor.c → monitor.a (" in printed and "monitor.c imports monitor.a.one" in printed
    assert is_build_script("scripts.build_word_table") and is_build_script("monitor.d.build_index")
    assert not is_build_script("monitor.judges.local.words")
    assert "scripts.build_word_table" in imported_modules(
        tree / "d" / "right.py", "monitor.d.right"
    )


# --- the whole tree


def layer_of(module: str) -> int:
    """The index in `LAYERS` of ``module``'s layer: the one that names the longest prefix."""
    prefixes = [(len(p), i) for i, layer in enumerate(LAYERS) for p in layer if within(module, p)]
    assert prefixes, f"{module} is in no layer"
    return max(prefixes)[1]


def arrows_up(graph: Graph) -> dict[str, list[str]]:
    """The modules of ``graph`` that import one of a layer above their own, with those."""
    found = {
        module: sorted(t for t in targets if layer_of(t) > layer_of(module))
        for module, targets in graph.items()
    }
    return {module: above for module, above in found.items() if above}


def test_no_module_of_the_tree_imports_one_that_imports_it_back() -> None:
    found = cycles(tree_graph())
    assert found == [], "import cycles:\n  " + "\n  ".join(" → ".join(c) for c in found)


def test_no_module_of_the_tree_imports_from_a_layer_above_its_own() -> None:
    assert arrows_up(tree_graph()) == {}


def test_the_tree_checks_see_lazy_imports_and_arrows_up(tmp_path: Path) -> None:
    # a bench and a training module that import each other, one of them lazily through
    # importlib: a cycle, and the bench's import of training is an arrow up
    sources = {
        "monitor/__init__.py": "",
        "bench/__init__.py": "",
        "bench/harness.py": (
            "import importlib\n"
            "def fit_half() -> object:\n"
            "    return importlib.import_module('training.combiner')\n"
        ),
        "training/__init__.py": "",
        "training/combiner.py": "from bench.harness import fit_half\n",
    }
    for name, text in sources.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    graph = tree_graph(tmp_path, ("monitor", "bench", "training"))
    assert cycles(graph) == [["bench.harness", "training.combiner", "bench.harness"]]
    assert arrows_up(graph) == {"bench.harness": ["training.combiner"]}
    assert layer_of("tests.support.kafka") < layer_of("bench.soak") < layer_of("tests.test_app")


def test_the_demos_broker_and_postgres_reach_the_tests_through_one_module() -> None:
    servers = ("monitor.demo.broker", "monitor.demo.postgres")
    importers = {
        module
        for module, targets in tree_graph().items()
        if not within(module, "monitor") and any(within(t, s) for t in targets for s in servers)
    }
    # tests/demo/ tests the demo itself
    assert {m for m in importers if not within(m, "tests.demo")} == {"tests.support.embedded"}
