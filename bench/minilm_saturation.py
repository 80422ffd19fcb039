"""Why the int8 graph ships for VNNI CPUs only: onnxruntime's AVX2 u8·s8 kernel, emulated.

    python -m bench.minilm_saturation

Without VNNI, onnxruntime multiplies uint8 activations by int8 weights with
``vpmaddubsw``, which adds each pair of neighbouring products (along the inner
dimension) in a saturating 16-bit integer before the 32-bit sums. This runs the
shipped graph (``model/embedder-int8.onnx``) on a few sentences with every
quantised activation of its 36 ``MatMulIntegerToFloat`` products as an extra
output, and recomputes each product twice in numpy: exactly (int32, what VNNI
dot products give) and with the pairs clipped to int16. It prints how many pairs
clip and how far the clipped products land from the exact ones.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from monitor.judges.local.embedder import (
    GRAPH_PATH,
    GRAPH_SHA256,
    build_tokenizer,
    read_pinned,
)
from scripts.minilm_int8 import GRAPH_OUTPUT, MODEL_GRAPH, ParsedModel
from scripts.onnx_wire import UINT8, int_field, len_field

ROOT = Path(__file__).resolve().parents[1]

TEXTS = [
    "A man is eating a piece of bread.",
    "How do I reset my password?",
    "Byron provided over US$300,000 to the organization.",
    "The refund window is 30 days from delivery, excluding sale items.",
    "Pedro Rodríguez de la Vega won the race in 1968 at Le Mans, driving a Ford GT40.",
]


def with_outputs(model: bytes, names: list[str]) -> bytes:
    """``model`` with the uint8 tensors ``names`` added to its graph's outputs."""
    graph = ParsedModel.parse(model)
    tensor_type = len_field(1, int_field(1, UINT8))  # TypeProto.tensor_type.elem_type
    extra = b"".join(
        len_field(GRAPH_OUTPUT, len_field(1, name) + len_field(2, tensor_type)) for name in names
    )
    body = b"".join(f.raw for f in graph.graph_fields) + extra
    return b"".join(
        len_field(MODEL_GRAPH, body) if f.number == MODEL_GRAPH else f.raw
        for f in graph.model_fields
    )


def main() -> None:
    import onnxruntime as ort

    model = read_pinned(GRAPH_PATH, GRAPH_SHA256)
    graph = ParsedModel.parse(model)
    products = [node for _, node in graph.nodes if node.op == "MatMulIntegerToFloat"]
    inputs = sorted({node.inputs[0] for node in products})
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(
        with_outputs(model, inputs), options, providers=["CPUExecutionProvider"]
    )
    tokenizer = build_tokenizer()
    pairs = clipped_pairs = 0
    worst = 0.0
    errors: list[float] = []
    for text in TEXTS:
        ids = np.array([tokenizer.encode(text).ids], np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        feeds["token_type_ids"] = np.zeros_like(ids)
        activations = dict(zip(inputs, session.run(inputs, feeds), strict=True))
        for node in products:
            x = activations[node.inputs[0]]
            a = x.reshape(-1, x.shape[-1]).astype(np.int32)
            b = graph.tensors[node.inputs[1]].astype(np.int32)
            pair = a[:, 0::2, None] * b[None, 0::2, :] + a[:, 1::2, None] * b[None, 1::2, :]
            clipped = np.clip(pair, -32768, 32767)
            pairs += pair.size
            clipped_pairs += int((pair != clipped).sum())
            exact = (a - 128) @ b  # zero point 128
            emulated = clipped.sum(axis=1) - 128 * b.sum(axis=0)[None, :]
            scale = max(int(np.abs(exact).max()), 1)
            worst = max(worst, float(np.abs(emulated - exact).max()) / scale)
            errors.append(float(np.abs(emulated - exact).sum() / max(np.abs(exact).sum(), 1)))
    print(
        f"{len(TEXTS)} sentences, {len(products)} products: {clipped_pairs} of {pairs} pairs clip "
        f"({100 * clipped_pairs / pairs:.4f} %); largest error of one output "
        f"{100 * worst:.0f} % of its product's largest |value|; relative L1 error per "
        f"product: mean {np.mean(errors):.4f}, max {max(errors):.4f}"
    )


if __name__ == "__main__":
    main()
