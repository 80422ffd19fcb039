"""Hallucination detection: does a judge's faithfulness say what the labels say?

Per judge and per data set, one row of a table:

- **records** scored, and **online values scored**: the share of the online
  metrics' values (faithfulness, response_relevancy, context_utility) that came
  back with a score, not unscoreable or failed; records with a judge error;
- **AUROC** of faithfulness over the faithful and hallucinated answers
  (hallucinated = low faithfulness; an answer whose faithfulness is unscoreable
  is left out of the AUROC and counted in the next column; evasive answers are
  not in it either);
- **faithful flagged**: faithful answers whose faithfulness is below the flag
  threshold (0.5 unless ``thresholds`` says otherwise, as `monitor.flags` flags);
- **hallucinated flagged** (recall): hallucinated answers below it (an
  unscoreable one is a miss);
- **evasive flagged**: evasive answers (declining, deferring, not knowing) below
  it, i.e. counted as hallucinations (they should be unscoreable);
- **CPU ms per record**: this process's CPU time (all threads) while scoring;
  for an LLM judge that is the client's side only, not the server's.

Judges: ``local`` (`monitor.judges.local`, in process) and ``llm`` (the endpoint of
``--judge-url``), both through the scorer `rag-monitor score` uses (settings
from the environment and ``--config`` as for ``rag-monitor score``: call
pattern, cache, thresholds, timeouts); a word-overlap baseline row (share of
the answer's content words found in the contexts) for every data set; with
``--ragas-python PATH``, Ragas 0.4.3's own ``Faithfulness`` with the same LLM
endpoint on the same records (in that interpreter, see `ragas_venv`).

Data sets: ``halueval`` (../shared/data/halueval_qa_dev.jsonl beside the
repository, or ``--halueval PATH``), ``demo`` (monitor/demo/traffic.jsonl,
labels from ``metadata.label``; off-topic answers are in no column but the
record count), ``realistic-tune`` and ``realistic-holdout`` (bench/data/
realistic.jsonl, its two splits). A per-category table of the realistic sets
follows the main one.

    python -m bench.detection [--datasets halueval,demo,realistic-tune,realistic-holdout]
        [--judges local[,llm]] [--judge-url URL --judge-model M] [--limit N] [--concurrency N]
        [--ragas-python /tmp/rag-monitor-ragas-venv/bin/python] [--dump FILE.jsonl]

The API key of the LLM endpoint comes from the environment as for the sidecar
(``RAG_MONITOR_JUDGE_API_KEY``), never from the command line.
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import math
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "bench"
for path in (ROOT, BENCH):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from ragas_venv import run_child
from ranking import auroc

from monitor.config import ConfigError, Settings, load_settings
from monitor.flags import threshold
from monitor.judges.factory import JudgeConfigError, JudgeKind, build_judge
from monitor.records import validate_record
from monitor.score_file import DEFAULT_CONCURRENCY, score_file
from monitor.scoring import Scorer

HALUEVAL = ROOT.parent / "shared" / "data" / "halueval_qa_dev.jsonl"
DEMO = ROOT / "monitor" / "demo" / "traffic.jsonl"
REALISTIC = BENCH / "data" / "realistic.jsonl"
DATASETS = ("halueval", "demo", "realistic-tune", "realistic-holdout")
JUDGES = ("local", "llm")

FAITHFUL, HALLUCINATED, EVASIVE, OTHER = "faithful", "hallucinated", "evasive", "other"


@dataclass(frozen=True)
class Item:
    """One labelled record: the record as read, and what it is."""

    record: dict[str, Any]
    kind: str  # FAITHFUL, HALLUCINATED, EVASIVE or OTHER
    category: str


def _read(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def load_dataset(name: str, halueval: Path, demo: Path = DEMO) -> list[Item]:
    if name == "halueval":
        if not halueval.is_file():
            raise SystemExit(f"detection: no HaluEval dev set at {halueval}; pass --halueval PATH")
        return [
            Item(r, HALLUCINATED if r["label_hallucinated"] else FAITHFUL, "halueval")
            for r in _read(halueval)
        ]
    if name == "demo":
        kinds = {"faithful": FAITHFUL, "hallucinated": HALLUCINATED, "evasive": EVASIVE}
        return [
            Item(r, kinds.get(r["metadata"]["label"], OTHER), r["metadata"]["label"])
            for r in _read(demo)
        ]
    split = name.removeprefix("realistic-")
    items = []
    for r in _read(REALISTIC):
        if r["split"] != split:
            continue
        if r["category"] == "evasive":
            kind = EVASIVE
        else:
            kind = HALLUCINATED if r["label_hallucinated"] else FAITHFUL
        items.append(Item(r, kind, r["category"]))
    return items


# --- scores


@dataclass
class Scored:
    """One judge's scores of one data set."""

    judge: str
    #: faithfulness per item, None when unscoreable or failed
    faithfulness: list[float | None]
    #: online values with a score, of how many; None when the judge scores faithfulness only
    values: tuple[int, int] | None
    records_with_errors: int
    cpu_seconds: float
    #: faithfulness details per item as the scorer wrote them (empty for the other judges)
    details: list[dict[str, Any]] = field(default_factory=list)


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


async def score_with_scorer(
    settings: Settings, kind: JudgeKind, items: Sequence[Item], concurrency: int | None = None
) -> Scored:
    """Score through `rag-monitor score`'s own path: `build_judge`, `Scorer`, `score_file`."""
    judge = build_judge(settings, kind=kind)
    metrics = list(settings.online_metrics)
    scorer = Scorer(
        judge,
        metrics,
        call_pattern=settings.call_pattern,
        relevancy_questions=settings.relevancy_questions,
        cache_size=settings.judge_cache_size,
    )
    if kind == "local":  # load the models before the clock starts (a sidecar loads them once)
        warm = Scorer(judge, metrics, cache_size=0)
        await warm.score(validate_record(items[0].record))
    out = io.StringIO()
    with tempfile.TemporaryDirectory(prefix="detection-") as tmp:
        path = Path(tmp) / "records.jsonl"
        path.write_text(
            "".join(json.dumps(i.record, ensure_ascii=False) + "\n" for i in items),
            encoding="utf-8",
        )
        start = time.process_time()
        await score_file(
            path,
            scorer,
            judge,
            out,
            concurrency=concurrency or DEFAULT_CONCURRENCY.get(judge.kind, 8),
            max_bytes=settings.max_record_bytes,
            total=len(items),
        )
        cpu = time.process_time() - start
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    if len(lines) != len(items):
        raise RuntimeError(f"{kind}: {len(lines)} result lines for {len(items)} records")
    scored = sum(1 for line in lines for m in metrics if _number(line["scores"].get(m)) is not None)
    return Scored(
        judge=kind,
        faithfulness=[_number(line["scores"].get("faithfulness")) for line in lines],
        values=(scored, len(lines) * len(metrics)),
        records_with_errors=sum(1 for line in lines if "error" in line),
        cpu_seconds=cpu,
        details=[line["details"].get("faithfulness", {}) for line in lines],
    )


#: function words: not content, not checked by the overlap baseline
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves also may might must shall s t d ll m re ve y don isn aren wasn weren hasn haven
    hadn doesn didn won wouldn shan shouldn can't cannot yes""".split()
)
_WORD = re.compile(r"[\w']+")


def content_words(text: str) -> list[str]:
    words = (w.strip("'").lower() for w in _WORD.findall(text))
    return [w for w in words if w and w not in STOPWORDS]


def overlap(record: dict[str, Any]) -> float | None:
    """Share of the answer's content words that occur in the contexts; None without any."""
    said = content_words(record["response"])
    if not said:
        return None
    contexts = record["retrieved_contexts"]
    texts = [c if isinstance(c, str) else c["text"] for c in contexts]
    known = set(content_words(" ".join(texts)))
    return sum(w in known for w in said) / len(said)


def score_overlap(items: Sequence[Item]) -> Scored:
    start = time.process_time()
    values = [overlap(i.record) for i in items]
    return Scored("word overlap", values, None, 0, time.process_time() - start)


def _ragas_faithfulness() -> None:  # runs in the --ragas-python interpreter, not here
    """Ragas's own Faithfulness over the job's records, on the job's LLM endpoint.

    Self-contained (stdlib, ragas, LangChain; no `monitor`). The usual Ragas LLM
    path, `LangchainLLMWrapper(ChatOpenAI)`; the API key comes from
    ``OPENAI_API_KEY`` in the environment. One record at a time (a polite load
    on a small server), one retry, the job's timeout per call. A record that
    fails or comes back NaN is None.
    """
    import asyncio
    import json
    import math
    import sys
    import time
    import warnings

    warnings.simplefilter("ignore")

    import ragas
    from langchain_openai import ChatOpenAI
    from ragas.dataset_schema import SingleTurnSample
    from ragas.llms import LangchainLLMWrapper
    from ragas.metrics import Faithfulness
    from ragas.run_config import RunConfig
    from tqdm import tqdm

    with open(sys.argv[1], encoding="utf-8") as f:
        job = json.load(f)
    chat = ChatOpenAI(
        model=job["model"],
        base_url=job["base_url"],
        timeout=job["timeout"],
        max_retries=0,
        temperature=0,
    )
    metric = Faithfulness(llm=LangchainLLMWrapper(chat))
    metric.init(RunConfig(timeout=int(job["timeout"]), max_retries=1, max_wait=10))

    failures: dict[str, int] = {}

    async def score_all() -> tuple[list[float | None], int, float]:
        scores: list[float | None] = []
        errors, cpu = 0, 0.0
        for row in tqdm(job["records"], desc="ragas faithfulness", unit="record"):
            sample = SingleTurnSample(
                user_input=row["user_input"],
                response=row["response"],
                retrieved_contexts=row["contexts"],
            )
            start = time.process_time()
            try:
                value = float(await metric.single_turn_ascore(sample))
            except Exception as exc:
                value, errors = math.nan, errors + 1
                failures[type(exc).__name__] = failures.get(type(exc).__name__, 0) + 1
            cpu += time.process_time() - start
            scores.append(None if math.isnan(value) else value)
        return scores, errors, cpu

    scores, errors, cpu = asyncio.run(score_all())
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump(
            {
                "version": ragas.__version__,
                "scores": scores,
                "errors": errors,
                "failures": failures,
                "cpu": cpu,
            },
            f,
        )


def score_ragas(python: str, settings: Settings, items: Sequence[Item]) -> Scored:
    rows = []
    for i in items:
        contexts = i.record["retrieved_contexts"]
        rows.append(
            {
                "user_input": i.record["user_input"],
                "response": i.record["response"],
                "contexts": [c if isinstance(c, str) else c["text"] for c in contexts],
            }
        )
    job = {
        "model": settings.judge_model,
        "base_url": settings.judge_base_url,
        "timeout": settings.judge_timeout_seconds,
        "records": rows,
    }
    key = settings.judge_api_key.get_secret_value() if settings.judge_api_key else "not-set"
    result = run_child(
        python,
        _ragas_faithfulness,
        job,
        timeout=max(600.0, 4 * settings.judge_timeout_seconds * len(rows)),
        env={"OPENAI_API_KEY": key},
        show_stderr=True,
    )
    values = [_number(v) for v in result["scores"]]
    if result["failures"]:
        failed = ", ".join(f"{k} {v}" for k, v in sorted(result["failures"].items()))
        print(f"Ragas: records that failed, by exception: {failed}", file=sys.stderr)
    return Scored(
        f"ragas {result['version']} faithfulness",
        values,
        (sum(v is not None for v in values), len(values)),
        int(result["errors"]),
        float(result["cpu"]),
    )


# --- the table


@dataclass
class Row:
    dataset: str
    judge: str
    records: int
    values: str
    errors: str
    auroc: str
    unscoreable: str
    faithful_flagged: str
    recall: str
    evasive_flagged: str
    cpu_ms: str


def _share(k: int, n: int) -> str:
    return f"{k}/{n} ({k / n:.1%})" if n else "-"


def summarise(dataset: str, items: Sequence[Item], scored: Scored, limit: float) -> Row:
    kinds = [i.kind for i in items]
    pairs = [
        (f, k == HALLUCINATED)
        for f, k in zip(scored.faithfulness, kinds, strict=True)
        if k in (FAITHFUL, HALLUCINATED) and f is not None
    ]
    labelled = sum(k in (FAITHFUL, HALLUCINATED) for k in kinds)
    area = auroc([1 - f for f, _ in pairs], [h for _, h in pairs])

    def flagged(kind: str) -> str:
        of_kind = [f for f, k in zip(scored.faithfulness, kinds, strict=True) if k == kind]
        return _share(sum(f is not None and f < limit for f in of_kind), len(of_kind))

    n = len(items)
    values = "-" if scored.values is None else _share(*scored.values)
    errors = "-" if scored.values is None else str(scored.records_with_errors)
    return Row(
        dataset=dataset,
        judge=scored.judge,
        records=n,
        values=values,
        errors=errors,
        auroc="-" if math.isnan(area) else f"{area:.3f}",
        unscoreable=str(labelled - len(pairs)),
        faithful_flagged=flagged(FAITHFUL),
        recall=flagged(HALLUCINATED),
        evasive_flagged=flagged(EVASIVE) if EVASIVE in kinds else "-",
        cpu_ms=f"{1000 * scored.cpu_seconds / n:.2f}" if n else "-",
    )


HEADER = (
    "| data set | judge | records | online values scored | records with judge errors | "
    "faithfulness AUROC | unscoreable (faithful + hallucinated) | faithful flagged | "
    "hallucinated flagged (recall) | evasive flagged | CPU ms / record |"
)


def print_table(rows: Sequence[Row]) -> None:
    print(HEADER)
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r.dataset} | {r.judge} | {r.records} | {r.values} | {r.errors} | {r.auroc} | "
            f"{r.unscoreable} | {r.faithful_flagged} | {r.recall} | {r.evasive_flagged} | "
            f"{r.cpu_ms} |"
        )


def print_categories(
    dataset: str, items: Sequence[Item], runs: Sequence[Scored], limit: float
) -> None:
    """Per category: how many answers each judge flags, and how many it leaves unscoreable."""
    categories = list(dict.fromkeys(i.category for i in items))
    print(f"\n{dataset}, per category: flagged (faithfulness < {limit:g}) / unscoreable\n")
    print("| category | label | n | " + " | ".join(s.judge for s in runs) + " |")
    print("|---|---|---:|" + "---:|" * len(runs))
    for category in categories:
        picked = [k for k, i in enumerate(items) if i.category == category]
        label = "hallucinated" if items[picked[0]].kind == HALLUCINATED else "not"
        cells = []
        for s in runs:
            values = [s.faithfulness[k] for k in picked]
            low = sum(v is not None and v < limit for v in values)
            cells.append(f"{low} / {sum(v is None for v in values)}")
        print(f"| {category} | {label} | {len(picked)} | " + " | ".join(cells) + " |")


# --- main


def _names(text: str, known: Sequence[str], what: str) -> list[str]:
    names = list(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise SystemExit(f"detection: {what} must be among {', '.join(known)}")
    return names


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--datasets",
        default=",".join(DATASETS),
        metavar="A,B",
        help=f"among {', '.join(DATASETS)} (default: all)",
    )
    parser.add_argument(
        "--judges",
        metavar="A,B",
        help="local, llm (default: local, and llm when --judge-url is given)",
    )
    parser.add_argument(
        "--judge-url", metavar="URL", help="the LLM judge's OpenAI-compatible endpoint (…/v1)"
    )
    parser.add_argument("--judge-model", metavar="M", help="the LLM judge's model name")
    parser.add_argument(
        "--ragas-python",
        metavar="PATH",
        help="an interpreter with ragas 0.4.3: also score Ragas's Faithfulness "
        "on the LLM endpoint (e.g. /tmp/rag-monitor-ragas-venv/bin/python)",
    )
    parser.add_argument(
        "--concurrency",
        type=int,
        metavar="N",
        help="records scored at once, as for rag-monitor score (default: 8 with "
        "the LLM judge, 64 with the local one)",
    )
    parser.add_argument("--limit", type=int, metavar="N", help="first N records of each set")
    parser.add_argument(
        "--halueval",
        type=Path,
        default=HALUEVAL,
        metavar="PATH",
        help="the HaluEval QA dev set (default: ../shared/data/ beside the repo)",
    )
    parser.add_argument(
        "--demo",
        type=Path,
        default=DEMO,
        metavar="PATH",
        help="the demo traffic (default: monitor/demo/traffic.jsonl)",
    )
    parser.add_argument("--config", metavar="FILE", help="settings file, as for rag-monitor")
    parser.add_argument(
        "--dump",
        type=Path,
        metavar="FILE",
        help="also write every record's faithfulness per judge as JSON lines",
    )
    args = parser.parse_args()
    datasets = _names(args.datasets, DATASETS, "--datasets")
    judges = [
        cast(JudgeKind, name)
        for name in _names(
            args.judges or ("local,llm" if args.judge_url else "local"), JUDGES, "--judges"
        )
    ]
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be at least 1")
    if args.concurrency is not None and args.concurrency < 1:
        parser.error("--concurrency must be at least 1")
    if ("llm" in judges or args.ragas_python) and not args.judge_url:
        parser.error("the llm judge and --ragas-python need --judge-url")
    overrides: dict[str, Any] = {}
    if args.judge_url:
        overrides["judge_base_url"] = args.judge_url
    if args.judge_model:
        overrides["judge_model"] = args.judge_model
    try:
        settings = load_settings(args.config, **overrides)
    except ConfigError as exc:
        raise SystemExit(f"detection: {exc}") from None
    limit = threshold(settings.thresholds, "faithfulness")

    rows: list[Row] = []
    dump = args.dump.open("w", encoding="utf-8") if args.dump else None
    per_category: list[tuple[str, list[Item], list[Scored]]] = []
    try:
        for name in datasets:
            items = load_dataset(name, args.halueval, args.demo)[: args.limit]
            runs: list[Scored] = []
            for kind in judges:
                print(f"{name}: {kind} judge, {len(items)} records", file=sys.stderr)
                try:
                    runs.append(
                        asyncio.run(score_with_scorer(settings, kind, items, args.concurrency))
                    )
                except JudgeConfigError as exc:
                    raise SystemExit(f"detection: {exc}") from None
            if args.ragas_python:
                print(f"{name}: Ragas, {len(items)} records", file=sys.stderr)
                runs.append(score_ragas(args.ragas_python, settings, items))
            runs.append(score_overlap(items))
            rows.extend(summarise(name, items, s, limit) for s in runs)
            if name.startswith("realistic"):
                per_category.append((name, items, runs))
            if dump is not None:
                for s in runs:
                    for k, item in enumerate(items):
                        line = {
                            "dataset": name,
                            "judge": s.judge,
                            "id": item.record["id"],
                            "kind": item.kind,
                            "category": item.category,
                            "faithfulness": s.faithfulness[k],
                        }
                        if s.details:
                            line["details"] = s.details[k]
                        dump.write(json.dumps(line, ensure_ascii=False) + "\n")
    finally:
        if dump is not None:
            dump.close()
    print()
    print_table(rows)
    for name, items, runs in per_category:
        print_categories(name, items, runs, limit)
    print(f"\nflag threshold: faithfulness < {limit:g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
