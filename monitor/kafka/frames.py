"""A fix for how aiokafka's connections hold response frames (memory), installed with a check.

`release_frames` installs `_read_frames` when aiokafka's reader is the one it was written
for; every Kafka client of the monitor calls it before it starts. See docs/design.md,
"The Kafka source".
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any

from aiokafka.conn import AIOKafkaConnection


async def _read_frames(self_ref: Callable[[], Any]) -> None:
    """`AIOKafkaConnection._read` (as in aiokafka 0.14) with two changes, both about memory.

    1. ``del resp`` once a frame is handled. The original keeps the last frame in
       ``resp`` while it waits for the next one, so a connection's last fetch
       response (up to ``fetch_max_bytes``; the whole rest of every partition from a
       broker that ignores it) stays in memory next to the records decoded from it
       for as long as no other response comes on that connection — while the
       consumer is busy, for good.
    2. A large frame is read into a buffer of its size (`_read_frame`), not grown
       chunk by chunk in the stream's buffer, whose every growth copies it.
    """
    self = self_ref()
    if self is None:
        return
    reader = self._reader
    del self
    while True:
        resp = await reader.readexactly(4)
        (size,) = struct.unpack(">i", resp)
        resp = await _read_frame(reader, size)
        self = self_ref()
        if self is None:
            return
        self._handle_frame(resp)
        del self, resp


#: frames up to this size are read in one piece (the stream's own buffer)
_FRAME_PIECE = 1 << 20


async def _read_frame(reader: asyncio.StreamReader, size: int) -> bytes:
    """``size`` bytes from ``reader``; a large frame costs twice its size at most, briefly."""
    if size <= _FRAME_PIECE:
        return await reader.readexactly(size)
    frame = bytearray(size)
    with memoryview(frame) as view:
        for start in range(0, size, _FRAME_PIECE):
            end = min(size, start + _FRAME_PIECE)
            view[start:end] = await reader.readexactly(end - start)
    return bytes(frame)


#: the local names of the aiokafka reader `_read_frames` replaces, in order
_KNOWN_READER = ("self_ref", "self", "reader", "resp", "size")


def release_frames() -> bool:
    """Install `_read_frames` if aiokafka's reader is the one it was written for; True if so.

    The check is structural (same arguments and local names, same calls), so a
    changed reader in a later aiokafka is left alone rather than replaced blindly.
    """
    current = AIOKafkaConnection.__dict__.get("_read")
    function = getattr(current, "__func__", None)
    if function is _read_frames:
        return True
    code = getattr(function, "__code__", None)
    if (
        code is None
        or code.co_varnames != _KNOWN_READER
        or not {"readexactly", "_handle_frame", "_reader"} <= set(code.co_names)
    ):
        return False
    AIOKafkaConnection._read = staticmethod(_read_frames)
    return True
