"""What the benchmarks share: the labelled data sets, the detector interface, the word-overlap
baseline and the child process that runs Ragas.

- **Data sets** (`load_dataset`): HaluEval QA dev (not shipped: ``--halueval PATH`` or
  ``$RAGMON_DEV_DATA``, `scripts.devdata`), its half the local judge's combiner was not
  fitted on, the long faithful answers and their hallucinated twins (`bench.twins`; not
  shipped either: ``--long PATH`` or the same folder), whole or by half, the demo traffic
  (`monitor/demo/traffic.jsonl`, labels from ``metadata.label``), the realistic set
  (`bench/data/realistic.jsonl`), whole or by split, and two slices built from the long
  answers (`em_dash`, `other_subject`). Each record becomes an `Item`: the
  record, its kind (faithful, hallucinated, evasive, other) and its category.
- **Detectors** (`Detector`): anything that gives a record a `Verdict`, its faithfulness
  (low = hallucinated; NaN when it could not score the record).
- **Word overlap** (`overlap`): the baseline every detector is measured against.
- **Ragas** (`run_child`, `ragas_child`): Ragas 0.4.3 and its LangChain stack live in
  their own venv (``.ci/run`` makes /tmp/rag-monitor-ragas-venv), not beside `monitor`.
  `ragas_child`, the one function that runs there, scores a JSON job's records with Ragas's
  own metrics, against an endpoint (`bench.detection`) or answering every request itself
  and recording it (`bench.judge_tokens`). `run_child` runs a self-contained function
  (stdlib and what that venv has; no `monitor`) as ``PATH -c SOURCE JOB_FILE RESULT_FILE``:
  it reads the job from ``sys.argv[1]`` and writes its result to ``sys.argv[2]``.

The one AUROC is `bench.ranking.auroc`.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import math
import os
import re
import subprocess
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from bench.twins import fit_half, twins
from monitor.judges.local.evidence import content
from scripts import devdata

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "monitor" / "demo" / "traffic.jsonl"
REALISTIC = ROOT / "bench" / "data" / "realistic.jsonl"

#: the data sets `load_dataset` knows; ``halueval-unfitted`` is the half of HaluEval the
#: local judge's combiner was not fitted on, ``realistic`` both splits of the realistic set,
#: ``long`` the long faithful answers with their hallucinated twins (`bench.twins`), by
#: half (``long-fit``, ``long-report``) or whole; ``em-dash`` and ``other-subject`` the
#: slices built from the long answers (`em_dash`, `other_subject`)
DATASETS = (
    "halueval",
    "halueval-unfitted",
    "realistic-tune",
    "realistic-holdout",
    "realistic",
    "demo",
    "long",
    "long-fit",
    "long-report",
    "em-dash",
    "other-subject",
)

FAITHFUL, HALLUCINATED, EVASIVE, OTHER = "faithful", "hallucinated", "evasive", "other"

Record = Mapping[str, Any]


@dataclass(frozen=True)
class Item:
    """One labelled record: the record as read, and what it is."""

    record: Record
    kind: str  # FAITHFUL, HALLUCINATED, EVASIVE or OTHER
    category: str


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def contexts(record: Record) -> list[str]:
    """A record's retrieved contexts as plain text (a context may be a string or an object)."""
    return [c if isinstance(c, str) else str(c["text"]) for c in record["retrieved_contexts"]]


def _labelled(record: Record) -> str:
    return HALLUCINATED if record["label_hallucinated"] else FAITHFUL


def halueval_fit_half(record: Mapping[str, Any]) -> bool:
    """The HaluEval QA dev records the local judge's combiner is fitted on (training/): half
    of the questions, by a hash of the question; ``halueval-unfitted`` is the other half."""
    return hashlib.sha256(record["user_input"].encode()).digest()[0] % 2 == 0


def dev_data(name: str) -> devdata.DevData | None:
    """The dev data (`scripts.devdata`) data set ``name`` is made from; None for the
    repository's own sets (the realistic set, the demo traffic)."""
    if name.startswith("halueval"):
        return devdata.HALUEVAL
    if name.startswith("long") or name in ("em-dash", "other-subject"):
        return devdata.LONG
    return None


def within_reach(
    names: Sequence[str], halueval: Path | None = None, long: Path | None = None
) -> list[str]:
    """``names`` less the sets whose dev data is nowhere to be found, each left out with a
    line on stderr: what a bench runs by default when it can run without them."""
    given = {devdata.HALUEVAL: halueval, devdata.LONG: long}
    needed = dict.fromkeys(d for n in names if (d := dev_data(n)) is not None)
    gone = [d for d in needed if devdata.find(d, given[d]) is None]
    for entry in gone:
        sets = ", ".join(n for n in names if dev_data(n) == entry)
        devdata.leaving_out(sets, entry, given[entry])
    return [n for n in names if dev_data(n) not in gone]


def load_dataset(
    name: str, halueval: Path | None = None, demo: Path = DEMO, long: Path | None = None
) -> list[Item]:
    """The items of data set ``name`` (one of `DATASETS`), in file order. A set made from
    dev data reads ``halueval`` or ``long``, else ``$RAGMON_DEV_DATA``; with neither the
    command stops (`scripts.devdata.require`)."""
    if name.startswith("long"):
        half = name.removeprefix("long").removeprefix("-")
        return [
            Item(r, _labelled(r), r["category"])
            for r in twins(read_jsonl(devdata.require(devdata.LONG, long)))
            if not half or r["fit"] == (half == "fit")
        ]
    if name.startswith("halueval"):
        rows = read_jsonl(devdata.require(devdata.HALUEVAL, halueval))
        if name == "halueval-unfitted":
            rows = [r for r in rows if not halueval_fit_half(r)]
        return [Item(r, _labelled(r), "halueval") for r in rows]
    if name in ("em-dash", "other-subject"):
        rows = read_jsonl(devdata.require(devdata.LONG, long))
        return slice_items(em_dash(rows) if name == "em-dash" else other_subject(rows))
    if name == "demo":
        kinds = {"faithful": FAITHFUL, "hallucinated": HALLUCINATED, "evasive": EVASIVE}
        return [
            Item(r, kinds.get(r["metadata"]["label"], OTHER), r["metadata"]["label"])
            for r in read_jsonl(demo)
        ]
    if name not in DATASETS:
        raise ValueError(f"unknown data set {name!r}")
    split = name.removeprefix("realistic").removeprefix("-") or None
    return [
        Item(r, EVASIVE if r["category"] == "evasive" else _labelled(r), r["category"])
        for r in read_jsonl(REALISTIC)
        if split is None or r["split"] == split
    ]


# --- slices built from the long answers: each a faithful answer and its one-fact twin

#: a number as the answers write it (digits, with thousands commas and decimals)
_FIGURE = re.compile(r"(?<![\w.,])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w]|,\d)")
#: where an answer could take an em dash instead: an aside in brackets, a colon before a
#: list or clause, a comma before "which", "including" or "such as"
_ASIDE = re.compile(r"\s\(([^()]{3,80})\)|:\s(?=\S)|,\s(?=(?:which|including|such as)\b)")


#: what a twin's id adds to its original's
_TWIN = "-swap"


def _value(figure: str) -> float:
    return float(figure.replace(",", ""))


def swap_figure(response: str, texts: Sequence[str]) -> str | None:
    """``response`` with one figure replaced by another figure the contexts state (so the
    wrong fact is one the contexts say of something else), or None when there is none: the
    first figure of the answer that has a replacement of the same size (a tenth to ten times
    it; a year for a year), the nearest such one in value."""
    said = {_value(m.group()) for m in _FIGURE.finditer(response)}
    stated = sorted(
        {m.group() for t in texts for m in _FIGURE.finditer(t) if _value(m.group()) not in said},
        key=_value,
    )
    for m in _FIGURE.finditer(response):
        v = _value(m.group())
        year = 1900 <= v <= 2100 and "." not in m.group()
        near = [
            f
            for f in stated
            if (1900 <= _value(f) <= 2100) == year and v > 0 and 0.1 <= _value(f) / v <= 10
        ]
        if near:
            other = min(near, key=lambda f: (abs(_value(f) - v), f))
            return response[: m.start()] + other + response[m.end() :]
    return None


def other_subject(rows: Sequence[Record]) -> list[tuple[Record, str]]:
    """Each long answer with a figure the contexts state for another subject (`swap_figure`)
    beside its twin saying so: the twin is hallucinated, though every figure it states is in
    the contexts."""
    out: list[tuple[Record, str]] = []
    for r in rows:
        swapped = swap_figure(str(r["response"]), contexts(r))
        if swapped is not None:
            out.append((r, str(r["response"])))
            out.append(({**r, "id": f"{r['id']}{_TWIN}", "label_hallucinated": True}, swapped))
    return out


def em_dash(rows: Sequence[Record]) -> list[tuple[Record, str]]:
    """Long answers that set an aside off with em dashes (" — "), as answers often do: those
    written so, and those with an aside in brackets, a colon or a comma before "which",
    "including" or "such as" rewritten with one; each beside its twin with one figure swapped
    as in `other_subject` (where it has one)."""
    out: list[tuple[Record, str]] = []
    for r in rows:
        response = str(r["response"])
        if "—" not in response:
            m = _ASIDE.search(response)
            if m is None:
                continue
            aside = f" — {m.group(1)} —" if m.group(1) else " — "
            response = response[: m.start()] + aside + response[m.end() :]
        out.append((r, response))
        swapped = swap_figure(response, contexts(r))
        if swapped is not None:
            out.append(({**r, "id": f"{r['id']}{_TWIN}", "label_hallucinated": True}, swapped))
    return out


def slice_items(pairs: Sequence[tuple[Record, str]]) -> list[Item]:
    """The `Item`s of a slice: each record with its response replaced, labelled by its
    ``label_hallucinated``; the category is its long-answer half."""
    items = []
    for r, response in pairs:
        record = {**r, "response": response}
        original = {**r, "id": str(r["id"]).removesuffix(_TWIN)}
        half = "fit" if fit_half(original) else "report"
        items.append(Item(record, _labelled(record), half))
    return items


def alternating(items: Sequence[Item]) -> list[Item]:
    """Hallucinated and the rest taken in turn, so that the first N of a set (``--limit``, a
    run stopped early) hold both labels."""
    bad = [i for i in items if i.kind == HALLUCINATED]
    rest = [i for i in items if i.kind != HALLUCINATED]
    out: list[Item] = []
    for k in range(max(len(bad), len(rest))):
        out.extend(group[k] for group in (bad, rest) if k < len(group))
    return out


# --- detectors


@dataclass
class Verdict:
    """What a detector says of one record."""

    #: in [0, 1], low = hallucinated; NaN when the detector could not score the record
    faithfulness: float
    #: a graded faithfulness where the detector has one (the local judge's mean support)
    graded: float = math.nan
    #: every metric the detector scored, None where unscoreable or failed
    scores: dict[str, float | None] = field(default_factory=dict)
    #: metric → error, for the metrics that failed
    errors: dict[str, str] = field(default_factory=dict)
    #: how the detector got there (its faithfulness details), for reading a run back
    details: dict[str, Any] = field(default_factory=dict)


class Detector(Protocol):
    """A hallucination detector: a record in, its `Verdict` out."""

    #: the name of its rows in a table
    name: str

    async def judge(self, record: Record) -> Verdict: ...


def finite(value: object) -> float | None:
    """``value`` as a float, or None for NaN, infinities and what is not a number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


# --- word overlap


def overlap(response: str, texts: Sequence[str]) -> float:
    """The baseline: the share of the answer's content words (`monitor.judges.local.evidence`'s
    ``content``) found in the contexts; 1.0 for an answer without any (nothing in it is
    unsupported)."""
    said = content(response)
    if not said:
        return 1.0
    known = set(content(" ".join(texts)))
    return sum(w in known for w in said) / len(said)


class WordOverlap:
    """`overlap` as a detector."""

    name = "word overlap"

    async def judge(self, record: Record) -> Verdict:
        return Verdict(overlap(str(record["response"]), contexts(record)))


# --- Ragas, in its own interpreter

#: Ragas's usage analytics and LangChain's tracing would post over HTTP
QUIET = {
    "RAGAS_DO_NOT_TRACK": "true",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING": "false",
}


def run_child(
    python: str,
    child: Callable[[], None],
    job: Mapping[str, Any],
    *,
    timeout: float | None,
    env: Mapping[str, str] | None = None,
    show_stderr: bool = False,
    result: Path | None = None,
) -> dict[str, Any]:
    """Run ``child`` in ``python`` on ``job``; its JSON result. `RuntimeError` when it fails.

    ``env`` is added to this process's environment (secrets go here, never in the job
    file). With ``show_stderr`` the child's stderr (a progress bar) goes to ours; otherwise
    it is kept for the error message. With ``result`` the child writes (appends) there and
    the result is ``{}``: for a child that writes as it goes.
    """
    source = inspect.getsource(child) + f"\n{child.__name__}()\n"
    environment = os.environ | QUIET | dict(env or {})
    with tempfile.TemporaryDirectory(prefix="rag-monitor-ragas-") as tmp:
        job_path = Path(tmp) / "job.json"
        result_path = result or Path(tmp) / "result.json"
        job_path.write_text(json.dumps(job, ensure_ascii=False), encoding="utf-8")
        done = subprocess.run(
            [python, "-c", source, str(job_path), str(result_path)],
            stdout=subprocess.DEVNULL,
            stderr=None if show_stderr else subprocess.PIPE,
            text=True,
            env=environment,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0 or not result_path.is_file():
            tail = (done.stderr or "").strip()[-3000:] or "(its stderr is above)"
            raise RuntimeError(f"{python} exited with {done.returncode}:\n{tail}")
        if result is not None:
            return {}
        found: dict[str, Any] = json.loads(result_path.read_text(encoding="utf-8"))
    return found


def ragas_child() -> None:  # runs in the Ragas interpreter (`run_child`), not here
    """Ragas's own metrics on each record of the job, through Ragas's usual LLM path
    (`LangchainLLMWrapper` around langchain-openai's `ChatOpenAI`; embeddings through
    `LangchainEmbeddingsWrapper(OpenAIEmbeddings)`). One JSON line per record is appended to
    the result file as the record finishes: its id, each metric's score under Ragas's name
    (None for NaN or a failure), the first failure's exception name and text (``error``,
    ``detail``; a failure is recorded, not fatal), seconds, CPU seconds and Ragas's version.

    The job: ``records`` (id, user_input, response, contexts); ``metrics``, among
    ``faithfulness``, ``answer_relevancy`` (`ResponseRelevancy`, strictness 3) and
    ``llm_context_precision_without_reference``; ``chat``, `ChatOpenAI`'s keyword
    arguments (the API key from ``OPENAI_API_KEY`` unless given); ``run_config``,
    `RunConfig`'s; ``concurrency``, records at once; ``embedding_model`` where a metric
    embeds. With ``answers`` (and ``vectors``) nothing leaves the process: an in-process
    `httpx.MockTransport` answers each chat request from ``answers``, looked up by the inputs
    parsed back out of the prompt Ragas rendered (an unexpected request, such as a re-ask
    after a parse failure, fails the record), and each embedding request from ``vectors``;
    the records then run one at a time, and each line lists the requests sent for it
    (``calls``: the metric, the step named by the prompt's input fields, the messages, ``n``,
    the answers given, the request's other fields; for embeddings the texts).
    ``check_embedding_ctx_length=False`` makes `OpenAIEmbeddings` send the texts rather than
    tiktoken ids (which would need tiktoken's files; the same tokens). Self-contained:
    stdlib, httpx, ragas, LangChain."""
    import asyncio
    import base64
    import json
    import struct
    import sys
    import time
    import warnings

    warnings.simplefilter("ignore")
    import httpx
    import ragas
    from langchain_openai import ChatOpenAI, OpenAIEmbeddings
    from ragas.dataset_schema import SingleTurnSample
    from ragas.embeddings import LangchainEmbeddingsWrapper
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import (
        Faithfulness,
        LLMContextPrecisionWithoutReference,
        ResponseRelevancy,
    )
    from ragas.run_config import RunConfig

    with open(sys.argv[1], encoding="utf-8") as f:
        job = json.load(f)
    answers, vectors = job.get("answers"), job.get("vectors") or {}
    calls: list[dict[str, object]] = []
    now = {"metric": ""}

    def handle(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        call: dict[str, object] = {"metric": now["metric"], "model": body["model"]}
        if request.url.path.endswith("/embeddings"):
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            call.update(step="embeddings", texts=texts)
            calls.append(call)
            data = []
            for i, text in enumerate(texts):
                vector = vectors[text]
                if body.get("encoding_format") == "base64":
                    packed = struct.pack(f"<{len(vector)}f", *vector)
                    vector = base64.b64encode(packed).decode()
                data.append({"object": "embedding", "index": i, "embedding": vector})
            usage = {"prompt_tokens": 0, "total_tokens": 0}
            payload = {"object": "list", "model": body["model"], "data": data, "usage": usage}
            return httpx.Response(200, json=payload)
        messages = body["messages"]
        rendered = messages[-1]["content"]
        inputs_text = rendered.rpartition("\ninput: ")[2].rpartition("\nOutput: ")[0]
        inputs = json.loads(inputs_text)
        content = answers[json.dumps(inputs, sort_keys=True, ensure_ascii=False)]
        n = body.get("n") or 1
        call.update(
            step="+".join(sorted(inputs)),
            messages=messages,
            inputs_text=inputs_text,
            n=n,
            contents=[content] * n,
            keys=sorted(k for k in body if k != "messages"),
        )
        calls.append(call)
        choices = [
            {
                "index": i,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
            for i in range(n)
        ]
        payload = {
            "id": f"chatcmpl-{len(calls)}",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": choices,
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }
        return httpx.Response(200, json=payload)

    chat = dict(job["chat"])
    if answers is not None:
        transport = httpx.MockTransport(handle)
        chat["http_client"] = httpx.Client(transport=transport)
        chat["http_async_client"] = httpx.AsyncClient(transport=transport)
    llm = LangchainLLMWrapper(ChatOpenAI(**chat))
    shared = ("base_url", "api_key", "max_retries", "timeout", "http_client", "http_async_client")
    made = {
        "faithfulness": lambda: Faithfulness(llm=llm),
        "answer_relevancy": lambda: ResponseRelevancy(
            llm=llm,
            embeddings=LangchainEmbeddingsWrapper(
                OpenAIEmbeddings(
                    model=job["embedding_model"],
                    check_embedding_ctx_length=False,
                    **{k: v for k, v in chat.items() if k in shared},
                )
            ),
            strictness=3,
        ),
        "llm_context_precision_without_reference": lambda: LLMContextPrecisionWithoutReference(
            llm=llm
        ),
    }
    metrics = [made[name]() for name in job["metrics"]]
    for metric in metrics:
        metric.init(RunConfig(**job.get("run_config", {})))
    gate = asyncio.Semaphore(1 if answers is not None else job["concurrency"])

    async def one(row: dict[str, object]) -> None:
        async with gate:
            sample = SingleTurnSample(
                user_input=row["user_input"],
                response=row["response"],
                retrieved_contexts=row["contexts"],
            )
            line: dict[str, object] = {"id": row["id"], "error": None}
            started, cpu = time.perf_counter(), time.process_time()
            del calls[:]
            for metric in metrics:
                now["metric"] = metric.name
                try:
                    value = float(await metric.single_turn_ascore(sample))
                except Exception as exc:  # Ragas's own failure: recorded, not fatal
                    value = float("nan")
                    if line["error"] is None:
                        line.update(error=type(exc).__name__, detail=str(exc)[-2000:])
                line[metric.name] = None if value != value else value
            line.update(
                seconds=round(time.perf_counter() - started, 1),
                cpu=time.process_time() - cpu,
                version=ragas.__version__,
            )
            if answers is not None:
                line["calls"] = list(calls)
            with open(sys.argv[2], "a", encoding="utf-8") as f:  # noqa: ASYNC230 (one line)
                f.write(json.dumps(line, ensure_ascii=False) + "\n")

    async def main() -> None:
        await asyncio.gather(*(one(r) for r in job["records"]))

    asyncio.run(main())
