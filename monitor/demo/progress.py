"""The demo's progress on stderr: its steps, one line each, and a tqdm status line of the
pipeline's counters while the sidecar consumes.
"""

from __future__ import annotations

import time
from typing import Any, TextIO

from tqdm import tqdm

PROGRESS_EVERY_TTY = 0.25
PROGRESS_EVERY_PIPE = 5.0


class _StatusBar(tqdm):  # type: ignore[type-arg]
    """tqdm with the pipeline's counters as format fields (tqdm's documented extension point)."""

    monitor_interval = 0  # no tqdm monitor thread: the demo refreshes the line itself

    def __init__(self, counts: dict[str, float], **kwargs: Any) -> None:
        self.counts = counts  # before tqdm's first draw reads it
        super().__init__(**kwargs)

    @property
    def format_dict(self) -> dict[str, Any]:
        return {**super().format_dict, **self.counts}


class Progress:
    """The demo's steps on stderr, and one tqdm status line while the sidecar consumes:
    rewritten in place on a terminal, every few seconds in a pipe."""

    FORMAT = (
        "consumed {n}/{total}  sampled {sampled}  scored {scored}  "
        "flagged {flagged}  skipped {skipped}  [{since:5.1f}s]"
    )

    def __init__(self, stream: TextIO, total: int) -> None:
        self.stream = stream
        self.total = total
        self.tty = bool(getattr(stream, "isatty", lambda: False)())
        self.every = PROGRESS_EVERY_TTY if self.tty else PROGRESS_EVERY_PIPE
        self.started = time.monotonic()
        self._bar: _StatusBar | None = None

    def step(self, message: str) -> None:
        with tqdm.external_write_mode(file=self.stream):  # lifts the status line, if any
            print(f"demo: {message}", file=self.stream, flush=True)

    def update(self, consumed: int, sampled: int, scored: int, flagged: int, skipped: int) -> None:
        counts: dict[str, float] = {
            "sampled": sampled,
            "scored": scored,
            "flagged": flagged,
            "skipped": skipped,
            "since": time.monotonic() - self.started,
        }
        if self._bar is None:
            self._bar = _StatusBar(
                counts, total=self.total, file=self.stream, bar_format=self.FORMAT,
                mininterval=self.every, miniters=0, delay=0, leave=True, disable=False,
            )  # fmt: skip
        self._bar.counts = counts
        self._bar.update(consumed - self._bar.n)  # redraws at most every `every` seconds

    def done(self) -> None:
        bar, self._bar = self._bar, None
        if bar is not None:
            bar.counts["since"] = time.monotonic() - self.started
            bar.close()  # the final line, always drawn, left on screen
