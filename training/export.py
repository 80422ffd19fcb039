"""Turn a support-model checkpoint into the shipped model: ONNX, int8, sha256 pinned.

    python -m training.export [--checkpoint .cache/support/checkpoint.pt] \
        [--out monitor/judges/local/model]

Writes ``support.onnx`` (int8 weights: onnxruntime's dynamic quantisation of the
MatMul, Gemm and embedding weights, per channel), ``tokenizer.json`` (all-MiniLM-L6-v2's,
unchanged) and ``SHA256SUMS``; pins the same sha256 in
`monitor.judges.local.entailment.PINNED` (checked before the sidecar loads them);
then compares the int8 graph's logits with torch's on a few pairs.
"""

from __future__ import annotations

import argparse
import hashlib
import re
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from training.cross_encoder import ROOT, base_dir

OUT = ROOT / "monitor" / "judges" / "local" / "model"
INPUTS = ("input_ids", "attention_mask", "token_type_ids")
SUPPORT_PY = ROOT / "monitor" / "judges" / "local" / "entailment.py"
PROBE = [
    ("Employees may carry over five days.", "Employees may carry over up to five unused days."),
    ("Employees may carry over ten days.", "Employees may carry over up to five unused days."),
    (
        "PayPal is accepted.",
        "We accept credit cards and SEPA direct debit. PayPal is not accepted.",
    ),
]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def pin(digests: dict[str, str]) -> None:
    """Write the new files' sha256 into `monitor.judges.local.entailment.PINNED`."""
    source = SUPPORT_PY.read_text(encoding="utf-8")
    for name, digest in digests.items():
        source = re.sub(rf'("{re.escape(name)}": )"[0-9a-f]*"', rf'\1"{digest}"', source)
    SUPPORT_PY.write_text(source, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> int:
    import onnxruntime as ort
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from tokenizers import Tokenizer
    from transformers import BertConfig, BertForSequenceClassification

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--checkpoint", type=Path, default=ROOT / ".cache" / "support" / "checkpoint.pt"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)

    base = base_dir()
    config = BertConfig.from_json_file(str(base / "config.json"))
    config.num_labels = 1
    model = BertForSequenceClassification(config)
    saved = torch.load(args.checkpoint)
    model.load_state_dict(saved["model"])
    model.eval()
    print(f"checkpoint at step {saved['step']}", flush=True)

    tokenizer = Tokenizer.from_file(str(base / "tokenizer.json"))
    tokenizer.enable_truncation(int(saved.get("max_length", 160)))
    tokenizer.enable_padding()
    enc = tokenizer.encode_batch(PROBE)
    feeds = {
        "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
    }
    with torch.no_grad():
        expected = model(**{k: torch.from_numpy(v) for k, v in feeds.items()}).logits[:, 0].numpy()

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        fp32 = Path(tmp) / "support.fp32.onnx"
        torch.onnx.export(
            model,
            tuple(
                torch.from_numpy(feeds[k])
                for k in ("input_ids", "attention_mask", "token_type_ids")
            ),
            str(fp32),
            input_names=["input_ids", "attention_mask", "token_type_ids"],
            output_names=["logits"],
            dynamic_axes={
                name: {0: "batch", 1: "tokens"}
                for name in ("input_ids", "attention_mask", "token_type_ids")
            }
            | {"logits": {0: "batch"}},
            opset_version=17,
            dynamo=False,
        )
        quantize_dynamic(
            str(fp32),
            str(args.out / "support.onnx"),
            weight_type=QuantType.QInt8,
            op_types_to_quantize=["MatMul", "Gemm", "Gather"],
            # a scale per output channel: on held-out pairs the logits stay within 0.08 of
            # float32's on average and rank them alike (per tensor: 0.17, and lower AUROC)
            per_channel=True,
        )
    shutil.copyfile(base / "tokenizer.json", args.out / "tokenizer.json")
    sums = "".join(
        f"{sha256(args.out / name)}  {name}\n" for name in ("support.onnx", "tokenizer.json")
    )
    (args.out / "SHA256SUMS").write_text(sums)
    if args.out.resolve() == OUT.resolve():
        pin({name: sha256(args.out / name) for name in ("support.onnx", "tokenizer.json")})

    session = ort.InferenceSession(
        str(args.out / "support.onnx"), providers=["CPUExecutionProvider"]
    )
    got = session.run(["logits"], feeds)[0][:, 0]
    size = (args.out / "support.onnx").stat().st_size / 2**20
    print(
        f"support.onnx: {size:.1f} MiB; int8 vs torch logits: max |diff| "
        f"{float(np.max(np.abs(got - expected))):.4f}"
    )
    for (s, w), a, b in zip(PROBE, expected, got, strict=True):
        print(f"  torch {a:+.3f}  int8 {b:+.3f}  {s!r} | {w!r}")
    print(sums, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
