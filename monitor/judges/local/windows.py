"""Evidence windows: the short spans of the contexts a statement is checked against.

See docs/model.md.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.text.sentences import sentences

#: Sentences per window, and the longest context kept whole as one window.
SENTENCES = 2
WHOLE = 4
#: Windows read per statement.
TOP = 2


def windows_of(contexts: Sequence[str]) -> list[str]:
    """The windows of ``contexts``, in order, without repeats."""
    found: dict[str, None] = {}
    for text in contexts:
        said = sentences(text) or ([text.strip()] if text.strip() else [])
        if len(said) <= WHOLE and said:
            found[" ".join(said)] = None
        for k in range(max(0, len(said) - SENTENCES + 1)):
            found[" ".join(said[k : k + SENTENCES])] = None
        if len(said) == 1:
            found[said[0]] = None
    return list(found)


def nearest(
    embedder: MiniLMEmbedder, statements: Sequence[str], windows: Sequence[str], top: int = TOP
) -> list[list[int]]:
    """For each statement, the indices of its ``top`` nearest windows (MiniLM cosine),
    nearest first (all of them, in order, when there are no more)."""
    if not statements:
        return []
    if len(windows) <= top:
        return [list(range(len(windows))) for _ in statements]
    vectors = embedder.embed([*statements, *windows])
    sims = vectors[: len(statements)] @ vectors[len(statements) :].T
    return [[int(i) for i in np.argsort(-row, kind="stable")[:top]] for row in sims]
