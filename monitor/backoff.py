"""How long to ask for: an exponential delay with a cap, for whatever cannot take records now.

A sink that raises `monitor.sinks.SinkBackpressure` and the dead-letter producer
compute their ``retry_after`` with a `Backoff`; the pipeline only waits that long
(docs/design.md, "Data flow").
"""

from __future__ import annotations


class Backoff:
    """``first``, doubled with each failure in a row up to ``cap``; ``first`` again after
    a success."""

    def __init__(self, first: float = 0.1, cap: float = 5.0) -> None:
        self.first = first
        self.cap = cap
        self.delay = 0.0

    def failed(self) -> float:
        """Another failure: the delay to ask for now."""
        self.delay = self.first if self.delay == 0 else min(self.cap, self.delay * 2)
        return self.delay

    def succeeded(self) -> None:
        self.delay = 0.0
