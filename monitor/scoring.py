"""`Scorer`: runs the metrics' judge steps for one interaction and collects scores,
details and spend; never raises for a judge failure.

See docs/design.md, "Steps and call patterns".
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Literal, Protocol, TypeVar

from pydantic import BaseModel

from monitor.judges import Judge, JudgeError, Prompt, model_name
from monitor.lru import LRU
from monitor.metrics._base import NAN, CallPattern, Metric
from monitor.metrics.context_precision import ContextPrecision
from monitor.metrics.context_recall import ContextRecall
from monitor.metrics.context_utility import ContextUtility
from monitor.metrics.factual_correctness import FactualCorrectness
from monitor.metrics.faithfulness import Faithfulness
from monitor.metrics.noise_sensitivity import NoiseSensitivity
from monitor.metrics.precision_at_k import PrecisionAtK
from monitor.metrics.response_relevancy import ResponseRelevancy
from monitor.metrics.semantic_similarity import SemanticSimilarity

# the metric names are defined with the records' types; imported from here too
from monitor.records import ALL_METRICS as ALL_METRICS
from monitor.records import OFFLINE_METRICS as OFFLINE_METRICS
from monitor.records import ONLINE_METRICS as ONLINE_METRICS
from monitor.records import (
    Interaction,
    MetricResult,
    ScoredRecord,
    Usage,
)

OutT = TypeVar("OutT", bound=BaseModel)

NO_REFERENCE = "no reference"


class RecordScorer(Protocol):
    """`Scorer` as its users see it: never raises for a judge failure, sets ``error``."""

    async def score(self, interaction: Interaction) -> ScoredRecord: ...


class UnknownMetric(ValueError):
    """A metric name that is not one of `ALL_METRICS`."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__(
            f"unknown metric{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))}; "
            f"known: {', '.join(ALL_METRICS)}"
        )
        self.names = list(names)


def parse_metric_names(text: str) -> list[str]:
    """``"a, b"`` → ``["a", "b"]`` (duplicates dropped); `UnknownMetric` for names not known."""
    names = list(dict.fromkeys(part.strip() for part in text.split(",") if part.strip()))
    check_metric_names(names)
    return names


def check_metric_names(names: Sequence[str]) -> None:
    unknown = [n for n in names if n not in ALL_METRICS]
    if unknown:
        raise UnknownMetric(unknown)
    if not names:
        raise ValueError("no metric to score")


def fuses_grounding(judge_kind: str, pattern: CallPattern, metrics: Sequence[str]) -> bool:
    """Whether faithfulness and context_utility are asked as one ``grounding`` step.

    Only in ``frugal``, only for an LLM judge (a zero-token local judge answers
    the basic steps and gains nothing), only when both metrics are scored, and
    not with noise_sensitivity, which shares the response's ``statements`` step
    with faithfulness (fused, the response would be decomposed twice).
    Per record, also only with contexts and a non-blank response.
    """
    return (
        pattern == "frugal"
        and judge_kind == "llm"
        and {"faithfulness", "context_utility"} <= set(metrics)
        and "noise_sensitivity" not in metrics
    )


#: the judge's answers by call key (step, instruction, inputs, choices, asking metric)
Answers = LRU[tuple[str, ...], list[Any]]


class _RecordRunner:
    """The `StepRunner` of one record: sharing, caching, topping up choices, billing."""

    def __init__(
        self, judge: Judge, pattern: CallPattern, cache: Answers, *, fuse_grounding: bool = False
    ) -> None:
        self._judge = judge
        self._pattern = pattern
        self._cache = cache
        self._fuse_grounding = fuse_grounding
        self._in_flight: dict[tuple[str, ...], asyncio.Future[list[Any]]] = {}
        self.usage = Usage()
        self.usage_by_metric: dict[str, Usage] = {}

    @property
    def call_pattern(self) -> CallPattern:
        return self._pattern

    @property
    def fuse_grounding(self) -> bool:
        return self._fuse_grounding

    async def generate(self, prompt: Prompt[OutT], n: int = 1) -> list[OutT]:
        if n < 1:
            raise ValueError("n must be >= 1")
        if self._pattern == "per_call":
            return await self._ask(prompt, n)
        # a judge whose answer depends on the asking metric shares it within that metric
        asker = prompt.metric if self._judge.reads_metric else ""
        key = ("generate", prompt.step, prompt.instruction, prompt.render_inputs(), str(n), asker)
        return await self._shared(key, lambda: self._ask(prompt, n))

    async def embed(self, texts: Sequence[str], metric: str) -> list[list[float]]:
        texts = list(texts)
        if self._pattern == "per_call":
            return await self._embed(texts, metric)
        key = ("embed", json.dumps(texts, ensure_ascii=False))
        return await self._shared(key, lambda: self._embed(texts, metric))

    async def _shared(
        self, key: tuple[str, ...], call: Callable[[], Awaitable[list[Any]]]
    ) -> list[Any]:
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        # completed futures stay: within a record they are the memo, whatever the cache size
        pending = self._in_flight.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[list[Any]] = asyncio.get_running_loop().create_future()
        self._in_flight[key] = future
        try:
            value = await call()
        except asyncio.CancelledError:
            future.cancel()
            raise
        except Exception as exc:
            future.set_exception(exc)
            future.exception()  # mark retrieved: no warning when no other metric waits
            raise
        future.set_result(value)
        self._cache.put(key, value)
        return value

    async def _ask(self, prompt: Prompt[OutT], n: int) -> list[OutT]:
        """``n`` choices; a server that returned fewer is asked again for the missing ones."""
        values: list[OutT] = []
        while len(values) < n:
            judged = await self._judge.generate(prompt, n - len(values))
            self._bill(prompt.metric, judged.usage)
            if not judged.values:
                raise JudgeError("invalid_output", f"step {prompt.step}: no choice returned")
            values.extend(judged.values)
        return values[:n]

    async def _embed(self, texts: list[str], metric: str) -> list[list[float]]:
        embedded = await self._judge.embed(texts)
        self._bill(metric, embedded.usage)
        if len(embedded.vectors) != len(texts):
            raise JudgeError(
                "invalid_output", f"{len(embedded.vectors)} embeddings for {len(texts)} texts"
            )
        return embedded.vectors

    def _bill(self, metric: str, usage: Usage) -> None:
        # the judge's own count: its HTTP requests, none for the in-process local judge
        spent = Usage(
            calls=usage.calls,
            prompt_tokens=usage.prompt_tokens,
            completion_tokens=usage.completion_tokens,
        )
        self.usage.add(spent)
        self.usage_by_metric.setdefault(metric, Usage()).add(spent)


class Scorer:
    """Scores interactions with the named metrics against ``judge``. No side effects on creation."""

    def __init__(
        self,
        judge: Judge,
        metrics: Sequence[str],
        *,
        call_pattern: Literal["frugal", "per_call"] = "frugal",
        relevancy_questions: int = 3,
        cache_size: int = 512,
        factual_correctness: FactualCorrectness | None = None,
        noise_sensitivity: NoiseSensitivity | None = None,
        semantic_similarity: SemanticSimilarity | None = None,
        fuse_grounding: bool = True,
    ) -> None:
        names = list(dict.fromkeys(metrics))
        check_metric_names(names)
        if call_pattern not in ("frugal", "per_call"):
            raise ValueError("call_pattern must be frugal or per_call")
        if relevancy_questions < 1:
            raise ValueError("relevancy_questions must be >= 1")
        configured: dict[str, Metric] = {
            "faithfulness": Faithfulness(),
            # a judge that answers every choice alike is asked once: its copies would be
            # the same question, the same similarity
            "response_relevancy": ResponseRelevancy(
                questions=relevancy_questions if judge.varies_choices else 1
            ),
            "context_utility": ContextUtility(),
            "context_precision": ContextPrecision(),
            "precision_at_k": PrecisionAtK(),
            "context_recall": ContextRecall(),
            "factual_correctness": factual_correctness or FactualCorrectness(),
            "noise_sensitivity": noise_sensitivity or NoiseSensitivity(),
            "semantic_similarity": semantic_similarity or SemanticSimilarity(),
        }
        self.judge = judge
        #: the judge's model, stamped on every result with its kind
        self.judge_model = model_name(judge)
        self.metrics: tuple[str, ...] = tuple(names)
        self.call_pattern: CallPattern = call_pattern
        self._metrics = [configured[name] for name in names]
        self._cache: Answers = LRU(cache_size if call_pattern == "frugal" else 0)
        #: ``fuse_grounding`` False, here or on the judge (`RAG_MONITOR_JUDGE_FUSE_GROUNDING`):
        #: never the fused step (a judge model too small to follow it answers the basic
        #: steps better)
        self._fuses = (
            fuse_grounding
            and judge.fuse_grounding
            and fuses_grounding(judge.kind, call_pattern, names)
        )

    @property
    def cache_hits(self) -> int:
        return self._cache.hits

    async def score(self, interaction: Interaction) -> ScoredRecord:
        steps = _RecordRunner(
            self.judge,
            self.call_pattern,
            self._cache,
            fuse_grounding=self._fuses
            and bool(interaction.retrieved_contexts)
            and bool(interaction.response.strip()),
        )
        results = await asyncio.gather(
            *(self._one(metric, steps, interaction) for metric in self._metrics)
        )
        error = next((r.error for r in results if r.error is not None), None)
        return ScoredRecord(
            interaction=interaction,
            results={r.metric: r for r in results},
            usage=steps.usage,
            usage_by_metric=steps.usage_by_metric,
            error=error,
        )

    async def _one(
        self, metric: Metric, steps: _RecordRunner, interaction: Interaction
    ) -> MetricResult:
        if metric.needs_reference and interaction.reference is None:
            result = MetricResult(metric=metric.name, score=NAN, details={"reason": NO_REFERENCE})
        else:
            try:
                result = await metric.evaluate(steps, interaction)
            except JudgeError as exc:
                result = MetricResult(
                    metric=metric.name,
                    score=NAN,
                    details={"reason": "judge failed", "detail": exc.detail},
                    error=exc.reason,
                )
        result.judge = self.judge.kind
        result.judge_model = self.judge_model
        return result
