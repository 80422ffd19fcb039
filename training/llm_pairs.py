"""Claim pairs written by an LLM: a paraphrase a passage supports, and it with one fact changed.

    python -m training.llm_pairs --base-url http://127.0.0.1:8091/v1 --model qwen \
        [--out training/data/llm_pairs.jsonl] [--limit 300] [--seed 13]

For each passage window (one or two neighbouring sentences of a context of the realistic
tune split; never the holdout, HaluEval QA or the demo traffic), the model is asked for
a sentence that says one fact of the window in other words, adding nothing, and the same
sentence with exactly one detail changed so that the window no longer supports it. A
reply is kept only when it parses, the paraphrase is not a copy of the window, and the
changed sentence differs from the paraphrase in a few words only. Kept pairs are
appended to ``--out`` as they come (a rerun skips the windows already there), so a long
run can be stopped and resumed. The API key comes from ``RAG_MONITOR_JUDGE_API_KEY``
(any value for a local llama.cpp server).

A small model that judges poorly can still write: this is the way MiniCheck made its
synthetic claims, here with the local 1.5B model a few hundred an hour on two cores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import sys
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path

from monitor.judges.local.lexical.wordforms import content_words
from monitor.text.sentences import sentences, words
from training import data

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "training" / "data" / "llm_pairs.jsonl"

INSTRUCTION = (
    "You write test sentences about a passage. Reply with one JSON object and nothing else."
)
REQUEST = (
    "Passage:\n{window}\n\n"
    "Write two sentences, as an assistant answering a user's question would:\n"
    '- "paraphrase": states one fact of the passage in your own words (different wording, '
    "same meaning), adding nothing the passage does not say;\n"
    '- "changed": the same sentence as "paraphrase" with exactly one detail changed (a '
    "number, a date, a name, who does what, or a condition), so that the passage no longer "
    "supports it.\n"
    'Reply as {{"paraphrase": "...", "changed": "...", "detail": "what you changed"}}'
)


def windows(seed: int) -> list[str]:
    """The passage windows of the tune split's contexts, each once, in a seeded order."""
    found: dict[str, None] = {}
    for group in data.realistic_tune():
        for context in group.contexts:
            said = sentences(context)
            for k in range(len(said)):
                found.setdefault(" ".join(said[k : k + 2]), None)
    ordered = sorted(found)
    random.Random(seed).shuffle(ordered)
    return ordered


def ask(base_url: str, model: str, window: str, key: str) -> str:
    body = json.dumps(
        {
            "model": model,
            "messages": [
                {"role": "system", "content": INSTRUCTION},
                {"role": "user", "content": REQUEST.format(window=window)},
            ],
            "temperature": 0.7,
            "max_tokens": 200,
        }
    ).encode()
    request = urllib.request.Request(
        base_url.rstrip("/") + "/chat/completions",
        data=body,
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        reply = json.loads(response.read())
    return str(reply["choices"][0]["message"]["content"])


def accept(window: str, reply: str) -> dict[str, str] | None:
    """The pair in ``reply`` if it is usable (see the module docstring), else None."""
    start, end = reply.find("{"), reply.rfind("}")
    if start < 0 or end <= start:
        return None
    try:
        got = json.loads(reply[start : end + 1])
    except json.JSONDecodeError:
        return None
    paraphrase, changed = got.get("paraphrase"), got.get("changed")
    if not isinstance(paraphrase, str) or not isinstance(changed, str):
        return None
    paraphrase, changed = paraphrase.strip(), changed.strip()
    if not paraphrase or not changed or paraphrase == changed:
        return None
    said, passage = content_words(paraphrase), set(content_words(window))
    if not said or sum(w in passage for w in said) / len(said) > 0.9 and len(said) > 4:
        return None  # a copy of the window, not a paraphrase
    a, b = words(paraphrase), words(changed)
    differing = len(set(a) ^ set(b))
    if differing == 0 or differing > 6 or abs(len(a) - len(b)) > 3:
        return None  # not one detail changed
    return {"paraphrase": paraphrase, "changed": changed, "detail": str(got.get("detail", ""))}


def _done(out: Path) -> Iterator[str]:
    if out.exists():
        for line in out.read_text(encoding="utf-8").splitlines():
            if line.strip():
                yield json.loads(line)["window_sha256"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", default="qwen")
    parser.add_argument("--out", type=Path, default=OUT)
    parser.add_argument("--limit", type=int, default=300, help="windows asked about")
    parser.add_argument("--seed", type=int, default=13)
    args = parser.parse_args(argv)
    key = os.environ.get("RAG_MONITOR_JUDGE_API_KEY", "local")
    done = set(_done(args.out))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    asked = kept = 0
    with args.out.open("a", encoding="utf-8") as out:
        for window in windows(args.seed)[: args.limit]:
            digest = hashlib.sha256(window.encode()).hexdigest()
            if digest in done:
                continue
            asked += 1
            try:
                pair = accept(window, ask(args.base_url, args.model, window, key))
            except OSError as exc:
                print(f"llm_pairs: request failed: {exc}", file=sys.stderr)
                continue
            if pair is not None:
                kept += 1
                out.write(json.dumps({"window": window, "window_sha256": digest, **pair}) + "\n")
                out.flush()
            print(f"\rasked {asked}, kept {kept}", end="", file=sys.stderr, flush=True)
    print(f"\nllm_pairs: asked {asked}, kept {kept} -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
