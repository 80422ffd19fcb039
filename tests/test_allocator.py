"""glibc's mmap threshold, pinned by `rag-monitor run` so the heap does not creep (Linux).

Each case runs in a fresh interpreter: the threshold is process-wide and a block
freed by the test process itself would move it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support import ROOT

#: a fresh interpreter: start-up frees a 4 MB block (as loading the token encoding does),
#: then a 1 MB block is asked for; prints whether it got a mapping of its own
_PROBE = """
import ctypes, sys
from monitor.allocator import pin_mmap_threshold

class Info(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost"
                .split()]

libc = ctypes.CDLL(None)
libc.mallinfo2.restype = Info
pinned = pin_mmap_threshold() if sys.argv[1] == "pin" else None
start_up = bytearray(4_000_000)
del start_up
before = libc.mallinfo2().hblkhd
block = bytearray(1_000_000)
print(pinned, libc.mallinfo2().hblkhd - before >= len(block))
"""


def probe(mode: str, **env: str) -> tuple[str, str]:
    clean = {k: v for k, v in os.environ.items()
             if k not in ("MALLOC_MMAP_THRESHOLD_", "GLIBC_TUNABLES")}  # fmt: skip
    clean.update(PYTHONPATH=str(ROOT), **env)
    result = subprocess.run([sys.executable, "-c", _PROBE, mode], capture_output=True, text=True,
                            timeout=60, cwd=ROOT, env=clean)  # fmt: skip
    assert result.returncode == 0, result.stderr
    pinned, mapped = result.stdout.splitlines()[-1].split()  # (after any log line)
    return pinned, mapped


def test_without_the_pin_a_freed_large_block_moves_later_ones_into_the_heap() -> None:
    # the behaviour the pin exists for, so the next test can fail
    assert probe("none") == ("None", "False")


def test_the_pinned_threshold_gives_large_blocks_their_own_mapping_after_start_up() -> None:
    assert probe("pin") == ("True", "True")


@pytest.mark.parametrize(
    "env",
    [
        {"MALLOC_MMAP_THRESHOLD_": "262144"},
        {"GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=262144"},
    ],
)
def test_a_threshold_the_operator_set_is_left_alone(env: dict[str, str]) -> None:
    # 262144 fixes it too (a set threshold is never raised), so the block is still mapped
    assert probe("pin", **env) == ("False", "True")
