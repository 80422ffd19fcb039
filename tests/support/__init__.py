"""Test doubles shared by the tests and the benchmarks (not part of the product package)."""

from pathlib import Path

#: the repository's root (tests/support/__init__.py is two levels below it)
ROOT = Path(__file__).resolve().parents[2]
