"""Hallucination detection: does a detector's faithfulness say what the labels say?

One table for any detector (`bench.harness.Detector`) on the labelled data sets
(`bench.harness.load_dataset`), per data set and detector:

- **answers**: the faithful and hallucinated answers finished (evasive answers and the
  demo's off-topic ones are in no column but their own); **unscoreable**: those the
  detector gave no faithfulness (left out of the AUROC, never flagged);
- **AUROC** of faithfulness (hallucinated = low, `bench.ranking.auroc`), and of the graded
  score where the detector has one (the local judge's mean support of the claims);
- per flag rule, faithfulness < 0.5, < 0.7 (one unsupported claim of three flags) and < 1
  (any unsupported claim, `monitor.flags`' default): the share of answers flagged, the recall on
  hallucinated answers and the flag's precision;
- **evasive flagged**: evasive answers below the default rule (they should be unscoreable);
- **CPU ms / answer**: this process's CPU time while scoring (for the LLM judge the client's
  side only; for Ragas its interpreter's).

Then, for the data sets with categories, how many of each category every detector flags.

Detectors: ``local`` (`monitor.judges.local.judge.LocalJudge`, each answer read as the
sidecar reads it: `LocalJudge.screen`), ``overlap`` (`bench.harness.overlap`), ``llm``
(`monitor.judges.llm.OpenAIJudge` through `monitor.scoring.Scorer` against the
OpenAI-compatible ``--url``, with ``--metrics``) and ``ragas`` (Ragas 0.4.3's own
``Faithfulness`` against the same endpoint, in the ``--ragas-python`` interpreter).

The LLM judge talks to the endpoint through a recording proxy on 127.0.0.1 (`CapLog`): one
line per chat request (the step, the output cap it carried, each answer's completion tokens
in the server's own tokenizer and finish reason; never text) in ``PREFIX.requests.jsonl``
(a temporary file without ``--out``); the report gives, per step, the largest answer against
its cap and how many ran past it.

With ``--out PREFIX`` every verdict is appended to ``PREFIX.SET.DETECTOR.jsonl`` as it
comes; a second run scores only what is missing, and ``--report`` scores nothing and
reports what the files hold. A table compares the detectors on the records all of them
finished.

    python -m bench.detection                              # local judge and word overlap
    python -m bench.detection --detectors llm,ragas --url http://127.0.0.1:8091/v1 \\
        --model qwen --datasets realistic-holdout --limit 44 --no-fuse --concurrency 1 \\
        --metrics faithfulness --ragas-python /tmp/rag-monitor-ragas-venv/bin/python \\
        --out /tmp/run
    python -m bench.detection --detectors llm,ragas --datasets realistic-holdout \\
        --report --out /tmp/run

The API key of the LLM endpoint comes from ``RAG_MONITOR_JUDGE_API_KEY`` (``local`` if
unset), never from the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from bench.harness import (
    DATASETS,
    DEMO,
    EVASIVE,
    FAITHFUL,
    HALLUCINATED,
    Detector,
    Item,
    Record,
    Verdict,
    WordOverlap,
    alternating,
    contexts,
    finite,
    load_dataset,
    ragas_child,
    read_jsonl,
    run_child,
    within_reach,
)
from bench.ranking import auroc
from monitor.flags import threshold
from monitor.judges.llm import OpenAIJudge
from monitor.judges.wire import parse_user_message
from monitor.records import Interaction
from monitor.scoring import ONLINE_METRICS, Scorer
from monitor.text import evasive

DETECTORS = ("local", "overlap", "llm", "ragas")
#: the data sets run without ``--datasets``: every one but ``realistic`` (both its splits
#: are here) and those built from the long answers; HaluEval's two are left out, saying
#: so, when its file is not found (``--halueval``, ``$RAGMON_DEV_DATA``)
DEFAULT_SETS = ("halueval", "halueval-unfitted", "realistic-tune", "realistic-holdout", "demo")
HALUEVAL_HELP = "HaluEval QA dev's JSONL (default: data/ under $RAGMON_DEV_DATA)"
LONG_HELP = "the long-answer JSONL (default: data/ under $RAGMON_DEV_DATA)"
#: the flag rules compared: faithfulness below half, below 0.7 (one unsupported claim of
#: three flags), and any unsupported claim (below 1)
RULES = (0.5, 0.7, 1.0)
#: the rule `monitor.flags` applies by default
DEFAULT_RULE = threshold({}, "faithfulness")


# --- the detectors


class Local:
    """The local judge, each answer read as the sidecar reads it (`LocalJudge.screen`)."""

    name = "local judge"

    def __init__(self) -> None:
        from monitor.judges.local.judge import LocalJudge

        self.local = LocalJudge()
        self.local.support_model.warm_up()  # loaded before the clock starts, as a sidecar does
        self.local.embedder.warm_up()

    async def judge(self, record: Record) -> Verdict:
        response = str(record["response"])
        if evasive.noncommittal(response):
            return Verdict(math.nan, details={"noncommittal": True})
        screen = self.local.screen(contexts(record), response, str(record.get("user_input") or ""))
        return Verdict(screen.faithfulness, screen.support, details={"reason": screen.reason})


class Outcomes:
    """The LLM judge's observer: request outcomes counted."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def on_request(self, outcome: str, seconds: float) -> None:
        self.counts[outcome] += 1

    def on_tokens(self, metric: str, prompt_tokens: int, completion_tokens: int) -> None:
        return None


class LLM:
    """`OpenAIJudge` through the `Scorer`, reaching the endpoint through a `CapLog`."""

    name = "LLM judge"

    def __init__(self, args: argparse.Namespace, requests: Path) -> None:
        self.proxy = CapLog(args.url, requests, args.timeout + 60).start()
        self.client = OpenAIJudge(
            base_url=self.proxy.base_url,
            model=args.model,
            api_key=SecretStr(os.environ.get("RAG_MONITOR_JUDGE_API_KEY", "local")),
            embedding_model=args.model,
            timeout_seconds=args.timeout,
            max_retries=1,
            concurrency=args.concurrency * 3,
            max_completion_tokens=args.max_completion_tokens,
        )
        self.outcomes = Outcomes()
        self.client.observer = self.outcomes
        self.scorer = Scorer(self.client, args.metrics, fuse_grounding=args.fuse)

    async def judge(self, record: Record) -> Verdict:
        fields = ("id", "user_input", "retrieved_contexts", "response")
        scored = await self.scorer.score(Interaction.model_validate({k: record[k] for k in fields}))
        faithfulness = scored.results.get("faithfulness")
        return Verdict(
            math.nan if faithfulness is None else faithfulness.score,
            scores={m: finite(r.score) for m, r in scored.results.items()},
            errors={m: r.error for m, r in scored.results.items() if r.error},
            details={} if faithfulness is None else dict(faithfulness.details),
        )

    async def aclose(self) -> None:
        await self.client.aclose()
        self.proxy.stop()


#: each detector's name in the tables
DETECTOR_NAMES = {
    "local": Local.name,
    "overlap": WordOverlap.name,
    "llm": LLM.name,
    "ragas": "Ragas Faithfulness",
}


# --- the LLM judge's requests


class CapLog:
    """A recording proxy between the LLM judge and the endpoint: one JSON line per chat request
    (step, cap, each answer's tokens and finish reason; never text) in ``path``."""

    def __init__(self, upstream: str, path: Path, timeout: float) -> None:
        parts = urlsplit(upstream)
        self.origin = f"{parts.scheme}://{parts.netloc}"
        self.prefix = parts.path.rstrip("/")
        self.path = path
        self.timeout = timeout
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None

    @property
    def base_url(self) -> str:
        if self._server is None:
            raise RuntimeError("not started")
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.prefix}"

    def start(self) -> CapLog:
        log = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, body = log.forward(self.path, raw, self.headers.get("Authorization"))
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
                if self.path.endswith("/chat/completions") and status == 200:
                    log.record(json.loads(raw), json.loads(body))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def forward(self, path: str, raw: bytes, auth: str | None) -> tuple[int, bytes]:
        headers = {"Content-Type": "application/json"}
        if auth:
            headers["Authorization"] = auth
        request = urllib.request.Request(self.origin + path, data=raw, headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                status: int = response.status
                body: bytes = response.read()
                return status, body
        except urllib.error.HTTPError as exc:
            with exc:
                return exc.code, exc.read()

    def tokens(self, text: str) -> int:
        """``text``'s tokens in the server's tokenizer (llama.cpp's ``/tokenize``)."""
        raw = json.dumps({"content": text, "add_special": False}).encode()
        status, body = self.forward("/tokenize", raw, None)
        return len(json.loads(body)["tokens"]) if status == 200 else -1

    def record(self, sent: dict[str, Any], answered: dict[str, Any]) -> None:
        step = None
        for message in sent.get("messages", []):
            try:
                step, _ = parse_user_message(str(message.get("content") or ""))
                break
            except ValueError:
                continue
        cap = next((f for f in ("max_tokens", "max_completion_tokens") if f in sent), None)
        choices = sorted(answered.get("choices", []), key=lambda c: c.get("index", 0))
        usage = answered.get("usage") or {}
        if len(choices) == 1:  # llama.cpp's usage counts one choice of several
            counts = [int(usage.get("completion_tokens", -1))]
        else:
            counts = [self.tokens(c["message"].get("content") or "") for c in choices]
        line = {
            "step": step,
            "cap_field": cap,
            "cap": sent.get(cap) if cap else None,
            "prompt_tokens": usage.get("prompt_tokens"),
            "answers": [[n, c.get("finish_reason")] for n, c in zip(counts, choices, strict=True)],
        }
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


def caps_report(path: Path) -> None:
    """Per step: requests, answers cut at their cap, the largest answer against its cap,
    answers past their cap (the server's token counts), requests without a cap."""
    requests = read_jsonl(path) if path.is_file() else []
    if not requests:
        return
    print(
        "\n| step | requests | answers | cut at the cap | largest answer / its cap "
        "| answers past their cap | requests without a cap |"
    )
    print("|---|---|---|---|---|---|---|")
    for step in sorted({str(r["step"]) for r in requests}):
        mine = [r for r in requests if str(r["step"]) == step]
        answers = [(n, why, r["cap"]) for r in mine for n, why in r["answers"]]
        largest = max(answers, key=lambda a: (a[0] / a[2]) if a[2] else a[0])
        past = sum(1 for n, _, cap in answers if cap is not None and n > cap)
        print(
            f"| {step} | {len(mine)} | {len(answers)} | "
            f"{sum(1 for _, why, _ in answers if why == 'length')} | "
            f"{largest[0]} / {largest[2]} | {past} | "
            f"{sum(1 for r in mine if r['cap'] is None)} |"
        )
    fields = Counter(str(r["cap_field"]) for r in requests)
    print(f"\ncap fields sent: {dict(fields)}")


# --- a run: verdicts per data set and detector, kept in a file as they come


@dataclass
class Run:
    """One detector's verdicts on one data set (by record id), and what they cost."""

    detector: str
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    #: seconds per record (wall, one record's own), where known
    seconds: list[float] = field(default_factory=list)
    cpu_seconds: float = 0.0
    scored_here: int = 0
    ragas_version: str | None = None


def _line(item: Item, verdict: Verdict, seconds: float) -> dict[str, Any]:
    return {
        "id": item.record["id"],
        "kind": item.kind,
        "category": item.category,
        "faithfulness": finite(verdict.faithfulness),
        "graded": finite(verdict.graded),
        "scores": verdict.scores,
        "errors": verdict.errors,
        "details": verdict.details,
        "seconds": round(seconds, 3),
    }


def _verdict(line: dict[str, Any]) -> Verdict:
    def number(key: str) -> float:
        value = line.get(key)
        return math.nan if value is None else float(value)

    return Verdict(
        number("faithfulness"),
        number("graded"),
        dict(line.get("scores") or {}),
        dict(line.get("errors") or {}),
        dict(line.get("details") or {}),
    )


def read_run(name: str, path: Path | None) -> Run:
    run = Run(name)
    if path is not None and path.is_file():
        for line in read_jsonl(path):
            run.verdicts[str(line["id"])] = _verdict(line)
            run.seconds.append(float(line.get("seconds") or 0.0))
            run.ragas_version = line.get("version") or run.ragas_version
    return run


async def score(
    detector: Detector, items: Sequence[Item], run: Run, out: Path | None, concurrency: int
) -> None:
    """The verdicts ``run`` lacks, ``concurrency`` records at a time, appended to ``out``."""
    todo = [i for i in items if str(i.record["id"]) not in run.verdicts]
    gate = asyncio.Semaphore(concurrency)

    async def one(item: Item) -> None:
        async with gate:
            started = time.perf_counter()
            verdict = await detector.judge(item.record)
            seconds = time.perf_counter() - started
            run.verdicts[str(item.record["id"])] = verdict
            run.seconds.append(seconds)
            if out is not None:
                text = json.dumps(_line(item, verdict, seconds), ensure_ascii=False) + "\n"
                with out.open("a", encoding="utf-8") as f:
                    f.write(text)

    cpu = time.process_time()
    await asyncio.gather(*(one(i) for i in todo))
    run.cpu_seconds += time.process_time() - cpu
    run.scored_here += len(todo)


def score_ragas(items: Sequence[Item], run: Run, out: Path, args: argparse.Namespace) -> None:
    """Ragas's Faithfulness on the records ``run`` lacks, in the ``--ragas-python`` child."""
    todo = [i for i in items if str(i.record["id"]) not in run.verdicts]
    if not todo:
        return
    job = {
        "metrics": ["faithfulness"],
        "chat": {
            "model": args.model,
            "base_url": args.url,
            "temperature": 0.0,
            "timeout": args.timeout,
            "max_retries": 1,
        },
        "run_config": {"timeout": int(args.timeout), "max_retries": 1, "max_wait": 10},
        "concurrency": args.concurrency,
        "records": [
            {
                "id": i.record["id"],
                "user_input": i.record["user_input"],
                "response": i.record["response"],
                "contexts": contexts(i.record),
            }
            for i in todo
        ],
    }
    key = os.environ.get("RAG_MONITOR_JUDGE_API_KEY", "local")
    run_child(
        args.ragas_python,
        ragas_child,
        job,
        timeout=None,
        env={"OPENAI_API_KEY": key},
        show_stderr=True,
        result=out,
    )
    done = read_run(run.detector, out)
    finished = [
        line for line in read_jsonl(out) if str(line["id"]) in {str(i.record["id"]) for i in todo}
    ]
    run.verdicts, run.seconds, run.ragas_version = done.verdicts, done.seconds, done.ragas_version
    run.cpu_seconds += sum(float(line.get("cpu") or 0.0) for line in finished)
    run.scored_here += len(finished)
    failures = Counter(str(line["error"]) for line in finished if line.get("error"))
    if failures:
        print(f"Ragas: records that failed, by exception: {dict(failures)}", file=sys.stderr)


# --- the tables


def _share(k: int, n: int) -> str:
    return f"{k / n:.1%}" if n else "-"


def row(dataset: str, items: Sequence[Item], run: Run) -> str:
    verdicts = [(i.kind, run.verdicts[str(i.record["id"])]) for i in items]
    labelled = [(k == HALLUCINATED, v) for k, v in verdicts if k in (FAITHFUL, HALLUCINATED)]
    scored = [(h, v) for h, v in labelled if not math.isnan(v.faithfulness)]
    area = auroc([1 - v.faithfulness for _, v in scored], [h for h, _ in scored])
    graded = [(h, v.graded) for h, v in scored if not math.isnan(v.graded)]
    graded_area = auroc([1 - g for _, g in graded], [h for h, _ in graded]) if graded else math.nan
    bad = sum(h for h, _ in labelled)
    cells = []
    for limit in RULES:
        flagged = [h for h, v in scored if v.faithfulness < limit]
        cells.append(
            f"{_share(len(flagged), len(labelled))} / {_share(sum(flagged), bad)} / "
            + (f"{sum(flagged) / len(flagged):.2f}" if flagged else "-")
        )
    evasive_ = [v for k, v in verdicts if k == EVASIVE]
    evasive_flagged = sum(v.faithfulness < DEFAULT_RULE for v in evasive_)  # NaN is not below
    cpu = f"{1000 * run.cpu_seconds / run.scored_here:.1f}" if run.scored_here else "-"
    return (
        f"| {dataset} | {run.detector} | {len(labelled)} | {len(labelled) - len(scored)} | "
        f"{_share(bad, len(labelled))} | {'-' if math.isnan(area) else f'{area:.3f}'} | "
        f"{'-' if math.isnan(graded_area) else f'{graded_area:.3f}'} | {' | '.join(cells)} | "
        f"{f'{evasive_flagged}/{len(evasive_)}' if evasive_ else '-'} | {cpu} |"
    )


def header() -> str:
    rules = " | ".join(f"flagged / recall / precision, < {r:g}" for r in RULES)
    return (
        "| data set | detector | answers | unscoreable | labels' rate | AUROC | AUROC graded | "
        f"{rules} | evasive flagged | CPU ms / answer |\n|---|---|" + "---:|" * (7 + len(RULES))
    )


def categories(dataset: str, items: Sequence[Item], runs: Sequence[Run]) -> None:
    """Per category: how many answers each detector flags, and how many it leaves
    unscoreable."""
    names = list(dict.fromkeys(i.category for i in items))
    if len(names) < 2:
        return
    print(f"\n{dataset}, per category: flagged (faithfulness < {DEFAULT_RULE:g}) / unscoreable\n")
    print("| category | label | n | " + " | ".join(r.detector for r in runs) + " |")
    print("|---|---|---:|" + "---:|" * len(runs))
    for name in names:
        mine = [i for i in items if i.category == name]
        cells = []
        for run in runs:
            values = [run.verdicts[str(i.record["id"])].faithfulness for i in mine]
            low = sum(v < DEFAULT_RULE for v in values)
            cells.append(f"{low} / {sum(math.isnan(v) for v in values)}")
        print(f"| {name} | {mine[0].kind} | {len(mine)} | " + " | ".join(cells) + " |")


def notes(dataset: str, items: Sequence[Item], run: Run) -> None:
    """What a detector scoring several metrics (the LLM judge) left unscored, and its time."""
    verdicts = [run.verdicts[str(i.record["id"])] for i in items]
    values = sum(len(v.scores) for v in verdicts)
    if values:
        # an evasive answer's faithfulness left unscoreable as noncommittal is scored right
        scored = sum(
            1
            for v in verdicts
            for m, s in v.scores.items()
            if s is not None or (m == "faithfulness" and v.details.get("noncommittal") is True)
        )
        errors = Counter(f"{m}: {e}" for v in verdicts for m, e in v.errors.items())
        print(
            f"{dataset}, {run.detector}: values scored {scored}/{values} "
            f"({scored / values:.0%}); judge errors: {dict(errors) or 'none'}"
        )
    if run.seconds:
        print(
            f"{dataset}, {run.detector}: {sum(run.seconds) / len(run.seconds):.1f} s per record "
            f"(wall, one record's own, {len(run.seconds)} records)"
        )


# --- main


def _names(text: str, known: Sequence[str], what: str) -> list[str]:
    names = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    if not names or any(n not in known for n in names):
        raise SystemExit(f"detection: {what} must be among {', '.join(known)}")
    return names


def _path(prefix: Path | None, dataset: str, detector: str) -> Path | None:
    return None if prefix is None else prefix.with_name(f"{prefix.name}.{dataset}.{detector}.jsonl")


async def measure(args: argparse.Namespace, requests: Path) -> None:
    detectors: dict[str, Detector] = {}
    llm: LLM | None = None
    try:
        for name in args.detectors:
            if args.report or name == "ragas":
                continue
            if name == "llm":
                detectors[name] = llm = LLM(args, requests)
            else:
                detectors[name] = Local() if name == "local" else WordOverlap()
        all_runs: list[tuple[str, list[Item], list[Run]]] = []
        for dataset in args.datasets:
            items = alternating(load_dataset(dataset, args.halueval, args.demo, args.long))[
                : args.limit
            ]
            runs = []
            for name in args.detectors:
                out = _path(args.out, dataset, name)
                run = read_run(DETECTOR_NAMES[name], out)
                if name == "ragas" and not args.report:
                    print(f"{dataset}: Ragas, {len(items)} records", file=sys.stderr)
                    assert out is not None
                    await asyncio.to_thread(score_ragas, items, run, out, args)
                elif name in detectors:
                    print(f"{dataset}: {name}, {len(items)} records", file=sys.stderr)
                    concurrency = args.concurrency if name == "llm" else 1
                    await score(detectors[name], items, run, out, concurrency)
                if name == "ragas" and run.ragas_version:
                    run.detector = f"Ragas {run.ragas_version} Faithfulness"
                runs.append(run)
            all_runs.append((dataset, items, runs))
    finally:
        if llm is not None:
            await llm.aclose()
    print(
        f"flag rules: faithfulness < {', < '.join(f'{r:g}' for r in RULES)} "
        f"(the default: < {DEFAULT_RULE:g})\n"
    )
    print(header())
    for dataset, items, runs in all_runs:
        both = [i for i in items if all(str(i.record["id"]) in r.verdicts for r in runs)]
        if len(both) < len(items):
            print(
                f"({dataset}: {len(both)} of {len(items)} records finished by every detector)",
                file=sys.stderr,
            )
        for run in runs:
            print(row(dataset, both, run))
    for dataset, items, runs in all_runs:
        both = [i for i in items if all(str(i.record["id"]) in r.verdicts for r in runs)]
        categories(dataset, both, runs)
    print()
    for dataset, items, runs in all_runs:
        for run in runs:
            if run.detector == LLM.name:
                notes(dataset, items, run)
    if llm is not None:
        print(f"\nLLM judge request outcomes (this run): {dict(llm.outcomes.counts)}")
    caps_report(requests)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--detectors",
        default="local,overlap",
        metavar="A,B",
        help=f"among {', '.join(DETECTORS)} (default: local,overlap)",
    )
    parser.add_argument(
        "--datasets",
        metavar="A,B",
        help=f"among {', '.join(DATASETS)} (default: {','.join(DEFAULT_SETS)}; those made "
        "from dev data that is not found are left out)",
    )
    parser.add_argument(
        "--limit",
        type=int,
        metavar="N",
        help="the first N of each set, hallucinated and the rest taken in turn",
    )
    parser.add_argument("--halueval", type=Path, metavar="PATH", help=HALUEVAL_HELP)
    parser.add_argument("--long", type=Path, metavar="PATH", help=LONG_HELP)
    parser.add_argument("--demo", type=Path, default=DEMO, metavar="PATH")
    parser.add_argument(
        "--out",
        type=Path,
        metavar="PREFIX",
        help="keep every verdict in PREFIX.SET.DETECTOR.jsonl; score only what they lack",
    )
    parser.add_argument("--report", action="store_true", help="score nothing: report --out")
    llm = parser.add_argument_group("the LLM judge and Ragas")
    llm.add_argument("--url", default="http://127.0.0.1:8091/v1", help="OpenAI-compatible …/v1")
    llm.add_argument("--model", default="qwen")
    llm.add_argument("--concurrency", type=int, default=2, help="records at once, per detector")
    llm.add_argument("--timeout", type=float, default=900.0, help="seconds per request")
    llm.add_argument(
        "--no-fuse",
        dest="fuse",
        action="store_false",
        help="basic steps instead of the fused grounding step",
    )
    llm.add_argument(
        "--metrics",
        default=",".join(ONLINE_METRICS),
        metavar="A,B",
        help="online metrics the LLM judge scores (faithfulness alone is ~2.5x faster)",
    )
    llm.add_argument(
        "--max-completion-tokens",
        type=int,
        default=2048,
        help="the judge's largest answer cap (RAG_MONITOR_JUDGE_MAX_COMPLETION_TOKENS)",
    )
    llm.add_argument("--ragas-python", metavar="PATH", help="an interpreter with ragas 0.4.3")
    args = parser.parse_args(argv)
    args.detectors = _names(args.detectors, DETECTORS, "--detectors")
    if args.datasets is None:
        args.datasets = within_reach(DEFAULT_SETS, args.halueval, args.long)
    else:
        args.datasets = _names(args.datasets, DATASETS, "--datasets")
    args.metrics = tuple(_names(args.metrics, ONLINE_METRICS, "--metrics"))
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    if args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    if args.report and args.out is None:
        parser.error("--report reads --out")
    if "ragas" in args.detectors and not args.report and not (args.ragas_python and args.out):
        parser.error("the ragas detector needs --ragas-python and --out")
    with tempfile.TemporaryDirectory(prefix="detection-") as tmp:
        requests = (
            args.out.with_name(args.out.name + ".requests.jsonl")
            if args.out is not None
            else Path(tmp) / "requests.jsonl"
        )
        asyncio.run(measure(args, requests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
