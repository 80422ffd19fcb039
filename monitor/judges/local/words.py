"""Stored MiniLM vectors of the vocabulary's whole words, so single words skip the model.

The local judge compares words by MiniLM similarity (synonyms, other word
forms), and in cold traffic those single-word texts are about a third of
the word pieces it sends to the model. Most of them are whole words of the
WordPiece vocabulary, and such a word always reaches the model as the same
three pieces ``[CLS] word [SEP]``: its vector is a constant. This module
keeps those constants, computed once by the exact graph the embedder runs
(``scripts/build_word_table.py``), in ``words.npz`` next to this file.

- **Which words:** every vocabulary entry made only of ASCII letters and
  digits (no ``##`` continuation, no reserved entry), ≈ 22,700 words. A text
  is looked up when it is ASCII and, stripped and lowercased, is one of them;
  the tokenizer would turn exactly such a text into ``[CLS] word [SEP]``
  (the test checks this for every word), so the lookup and the model see the
  same input.
- **Storage:** each unit vector as int8 (its largest component at ±127) and
  one float32 factor that brings the row back to unit length: ≈ 8.8 MB, and
  a stored vector is within cosine 0.9998 of the computed one (the int8
  graph itself is within 0.998 of float32).
- **Staleness:** the table records the sha256 of the graph it was computed
  with (the model bytes onnxruntime loads, the shipped
  ``model/embedder-int8.onnx``, plus the disabled optimisers). `MiniLMEmbedder`
  uses it only when its own graph has the same fingerprint: a rebuilt graph,
  another model file or float32 arithmetic (a CPU without VNNI) just computes
  every word as before. Rebuild with ``python3 scripts/build_word_table.py``
  after ``scripts/build_embedder_graph.py`` changed the graph; the tests fail
  until the shipped table matches.

This module only reads the table: the build (the model run over every word) is
that script, which no runtime module imports.
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
