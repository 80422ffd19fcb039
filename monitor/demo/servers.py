"""What the demo's embedded servers share (and the tests' judge server): a free port on
loopback, and a ``with`` block that starts a server and closes it.

See docs/demo.md.
"""

from __future__ import annotations

import socket
from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class Server(ABC):
    """A server as a context manager: the ``with`` block starts it and, on the way out,
    closes it; a start that fails half-way is closed before its error goes on."""

    @abstractmethod
    def start(self) -> object: ...

    @abstractmethod
    def close(self) -> None:
        """Stop the server and free what it held; harmless when it is not running."""

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
