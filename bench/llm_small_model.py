"""The LLM judge on a small real model, next to Ragas's Faithfulness on the same server.

Scores labelled records with the online metrics (faithfulness,
response_relevancy, context_utility) through `monitor.scoring.Scorer` and
`monitor.judges.llm.OpenAIJudge` against an OpenAI-compatible endpoint (llama.cpp's
server with Qwen2.5-Coder-1.5B-Instruct in docs/benchmarks.md), and, with
``--ragas-python``, Ragas 0.4.3's own ``Faithfulness`` (its prompts, its
LangChain ``ChatOpenAI`` client) against the same endpoint on the same records.

Both sides append one JSON line per record as it finishes (``--out`` prefix:
``PREFIX.ours.jsonl``, ``PREFIX.ragas.jsonl``), so a run that is stopped early
still reports the records both sides finished; ``--report`` only reads them.

Reported: the share of online values scored (not unscoreable, not failed;
an evasive answer's unscoreable faithfulness counts as scored right), judge
errors, faithfulness AUROC (hallucinated = low faithfulness; records whose
faithfulness is unscoreable are left out and counted) for ours and Ragas's on
the records both finished, and, on a set with categories (bench/data's
realistic set), how many faithful paraphrases pass and swapped facts fail.

Our judge talks to the endpoint through a recording proxy on 127.0.0.1
(`CapLog`), which writes one line per chat request to ``PREFIX.requests.jsonl``:
the step, the output cap the request carried, and each answer's completion
tokens in the server's own tokenizer (its ``usage`` for one choice; its
``/tokenize`` of each choice's text when ``n`` > 1, since llama.cpp's usage then
counts one choice) and finish reason; no text. The report gives, per step, the
largest answer against its cap and how many ran past it.

    python -m bench.llm_small_model --url http://127.0.0.1:8091/v1 --model qwen
        [--data PATH.jsonl] [--split holdout] [--limit 40] [--no-fuse] [--metrics faithfulness]
        [--ragas-python /tmp/rag-monitor-ragas-venv/bin/python] --out /tmp/run
    python -m bench.llm_small_model --report --out /tmp/run

The API key comes from ``RAG_MONITOR_JUDGE_API_KEY`` (``local`` if unset).
"""

from __future__ import annotations

import argparse
import asyncio
import inspect
import json
import math
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from pydantic import SecretStr

from bench.ranking import auroc
from monitor.judges.llm import OpenAIJudge
from monitor.judges.wire import parse_user_message
from monitor.records import Interaction
from monitor.scoring import ONLINE_METRICS, Scorer

HALUEVAL = Path(__file__).resolve().parents[2] / "shared" / "data" / "halueval_qa_dev.jsonl"
FAITHFUL_CATEGORIES = {"faithful_paraphrase", "multi_chunk"}
EVASIVE = "evasive"


def load(path: Path, split: str | None, limit: int) -> list[dict[str, Any]]:
    """Labelled records, hallucinated and faithful alternating (so a partial run is balanced)."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    if split is not None:
        rows = [r for r in rows if r.get("split") == split]
    bad = [r for r in rows if r["label_hallucinated"]]
    good = [r for r in rows if not r["label_hallucinated"]]
    mixed: list[dict[str, Any]] = []
    for i in range(max(len(bad), len(good))):
        mixed.extend(r[i] for r in (bad, good) if i < len(r))
    return mixed[:limit]


class CapLog:
    """A recording proxy between our judge and the endpoint: one JSON line per chat request
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
                return response.status, response.read()
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
        field = next((f for f in ("max_tokens", "max_completion_tokens") if f in sent), None)
        choices = sorted(answered.get("choices", []), key=lambda c: c.get("index", 0))
        usage = answered.get("usage") or {}
        if len(choices) == 1:
            counts = [int(usage.get("completion_tokens", -1))]
        else:
            counts = [self.tokens(c["message"].get("content") or "") for c in choices]
        line = {
            "step": step,
            "cap_field": field,
            "cap": sent.get(field) if field else None,
            "prompt_tokens": usage.get("prompt_tokens"),
            "answers": [[n, c.get("finish_reason")] for n, c in zip(counts, choices, strict=True)],
        }
        with self._lock, self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


async def score_ours(rows: Sequence[dict[str, Any]], args: argparse.Namespace, out: Path) -> None:
    key = os.environ.get("RAG_MONITOR_JUDGE_API_KEY", "local")
    done = {json.loads(line)["id"] for line in _lines(out)}
    proxy = CapLog(args.url, _requests(Path(args.out)), args.timeout + 60).start()
    judge = OpenAIJudge(
        base_url=proxy.base_url,
        model=args.model,
        api_key=SecretStr(key),
        embedding_model=args.model,
        timeout_seconds=args.timeout,
        max_retries=1,
        concurrency=args.concurrency * 3,
        max_completion_tokens=args.max_completion_tokens,
    )
    judge.observer = outcomes = Outcomes()
    scorer = Scorer(judge, args.metrics, fuse_grounding=args.fuse)
    gate = asyncio.Semaphore(args.concurrency)

    async def one(row: dict[str, Any]) -> None:
        async with gate:
            interaction = Interaction.model_validate(
                {k: row[k] for k in ("id", "user_input", "retrieved_contexts", "response")}
            )
            started = time.perf_counter()
            record = await scorer.score(interaction)
            line = {
                "id": row["id"],
                "hallucinated": row["label_hallucinated"],
                "category": row.get("category"),
                "seconds": round(time.perf_counter() - started, 1),
                "scores": {m: _finite(r.score) for m, r in record.results.items()},
                "errors": {m: r.error for m, r in record.results.items() if r.error},
                "faithfulness": record.results["faithfulness"].details,
                #: the judge's request outcomes so far, this run (ok, fallback_steps, ...)
                "outcomes": dict(outcomes.counts),
            }
            with out.open("a", encoding="utf-8") as f:
                f.write(json.dumps(line, ensure_ascii=False) + "\n")

    try:
        await asyncio.gather(*(one(r) for r in rows if r["id"] not in done))
    finally:
        await judge.aclose()
        proxy.stop()


class Outcomes:
    """The judge's observer: request outcomes counted."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()

    def on_request(self, outcome: str, seconds: float) -> None:
        self.counts[outcome] += 1

    def on_tokens(self, metric: str, prompt_tokens: int, completion_tokens: int) -> None:
        return None


def _ragas_child() -> None:  # runs in the --ragas-python interpreter, not here
    """Ragas's Faithfulness on each record of the job, against the job's endpoint; one JSON
    line per record appended to the output file as it finishes (self-contained: stdlib,
    ragas, LangChain)."""
    import asyncio
    import json
    import sys
    import time
    import warnings

    warnings.simplefilter("ignore")
    from langchain_openai import ChatOpenAI
    from ragas.dataset_schema import SingleTurnSample
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import Faithfulness
    from ragas.run_config import RunConfig

    with open(sys.argv[1], encoding="utf-8") as f:
        job = json.load(f)
    chat = ChatOpenAI(
        model=job["model"],
        base_url=job["url"],
        api_key=job["key"],
        temperature=0.0,
        timeout=job["timeout"],
        max_retries=1,
    )
    metric = Faithfulness(llm=LangchainLLMWrapper(chat))
    metric.init(RunConfig(timeout=int(job["timeout"]), max_retries=1, max_wait=10))
    gate = asyncio.Semaphore(job["concurrency"])

    async def one(row):
        async with gate:
            sample = SingleTurnSample(
                user_input=row["user_input"],
                response=row["response"],
                retrieved_contexts=row["retrieved_contexts"],
            )
            started = time.perf_counter()
            try:
                value = float(await metric.single_turn_ascore(sample))
                error = None
            except Exception as exc:  # Ragas's own failure: recorded, not fatal
                value, error = float("nan"), type(exc).__name__
            line = {
                "id": row["id"],
                "hallucinated": row["label_hallucinated"],
                "category": row.get("category"),
                "seconds": round(time.perf_counter() - started, 1),
                "faithfulness": None if value != value else value,
                "error": error,
            }
            with open(sys.argv[2], "a", encoding="utf-8") as f:  # noqa: ASYNC230 (one line)
                f.write(json.dumps(line, ensure_ascii=False) + "\n")

    async def main():
        await asyncio.gather(*(one(r) for r in job["records"]))

    asyncio.run(main())


def score_ragas(rows: Sequence[dict[str, Any]], args: argparse.Namespace, out: Path) -> None:
    done = {json.loads(line)["id"] for line in _lines(out)}
    job = {
        "url": args.url,
        "model": args.model,
        "key": os.environ.get("RAG_MONITOR_JUDGE_API_KEY", "local"),
        "timeout": args.timeout,
        "concurrency": args.concurrency,
        "records": [r for r in rows if r["id"] not in done],
    }
    job_path = out.with_suffix(".job.json")
    job_path.write_text(json.dumps(job, ensure_ascii=False), encoding="utf-8")
    source = inspect.getsource(_ragas_child) + "\n_ragas_child()\n"
    env = os.environ | {
        "RAGAS_DO_NOT_TRACK": "true",
        "LANGCHAIN_TRACING_V2": "false",
        "LANGSMITH_TRACING": "false",
    }
    subprocess.run([args.ragas_python, "-c", source, str(job_path), str(out)], env=env, check=True)


def report(prefix: Path) -> None:
    ours = {r["id"]: r for r in map(json.loads, _lines(_ours(prefix)))}
    ragas = {r["id"]: r for r in map(json.loads, _lines(_ragas(prefix)))}
    both = [i for i in ours if i in ragas] if ragas else list(ours)
    print(f"records finished: ours {len(ours)}, Ragas {len(ragas)}; compared: {len(both)}")
    values = scored = 0
    errors: dict[str, int] = {}
    for r in ours.values():
        for metric in r["scores"]:
            values += 1
            score = r["scores"][metric]
            evasive_null = (
                metric == "faithfulness"
                and r.get("category") == EVASIVE
                and r["faithfulness"].get("noncommittal") is True
            )
            if score is not None or evasive_null:
                scored += 1
        for metric, error in r["errors"].items():
            errors[f"{metric}: {error}"] = errors.get(f"{metric}: {error}", 0) + 1
    if values:
        print(
            f"online values scored (ours, all finished records): {scored}/{values} "
            f"= {scored / values:.0%}; judge errors: {errors or 'none'}"
        )
    rows = []
    for name, table, get in (
        ("rag-monitor LLM judge", ours, lambda r: r["scores"].get("faithfulness")),
        ("Ragas 0.4.3 Faithfulness", ragas, lambda r: r["faithfulness"]),
    ):
        if not table:
            continue
        kept = [table[i] for i in both if table[i].get("category") != EVASIVE]
        known = [(get(r), r["hallucinated"]) for r in kept if get(r) is not None]
        value = auroc([-s for s, _ in known], [h for _, h in known])
        faithful = [r for r in kept if r.get("category") in FAITHFUL_CATEGORIES]
        swapped = [r for r in kept if str(r.get("category", "")).startswith("swapped")]
        passed = sum(1 for r in faithful if (get(r) or 0.0) >= 0.5)
        failed = sum(1 for r in swapped if get(r) is not None and get(r) < 0.5)
        hallucinated_1 = sum(1 for r in kept if r["hallucinated"] and get(r) == 1.0)
        seconds = sum(r["seconds"] for r in table.values()) / len(table)
        rows.append(
            f"| {name} | {value:.3f} | {len(known)}/{len(kept)} | "
            f"{passed}/{len(faithful)} | {failed}/{len(swapped)} | "
            f"{hallucinated_1}/{sum(1 for r in kept if r['hallucinated'])} | {seconds:.0f} |"
        )
    print(
        "\n| judge | faithfulness AUROC | scored | faithful paraphrases passing | "
        "swapped facts failing | hallucinated scored 1.0 | s per record |"
    )
    print("|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    if ours:
        last = max(ours.values(), key=lambda r: sum(r.get("outcomes", {}).values()))
        print(f"\njudge request outcomes (ours): {last.get('outcomes')}")
    evasive = [r for r in ours.values() if r.get("category") == EVASIVE]
    if evasive:
        null = sum(1 for r in evasive if r["faithfulness"].get("noncommittal") is True)
        print(
            f"\nevasive answers with faithfulness unscoreable (noncommittal): {null}/{len(evasive)}"
        )
    caps_report(_requests(prefix))


def caps_report(path: Path) -> None:
    """Per step: requests, answers cut at their cap, the largest answer against its cap,
    answers past their cap (the server's token counts), requests without a cap."""
    requests = [json.loads(line) for line in _lines(path)]
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


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else value


def _lines(path: Path) -> list[str]:
    return [x for x in path.read_text(encoding="utf-8").splitlines() if x] if path.exists() else []


def _ours(prefix: Path) -> Path:
    return prefix.with_name(prefix.name + ".ours.jsonl")


def _ragas(prefix: Path) -> Path:
    return prefix.with_name(prefix.name + ".ragas.jsonl")


def _requests(prefix: Path) -> Path:
    return prefix.with_name(prefix.name + ".requests.jsonl")


async def run(args: argparse.Namespace) -> None:
    rows = load(Path(args.data), args.split, args.limit)
    prefix = Path(args.out)
    tasks = [score_ours(rows, args, _ours(prefix))]
    if args.ragas_python:
        tasks.append(asyncio.to_thread(score_ragas, rows, args, _ragas(prefix)))
    await asyncio.gather(*tasks)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8091/v1")
    parser.add_argument("--model", default="qwen")
    parser.add_argument("--data", default=str(HALUEVAL))
    parser.add_argument("--split", default=None, help="keep records whose split is this")
    parser.add_argument("--limit", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=2, help="records at once, per side")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per request")
    parser.add_argument(
        "--no-fuse",
        dest="fuse",
        action="store_false",
        help="basic steps instead of the fused grounding step",
    )
    parser.add_argument(
        "--metrics",
        default=",".join(ONLINE_METRICS),
        metavar="A,B",
        help="online metrics to score (faithfulness alone is ~2.5x faster)",
    )
    parser.add_argument(
        "--max-completion-tokens",
        type=int,
        default=2048,
        help="the judge's largest answer cap (RAG_MONITOR_JUDGE_MAX_COMPLETION_TOKENS)",
    )
    parser.add_argument("--ragas-python", default=None)
    parser.add_argument("--out", required=True, help="prefix of the two JSONL result files")
    parser.add_argument("--report", action="store_true", help="only report what --out holds")
    args = parser.parse_args(argv)
    args.metrics = tuple(m for m in args.metrics.split(",") if m)
    unknown = set(args.metrics) - set(ONLINE_METRICS)
    if unknown:
        parser.error(f"--metrics: not online metrics: {', '.join(sorted(unknown))}")
    if not args.report:
        asyncio.run(run(args))
    report(Path(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
