"""Test doubles shared by the tests and the benchmarks (not part of the product package)."""

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

#: the repository's root (tests/support/__init__.py is two levels below it)
ROOT = Path(__file__).resolve().parents[2]


def load_script(path: str, name: str | None = None) -> ModuleType:
    """The repository's script at ``path`` (``scripts/render_alerts.py``: no package) as a
    module, registered in `sys.modules` as ``name`` (its file's stem by default), where
    its dataclasses look their module up."""
    spec = importlib.util.spec_from_file_location(name or Path(path).stem, ROOT / path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
