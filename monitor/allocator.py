"""The C allocator's setting that keeps a long-running sidecar's RSS flat (glibc only).

See docs/operations.md, "Memory over time".
"""

from __future__ import annotations

import ctypes
import os

import structlog

#: glibc's ``mallopt`` parameter number for the mmap threshold (``M_MMAP_THRESHOLD``)
_M_MMAP_THRESHOLD = -3
#: glibc's own starting value: blocks this large or larger get their own mapping
MMAP_THRESHOLD = 128 * 1024

log = structlog.get_logger("monitor.allocator")


def _operator_set() -> bool:
    """True when the environment already chose the threshold (glibc read it at start)."""
    tunables = os.environ.get("GLIBC_TUNABLES", "")
    return "MALLOC_MMAP_THRESHOLD_" in os.environ or "glibc.malloc.mmap_threshold" in tunables


def pin_mmap_threshold(size: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at ``size`` bytes; True if this call set it.

    By default glibc raises the threshold to the size of each large block that is
    freed, so the next blocks of that size come from the heap instead of a mapping of
    their own. Start-up frees blocks of several MB (the token encoding), after which
    large buffers of varying sizes come from the heap and leave holes in it that are
    not handed back, so RSS creeps up long after start-up. A threshold set once stays
    where it is.

    Does nothing (False) off glibc, or when ``MALLOC_MMAP_THRESHOLD_`` or
    ``GLIBC_TUNABLES`` already set it.
    """
    if _operator_set():
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 - musl and others have a mallopt that ignores this
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    pinned = bool(mallopt(_M_MMAP_THRESHOLD, size))
    if pinned:
        log.debug("mmap threshold pinned", bytes=size)
    return pinned
