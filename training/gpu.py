"""Train the support model on a lent GPU: pack what the run needs, then take its weights back.

    python -m training.gpu pack [--dir .gpu] [--nli PATH]  # here: the mix, windows, base
    bash training/gpu.sh                                   # there: train, write $OUT
    python -m training.gpu unpack PARTS... [--out .cache/support/checkpoint.pt]
    python -m training.export --checkpoint .cache/support/checkpoint.pt

A lent machine has torch but neither this project's runtime, the NLI pairs (``--nli``, else
``nli/`` under ``$RAGMON_DEV_DATA``) nor the base weights' package, and what travels there
is limited (the working tree and a few carried folders). So ``pack`` writes to ``--dir``:
the mix (``training.cross_encoder``'s own, built once with ``--steps 0``, xz-compressed),
the realistic set's statements and windows (``--candidates``), and all-MiniLM-L6-v2's
weights in float16 with its config and tokenizer. ``training/gpu.sh`` trains from them;
its weights come back in pieces of 15 MiB, which ``unpack`` joins into a checkpoint for
`training.export`. See docs/model.md, "Training".
"""

from __future__ import annotations

import argparse
import lzma
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

from training.cross_encoder import ROOT, base_dir


def pack(folder: Path, nli: Path | None = None) -> None:
    from safetensors.torch import load_file, save_file

    from training import cross_encoder

    work = folder / "out"
    work.mkdir(parents=True, exist_ok=True)
    given = [] if nli is None else ["--nli", str(nli)]
    cross_encoder.main(
        ["--steps", "0", "--out", str(work), "--candidates", str(folder / "candidates.json")]
        + given
    )
    with (work / "mix.jsonl").open("rb") as src, lzma.open(folder / "mix.jsonl.xz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.rmtree(work)
    base, out = base_dir(), folder / "base"
    out.mkdir(exist_ok=True)
    for name in ("config.json", "tokenizer.json"):
        shutil.copyfile(base / name, out / name)
    weights = load_file(str(base / "model.safetensors"))
    save_file(
        {k: v.half().contiguous() for k, v in weights.items()}, str(out / "model.safetensors")
    )
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20
    print(f"{folder}: {size:.1f} MiB to carry", flush=True)


def unpack(parts: Sequence[Path], checkpoint: Path) -> None:
    import torch
    from safetensors.torch import load

    data = b"".join(p.read_bytes() for p in sorted(parts))
    state = {k: v.float() for k, v in load(data).items()}
    checkpoint.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"model": state, "max_length": 160}, checkpoint)
    print(f"{checkpoint}: {len(state)} tensors", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    packing = sub.add_parser("pack", help="write what the GPU run needs")
    packing.add_argument("--dir", type=Path, default=ROOT / ".gpu")
    packing.add_argument("--nli", type=Path, help="default: nli/ under $RAGMON_DEV_DATA")
    unpacking = sub.add_parser("unpack", help="join the weights' pieces into a checkpoint")
    unpacking.add_argument("parts", type=Path, nargs="+")
    unpacking.add_argument(
        "--out", type=Path, default=ROOT / ".cache" / "support" / "checkpoint.pt"
    )
    args = parser.parse_args(argv)
    if args.command == "pack":
        pack(args.dir, args.nli)
    else:
        unpack(args.parts, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
