"""The stored MiniLM vectors of the vocabulary's whole words (``words.npz``), read only.

See docs/local-judge.md, "Stored word vectors"; built by ``scripts/build_word_table.py``.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import numpy.typing as npt
import structlog

log = structlog.get_logger("monitor.judges.local.words")

TABLE_PATH = Path(__file__).with_name("words.npz")
VOCAB_PATH = Path(__file__).with_name("vocab.txt")


def fingerprint(model: bytes, disabled_optimizers: Sequence[str]) -> str:
    """What a vector depends on: the graph bytes onnxruntime loads and its disabled rewrites."""
    digest = hashlib.sha256(model)
    digest.update("\0".join(sorted(disabled_optimizers)).encode())
    return digest.hexdigest()


@lru_cache(maxsize=1)
def table_words() -> tuple[str, ...]:
    """The words the table holds, in vocabulary order (ASCII letters and digits only)."""
    lines = VOCAB_PATH.read_text(encoding="utf-8").splitlines()
    return tuple(w for w in lines if w.isascii() and w.isalnum())


def key(text: str) -> str | None:
    """The table word ``text`` would be looked up as, or None when it cannot be one."""
    if not text.isascii():
        return None
    word = text.strip().lower()
    return word if word.isalnum() else None


class WordTable:
    """Read-only vectors of `table_words`; `get` returns a unit float32 vector or None."""

    def __init__(self, vectors: npt.NDArray[np.int8], scales: npt.NDArray[np.float32]) -> None:
        words = table_words()
        if vectors.shape != (len(words), vectors.shape[1]) or scales.shape != (len(words),):
            raise ValueError("the word table does not match the vocabulary")
        self._row = {w: i for i, w in enumerate(words)}
        self._vectors = vectors
        self._scales = scales

    def __len__(self) -> int:
        return len(self._row)

    def get(self, text: str) -> npt.NDArray[np.float32] | None:
        word = key(text)
        row = None if word is None else self._row.get(word)
        if row is None:
            return None
        vector: npt.NDArray[np.float32] = self._vectors[row].astype(np.float32)
        vector *= self._scales[row]
        return vector


def load(graph: str, path: Path = TABLE_PATH) -> WordTable | None:
    """The stored table when it was computed with ``graph`` (a `fingerprint`), else None.

    Another graph (float32 arithmetic, a changed rewrite) is expected and silent; a
    missing or unreadable file is logged: scoring stays correct, only slower.
    """
    try:
        # our own handle: np.load leaves its file open when the zip is broken
        with path.open("rb") as f, np.load(f, allow_pickle=False) as stored:
            if str(stored["fingerprint"]) != graph:
                return None
            return WordTable(stored["vectors"], stored["scales"])
    except (OSError, KeyError, ValueError, zipfile.BadZipFile) as exc:
        log.warning("word_table_unusable", path=str(path), error=type(exc).__name__)
        return None
