#!/usr/bin/env python3
"""Build the local judge's stored word vectors (``monitor/judges/local/words.npz``).

Runs the embedder's own graph (`monitor.judges.local.embedder.MiniLMEmbedder`,
without a table) over every table word (`monitor.judges.local.words.table_words`)
and stores each unit vector as int8 rows with one float32 factor per row, with
the graph's fingerprint. The runtime only reads the file
(`monitor.judges.local.words.load`); nothing under ``monitor/`` imports this
script. Rebuild after rebuilding the embedder's graph
(``scripts/build_embedder_graph.py``; about 15 s on 2 cores):

    python3 scripts/build_word_table.py            # writes monitor/judges/local/words.npz
    python3 scripts/build_word_table.py OUT.npz    # writes OUT.npz
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the monitor package of this tree, not an installed one

from monitor.judges.local import words  # noqa: E402
from monitor.judges.local.embedder import MiniLMEmbedder  # noqa: E402


def quantise(
    vectors: npt.NDArray[np.float32],
) -> tuple[npt.NDArray[np.int8], npt.NDArray[np.float32]]:
    """int8 rows (largest component at ±127) and the factors that make each row unit length."""
    peak = np.abs(vectors).max(axis=1, keepdims=True)
    q = np.round(vectors / np.maximum(peak, 1e-12) * 127).astype(np.int8)
    norms = np.linalg.norm(q.astype(np.float64), axis=1)
    scales = (1.0 / np.maximum(norms, 1e-12)).astype(np.float32)
    return q, scales


def build(path: Path = words.TABLE_PATH) -> dict[str, Any]:
    """Compute every table word with the model (no table) and write ``path``."""
    from tqdm import tqdm

    embedder = MiniLMEmbedder(cache_size=0, word_table=False)
    embedder.warm_up()
    table = words.table_words()
    step = 2048
    parts = [
        embedder.embed(list(table[i : i + step]))
        for i in tqdm(range(0, len(table), step), desc="words", unit="batch")
    ]
    vectors, scales = quantise(np.concatenate(parts))
    np.savez(path, vectors=vectors, scales=scales, fingerprint=np.array(embedder.graph))
    return {
        "words": len(table),
        "arithmetic": embedder.arithmetic,
        "graph": embedder.graph,
        "bytes": path.stat().st_size,
    }


if __name__ == "__main__":
    print(build(Path(sys.argv[1]) if len(sys.argv) > 1 else words.TABLE_PATH))
