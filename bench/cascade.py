"""The cascade: does the local screen spend an LLM judge's tokens where the hallucinations are?

    python -m bench.cascade               # every pool, 200 seeded runs, judge errors 0/10/25 %
    python -m bench.cascade --pools demo --seeds 50
    python -m bench.cascade --pools realistic-holdout --judge-url http://127.0.0.1:8080/v1 \
        --judge-model qwen        # a real LLM judge instead of the label-answering server

The long-answer pools read ``--long PATH``, else ``data/`` under ``$RAGMON_DEV_DATA``
(`scripts.devdata`); without ``--pools`` they are left out, saying so, when neither is there.

At equal expected LLM-judge tokens, uniform sampling against risk-based sampling (`monitor.risk`):
how many labelled hallucinated answers reach the LLM judge per 1,000 judge tokens, and what the
weighted hallucination rate the sidecar reports (Σ v/p over Σ 1/p, `rag_monitor_hallucination_
weight_total` over `rag_monitor_scored_weight_total`) makes of the truth.

1. **Screen.** Every faithful and hallucinated answer of each pool gets the local judge's risk
   as the sidecar's screen gives it (`monitor.risk.model_screen`: `LocalJudge.screen(...).risk`,
   the answer's probability of holding an unsupported claim), and the lexical fallback's
   (`monitor.risk.lexical_screen`); the process CPU per answer is measured around the model
   screen (models loaded first). Cached in ``--cache`` (the CPU-heavy part, done once per
   judge: the cache names a digest of the local judge's code and pinned model files, and the
   pool's ids).
2. **LLM judge.** Every answer is scored once per judge error rate (``--errors``) by the real
   scorer (`monitor.scoring.Scorer`, the three online metrics, the frugal call pattern) through
   `monitor.judges.llm.OpenAIJudge` against the test suite's judge server on 127.0.0.1
   (`tests.support.judge_server`, real HTTP, real token counts): the server answers from the
   labels, wrong on a set share of the answers (a hash of the answer's id, so the answers it
   errs on at 10 % are among those it errs on at 25 %): a hallucinated answer gets its last
   statement unsupported, a faithful one all supported. The record's verdict is the sidecar's
   flag (`monitor.flags.is_hallucination`) and its cost the tokens the scorer spent. With
   ``--judge-url`` a real OpenAI-compatible endpoint judges instead (its key, if any, in
   ``$RAGMON_CASCADE_JUDGE_KEY``), once: its verdicts and tokens are cached in
   ``--judge-cache`` per pool, model and answer, and its error is whatever it is (the rows
   say "real"; coverage is read against its own census).
3. **Runs.** ``--seeds`` seeded runs per pool, base rate and error rate: ``--population``
   arrivals drawn with replacement from the pool, at its own base rate and with 5 % hallucinated
   (``--subsample``); then each sampler draws its sample at ``--rate`` of the expected tokens:
   uniform at ``--rate``, risk with the sidecar's inclusion probability
   (`monitor.risk.inclusion_probability`: proportional to ε + risk, floored at a tenth of the
   rate) scaled so that its expected tokens equal uniform's (the scale solved on the arrivals
   with token weights), and the same for the lexical screen's risk. Every kept record weighs 1/p.

The table per pool and base rate: hallucinated answers reaching the judge per 1,000 judge tokens
(and the ratio to uniform), judge tokens spent per run, and for the weighted rate its bias, mean
95 % interval width (± 1.96 standard errors of the linearised ratio estimator under Poisson
sampling) and coverage, against the labelled rate of the arrivals and against the rate the
same judge would report had it read every arrival (the census): with a judge that errs, no
sampler can cover the labelled rate (the judge's own bias is π(1 − e) + (1 − π)e − π), so the
sampler's unbiasedness is read against the census and the labels at error 0. The screen's CPU:
the share of arrivals the sidecar screens (its ceiling, the inclusion probability of risk 1:
every record above it is dropped unread) times the CPU per answer.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import math
import platform
import resource
import sys
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

import monitor.judges.local
from bench.harness import FAITHFUL, HALLUCINATED, Item, load_dataset, within_reach
from monitor.flags import DEFAULT_THRESHOLDS, is_hallucination
from monitor.judges.steps import GROUNDING, QUESTIONS, VERIFY
from monitor.records import Interaction, ScoredRecord
from monitor.risk import EPSILON, FLOOR_SHARE
from monitor.sampling import unit_hash
from monitor.scoring import Scorer
from tests.support.records import validate_record

#: uniform, then risk sampling on each screen: the answer's probability (the sidecar's), the
#: same probability moved to a 5 % prior (`at_prior`), the claims' mean support (graded),
#: the lexical gaps (the fallback)
SAMPLERS = ("uniform", "risk", "risk at 5 %", "1 − support", "lexical")
POOLS = ("demo", "realistic-holdout", "long-fit", "long-report")
MODEL = "gpt-4o-mini"
#: the judge error of a real judge's rows (it errs as it does): read "real" in the tables
REAL_JUDGE = -1.0
Array = npt.NDArray[np.float64]


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --- 1. the screen


@dataclass(frozen=True)
class Screened:
    """A pool's answers with their labels and both screens' risks."""

    ids: list[str]
    labels: Array  # 1.0 = hallucinated
    risk: Array  # the model screen's: the answer's probability of an unsupported claim
    support: Array  # 1 − the claims' mean support (the graded score), same screen
    lexical: Array  # the lexical fallback's
    cpu_per_answer: float  # process CPU seconds per answer, model screen
    lexical_cpu_per_answer: float


def pool_items(pool: str, long: Path | None) -> list[Item]:
    return [i for i in load_dataset(pool, long=long) if i.kind in (FAITHFUL, HALLUCINATED)]


def interaction(item: Item, k: int) -> Interaction:
    record = dict(item.record)
    record["id"] = f"{record.get('id', k)}"
    return validate_record(record)


def judge_digest() -> str:
    """The local judge's code and pinned model files, as one digest: a cached screen is
    reused only for the judge that made it."""
    root = Path(monitor.judges.local.__file__).parent
    digest = hashlib.sha256()
    for path in sorted([*root.rglob("*.py"), root / "model" / "SHA256SUMS"]):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def screen_pool(pool: str, items: Sequence[Item], cache: Path) -> Screened:
    """Both screens' risks for ``items``, from ``cache`` when it holds this pool for this tree."""
    ids = [str(item.record.get("id", k)) for k, item in enumerate(items)]
    key = {"judge": judge_digest(), "ids": ids}
    stored: dict[str, Any] = json.loads(cache.read_text()) if cache.is_file() else {}
    entry = stored.get(pool)
    if entry is None or entry.get("key") != key:
        entry = {"key": key, **_screen(items)}
        stored[pool] = entry
        cache.write_text(json.dumps(stored))
    labels = np.array([float(i.kind == HALLUCINATED) for i in items])
    return Screened(
        ids,
        labels,
        np.array(entry["risk"], dtype=float),
        np.array(entry["support"], dtype=float),
        np.array(entry["lexical"], dtype=float),
        float(entry["cpu"]),
        float(entry["lexical_cpu"]),
    )


def _screen(items: Sequence[Item]) -> dict[str, Any]:
    from monitor.judges.local.judge import LocalJudge
    from monitor.risk import lexical_screen

    judge = LocalJudge(threads=1)
    judge.warm_up()
    records = [interaction(item, k) for k, item in enumerate(items)]
    lexical = lexical_screen(judge)
    start = _cpu()
    screens = [judge.screen(r.context_texts, r.response, r.user_input) for r in records]
    cpu = (_cpu() - start) / len(records)
    risk = [s.risk for s in screens]
    support = [1.0 - s.support if not math.isnan(s.support) else 0.5 for s in screens]
    start = _cpu()
    lex = [lexical(r) for r in records]
    lexical_cpu = (_cpu() - start) / len(records)
    print(f"  screened {len(records)} answers: {cpu * 1000:.1f} ms CPU each", file=sys.stderr)
    return {
        "risk": risk,
        "support": support,
        "lexical": lex,
        "cpu": cpu,
        "lexical_cpu": lexical_cpu,
    }


# --- 2. the LLM judge


def _error(record_id: str, rate: float) -> bool:
    return unit_hash(f"cascade-judge-error/{record_id}".encode()) < rate


def label_answer(
    labels: dict[str, bool],
) -> Any:
    """The judge server's answer function: the test judge's answers, with the grounding
    verdicts set from ``labels`` (answer text → judged hallucinated) and a generated
    question cut to 16 words (the test judge restates the answer's first sentence, which
    for a long answer overruns the questions step's output cap)."""
    from tests.support import answers

    def answer(step: str, inputs: dict[str, Any], n: int) -> list[dict[str, Any]]:
        out = answers.answer(step, inputs, n)
        if step == GROUNDING:
            hallucinated = labels[inputs["answer"]]
            for choice in out:
                verdicts = choice["statements"]
                for k, v in enumerate(verdicts):
                    v["verdict"] = int(not (hallucinated and k == len(verdicts) - 1))
        elif step == QUESTIONS:
            for choice in out:  # a question, not the answer's first sentence restated
                words = choice["question"].split()
                if len(words) > 16:
                    choice["question"] = " ".join(words[:15]) + "?"
        elif step == VERIFY:
            raise ValueError("the cascade's judge answers the fused grounding step only")
        return out

    return answer


async def judge_pool(
    items: Sequence[Item], ids: Sequence[str], errors: Sequence[float]
) -> tuple[Array, dict[float, Array]]:
    """Each answer's judge tokens and, per error rate, its verdict (1 hallucinated, 0 not,
    NaN unscoreable), from the real scorer against the judge server."""
    from monitor.judges.llm import OpenAIJudge
    from monitor.scoring import ONLINE_METRICS
    from tests.support.judge_server import JudgeServer

    records = [interaction(item, k) for k, item in enumerate(items)]
    tokens = np.zeros(len(records))
    verdicts: dict[float, Array] = {}
    for error in errors:
        judged = {
            r.response: (item.kind == HALLUCINATED) != _error(rid, error)
            for r, item, rid in zip(records, items, ids, strict=True)
        }
        with JudgeServer(answer=label_answer(judged)) as server:
            judge = OpenAIJudge(
                base_url=server.base_url,
                model=MODEL,
                max_retries=0,
                concurrency=16,
                # the test judge quotes every claim in its reasons: a long answer's
                # grounding overruns the default cap
                max_completion_tokens=16_384,
            )
            try:
                scored = await _score_all(Scorer(judge, ONLINE_METRICS, cache_size=0), records)
            finally:
                await judge.aclose()
        v = np.full(len(records), math.nan)
        for k, s in enumerate(scored):
            if s.error is not None:
                raise SystemExit(f"the judge failed on {records[k].id}: {s.error}")
            v[k], tokens[k] = _verdict(s)
        verdicts[error] = v
    return tokens, verdicts


@dataclass(frozen=True)
class Endpoint:
    """A real LLM judge behind an OpenAI-compatible endpoint, and where its answers are kept."""

    url: str
    model: str
    cache: Path
    concurrency: int = 4


async def judge_pool_real(
    pool: str, items: Sequence[Item], ids: Sequence[str], endpoint: Endpoint
) -> tuple[Array, Array]:
    """Each answer's judge tokens and verdict from a real judge: the same scorer and flag as
    `judge_pool`, each answer scored once and kept in ``endpoint.cache`` (the slow part: a
    small local model takes seconds a call), so an interrupted run goes on where it was."""
    import os

    from pydantic import SecretStr

    from monitor.judges.llm import OpenAIJudge
    from monitor.scoring import ONLINE_METRICS

    kept: dict[str, Any] = {}
    if endpoint.cache.exists():
        kept = json.loads(endpoint.cache.read_text())
    mine: dict[str, list[float]] = kept.setdefault(f"{pool}/{endpoint.model}", {})
    todo = [
        (rid, interaction(item, k))
        for k, (item, rid) in enumerate(zip(items, ids, strict=True))
        if rid not in mine
    ]
    judge = OpenAIJudge(
        base_url=endpoint.url,
        model=endpoint.model,
        api_key=SecretStr(os.environ.get("RAGMON_CASCADE_JUDGE_KEY", "none")),
        embedding_model=endpoint.model,
        max_retries=2,
        concurrency=endpoint.concurrency,
    )
    scorer = Scorer(judge, ONLINE_METRICS, cache_size=0)
    semaphore = asyncio.Semaphore(endpoint.concurrency)
    done = 0

    failed: dict[str, str] = {}
    spent: dict[str, list[float]] = {}  # this run's failures: no verdict, the tokens they cost

    async def one(rid: str, record: Interaction) -> None:
        nonlocal done
        async with semaphore:
            scored = await scorer.score(record)
        done += 1
        if scored.error is not None:
            # not kept: a judge that failed (a timeout, junk JSON) is asked again next run
            failed[rid] = scored.error
            spent[rid] = [math.nan, _verdict(scored)[1]]
        else:
            mine[rid] = list(_verdict(scored))
            endpoint.cache.write_text(json.dumps(kept))
        print(f"  judged {done}/{len(todo)} of {pool}", file=sys.stderr)

    try:
        await asyncio.gather(*(one(rid, record) for rid, record in todo))
    finally:
        await judge.aclose()
    if failed:
        kinds = Counter(error.split(":")[0] for error in failed.values())
        print(f"  the judge could not score {len(failed)} of {len(ids)} answers of {pool} "
              f"({dict(kinds)}); they count as unscoreable, and a rerun asks again",
              file=sys.stderr)  # fmt: skip
    got = {**spent, **mine}
    verdicts = np.array([got[rid][0] for rid in ids], dtype=np.float64)
    tokens = np.array([got[rid][1] for rid in ids], dtype=np.float64)
    return tokens, verdicts


def _verdict(scored: ScoredRecord) -> tuple[float, float]:
    """A scored record's hallucination flag (NaN: not decidable) and the judge tokens it cost."""
    flag = is_hallucination(scored, DEFAULT_THRESHOLDS)
    spent = scored.usage.prompt_tokens + scored.usage.completion_tokens
    return math.nan if flag is None else float(flag), float(spent)


async def _score_all(scorer: Scorer, records: Sequence[Interaction]) -> list[ScoredRecord]:
    """Every record scored, 16 at once."""
    semaphore = asyncio.Semaphore(16)

    async def one(record: Interaction) -> ScoredRecord:
        async with semaphore:
            return await scorer.score(record)

    return list(await asyncio.gather(*(one(r) for r in records)))


# --- 3. the seeded runs


def probabilities(risk: Array, weights: Array, rate: float) -> Array:
    """The sidecar's inclusion probabilities (`monitor.risk.inclusion_probability`), scaled
    so that the ``weights``-weighted mean is ``rate`` (vectorised `monitor.risk.solve_scale`)."""
    floor = FLOOR_SHARE * rate
    r = np.clip(risk, 0.0, 1.0)

    def p(c: float) -> Array:
        return np.minimum(1.0, np.maximum(floor, c * (EPSILON + r)))

    total = float(weights.sum())
    low, high = 0.0, 1.0 / EPSILON
    for _ in range(60):
        mid = (low + high) / 2
        if float((p(mid) * weights).sum()) / total < rate:
            low = mid
        else:
            high = mid
    return p(high)


def at_prior(risk: Array, prior: float, fitted: float = 0.5) -> Array:
    """The answer's probability as it would read at a base rate of ``prior`` rather than the
    ``fitted`` one its model was fitted at (Bayes: the odds times the ratio of prior odds)."""
    r = np.clip(risk, 1e-6, 1 - 1e-6)
    odds = r / (1 - r) * (prior / (1 - prior)) / (fitted / (1 - fitted))
    return np.asarray(odds / (1 + odds), dtype=float)


@dataclass
class Tally:
    """One sampler's results over the seeded runs."""

    hallucinated: float = 0.0
    tokens: float = 0.0
    kept: float = 0.0
    screened: float = 0.0
    runs: int = 0

    def __post_init__(self) -> None:
        self.bias_labels: list[float] = []
        self.bias_census: list[float] = []
        self.width: list[float] = []
        self.cover_labels = 0
        self.cover_census = 0

    def add(
        self,
        kept: npt.NDArray[np.bool_],
        p: Array,
        labels: Array,
        verdicts: Array,
        tokens: Array,
        truth: float,
        census: float,
    ) -> None:
        self.runs += 1
        self.hallucinated += float(labels[kept].sum())
        self.tokens += float(tokens[kept].sum())
        self.kept += float(kept.sum())
        scoreable = kept & ~np.isnan(verdicts)
        w = 1.0 / p[scoreable]
        v = verdicts[scoreable]
        if w.sum() == 0:
            estimate, se = math.nan, math.nan
        else:
            estimate = float((w * v).sum() / w.sum())
            residual = (1.0 - p[scoreable]) * (w * (v - estimate)) ** 2
            se = math.sqrt(float(residual.sum())) / float(w.sum())
        half = 1.96 * se
        self.bias_labels.append(estimate - truth)
        self.bias_census.append(estimate - census)
        self.width.append(2 * half)
        self.cover_labels += int(abs(estimate - truth) <= half)
        self.cover_census += int(abs(estimate - census) <= half)

    def per_1k(self) -> float:
        return 1000 * self.hallucinated / self.tokens if self.tokens else math.nan


def run(
    s: Screened,
    tokens: Array,
    verdicts: Array,
    *,
    base: float | None,
    rate: float,
    seeds: int,
    population: int,
) -> dict[str, Tally]:
    """``seeds`` runs of ``population`` arrivals (at ``base`` hallucinated, or the pool's own
    rate when None), each sampler at ``rate`` of the expected tokens."""
    tallies = {name: Tally() for name in SAMPLERS}
    bad = np.flatnonzero(s.labels == 1.0)
    good = np.flatnonzero(s.labels == 0.0)
    for seed in range(seeds):
        rng = np.random.default_rng(seed)
        if base is None:
            draw = rng.integers(0, len(s.labels), population)
        else:
            hallucinated = rng.random(population) < base
            draw = np.where(
                hallucinated,
                bad[rng.integers(0, len(bad), population)],
                good[rng.integers(0, len(good), population)],
            )
        labels, v, t = s.labels[draw], verdicts[draw], tokens[draw]
        truth = float(labels.mean())
        census = float(np.nanmean(v))
        u = rng.random(population)
        screens = {
            "risk": s.risk,
            "risk at 5 %": at_prior(s.risk, 0.05),
            "1 − support": s.support,
            "lexical": s.lexical,
        }
        for name in SAMPLERS:
            risk = screens.get(name)
            if risk is None:
                p = np.full(population, rate)
                tallies[name].screened += 0.0
            else:
                p = probabilities(risk[draw], t, rate)
                tallies[name].screened += float(p.max())  # the ceiling: what the sidecar screens
            tallies[name].add(u < p, p, labels, v, t, truth, census)
    return tallies


# --- the report


def report(
    pool: str,
    s: Screened,
    tokens: Array,
    results: dict[tuple[str, float], dict[str, Tally]],
    rate: float,
    population: int,
) -> None:
    base = float(s.labels.mean())
    print(
        f"\n### {pool}: {len(s.labels)} answers ({int(s.labels.sum())} hallucinated, "
        f"{base:.0%}), {tokens.mean():.0f} judge tokens per answer; model screen "
        f"{s.cpu_per_answer * 1000:.0f} ms CPU per answer, lexical "
        f"{s.lexical_cpu_per_answer * 1000:.1f} ms\n"
    )
    print(
        "| base rate | judge error | sampler | hallucinated per 1k tokens | × uniform "
        "| tokens per run | bias vs labels | bias vs census | 95 % width "
        "| coverage: labels | coverage: census | screened share | screen CPU s / 1k arrivals |"
    )
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for (variant, error), tallies in results.items():
        uniform = tallies["uniform"].per_1k()
        for name, t in tallies.items():
            share = t.screened / t.runs
            cpu = s.lexical_cpu_per_answer if name == "lexical" else s.cpu_per_answer
            ratio = t.per_1k() / uniform if uniform else math.nan
            print(
                f"| {variant} | {_error_label(error)} | {name} | {t.per_1k():.3f} | "
                f"{'**' if name == 'risk' else ''}{ratio:.2f}×{'**' if name == 'risk' else ''} "
                f"| {t.tokens / t.runs:,.0f} | {np.mean(t.bias_labels):+.4f} "
                f"| {np.mean(t.bias_census):+.4f} | {np.mean(t.width):.4f} "
                f"| {t.cover_labels / t.runs:.1%} | {t.cover_census / t.runs:.1%} "
                f"| {share:.1%} | {share * 1000 * cpu:.1f} |"
            )


def summary(
    rows: Sequence[tuple[str, Screened, dict[tuple[str, float], dict[str, Tally]]]],
) -> None:
    """One line per pool and base rate: the headline of the detail tables."""
    screens = [name for name in SAMPLERS if name not in ("uniform", "risk")]
    print(
        "| pool | base rate | hallucinated per 1k tokens: uniform → risk | **risk × uniform** "
        + "".join(f"| {name} × uniform " for name in screens)
        + "| coverage, labels, judge error 0: uniform / risk "
        "| coverage, census, judge error 10 % / 25 %: uniform | the same: risk "
        "| 95 % width, error 10 %: uniform / risk | screened share | screen CPU per answer |"
    )
    print("|---|---|---:|---:|" + "---:|" * len(screens) + "---:|---:|---:|---:|---:|---:|")
    for pool, s, results in rows:
        variants = list(dict.fromkeys(variant for variant, _ in results))
        errors = sorted({error for _, error in results})
        for variant in variants:
            first = results[(variant, errors[0])]
            uniform, risk = first["uniform"], first["risk"]
            ratio = risk.per_1k() / uniform.per_1k()
            others = "".join(
                f"| {first[name].per_1k() / uniform.per_1k():.2f}× " for name in screens
            )
            exact = results.get((variant, 0.0))
            labels = (
                f"{exact['uniform'].cover_labels / exact['uniform'].runs:.1%} / "
                f"{exact['risk'].cover_labels / exact['risk'].runs:.1%}"
                if exact is not None
                else "—"
            )
            census = [
                " / ".join(
                    f"{_census(results[(variant, e)][name]):.1%}"
                    for e in errors
                    if e > 0 or e == REAL_JUDGE
                )
                for name in ("uniform", "risk")
            ]
            middle = results.get((variant, 0.1), first)
            width = f"{np.mean(middle['uniform'].width):.3f} / {np.mean(middle['risk'].width):.3f}"
            print(
                f"| {pool} | {variant} | {uniform.per_1k():.3f} → {risk.per_1k():.3f} "
                f"| **{ratio:.2f}×** {others}| {labels} | {census[0]} | {census[1]} "
                f"| {width} | {risk.screened / risk.runs:.1%} "
                f"| {s.cpu_per_answer * 1000:.0f} ms |"
            )


def _error_label(error: float) -> str:
    return "real" if error == REAL_JUDGE else f"{error:.0%}"


def _census(t: Tally) -> float:
    return t.cover_census / t.runs


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pools", help=f"default: {','.join(POOLS)}")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--population", type=int, default=4000)
    parser.add_argument("--rate", type=float, default=0.05, help="the LLM judge's sample rate")
    parser.add_argument("--subsample", type=float, default=0.05, help="the low base rate")
    parser.add_argument("--errors", default="0,0.1,0.25", help="the judge's error rates")
    parser.add_argument("--long", type=Path, help="default: data/ under $RAGMON_DEV_DATA")
    parser.add_argument(
        "--cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "rag-monitor-cascade-risks.json",
        help="the screens' risks, computed once per tree",
    )
    parser.add_argument("--screen-only", action="store_true", help="stop after the screens")
    parser.add_argument("--judge-url", help="a real OpenAI-compatible judge (replaces --errors)")
    parser.add_argument("--judge-model", default="qwen", help="its chat and embedding model")
    parser.add_argument(
        "--judge-cache",
        type=Path,
        default=Path(tempfile.gettempdir()) / "rag-monitor-cascade-judge.json",
        help="the real judge's verdicts and tokens, per pool, model and answer",
    )
    args = parser.parse_args(argv)
    if args.pools is None:
        pools = within_reach(POOLS, long=args.long)
    else:
        pools = [p.strip() for p in args.pools.split(",") if p.strip()]
    errors = [REAL_JUDGE] if args.judge_url else [float(e) for e in args.errors.split(",")]
    endpoint = (
        Endpoint(args.judge_url, args.judge_model, args.judge_cache) if args.judge_url else None
    )
    print(
        f"python -m bench.cascade --pools {','.join(pools)} --seeds {args.seeds} "
        f"--population {args.population} --rate {args.rate} "
        + (
            f"--judge-url {args.judge_url} --judge-model {args.judge_model}; "
            if args.judge_url
            else f"--errors {args.errors}; "
        )
        + f"{platform.processor() or platform.machine()}",
        file=sys.stderr,
    )
    screened = {}
    for pool in pools:
        print(f"screening {pool}", file=sys.stderr)
        items = pool_items(pool, args.long)
        screened[pool] = (items, screen_pool(pool, items, args.cache))
    if args.screen_only:
        return 0
    rows = []
    for pool, (items, s) in screened.items():
        if endpoint is None:
            tokens, verdicts = asyncio.run(judge_pool(items, s.ids, errors))
        else:
            tokens, real = asyncio.run(judge_pool_real(pool, items, s.ids, endpoint))
            verdicts = {REAL_JUDGE: real}
        results: dict[tuple[str, float], dict[str, Tally]] = {}
        for variant, base in (("own", None), (f"{args.subsample:.0%}", args.subsample)):
            for error in errors:
                label = f"own ({s.labels.mean():.0%})" if base is None else variant
                results[(label, error)] = run(
                    s,
                    tokens,
                    verdicts[error],
                    base=base,
                    rate=args.rate,
                    seeds=args.seeds,
                    population=args.population,
                )
        report(pool, s, tokens, results, args.rate, args.population)
        rows.append((pool, s, results))
    print("\n### Summary\n")
    summary(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
