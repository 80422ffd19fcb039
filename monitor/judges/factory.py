"""`build_judge`: the LLM judge or the local judge, chosen from the settings; nothing loaded here.

See docs/design.md, "Judges".
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

from monitor.config import Settings
from monitor.judges import Embedded, Judge, TokenGate

if TYPE_CHECKING:
    from monitor.judges.local.embedder import MiniLMEmbedder
    from monitor.judges.metering import JudgeObserver

JudgeKind = Literal["auto", "llm", "local"]

#: `Settings.embedding_model` value that selects the in-process embedder
LOCAL_EMBEDDING = "local"


class JudgeConfigError(ValueError):
    """The requested judge cannot be built from these settings; the message names the setting."""


def build_judge(
    settings: Settings,
    *,
    kind: JudgeKind = "auto",
    gate: TokenGate | None = None,
    observer: JudgeObserver | None = None,
) -> Judge:
    """The judge for ``settings`` (see the module docstring). Opens nothing."""
    if kind == "auto":
        kind = "llm" if settings.judge_base_url else "local"
    if kind == "local":
        return _local_judge(settings)
    if kind != "llm":
        raise JudgeConfigError(f"unknown judge kind {kind!r}: auto, llm or local")
    if not settings.judge_base_url:
        raise JudgeConfigError(
            "the LLM judge needs an OpenAI-compatible endpoint: set RAG_MONITOR_JUDGE_BASE_URL "
            "(e.g. https://api.openai.com/v1 or http://127.0.0.1:8080/v1 for llama-server)"
        )
    from monitor.judges.llm import OpenAIJudge

    embedder = LocalEmbedding(_minilm()) if settings.embedding_model == LOCAL_EMBEDDING else None
    return OpenAIJudge(
        base_url=settings.judge_base_url,
        model=settings.judge_model,
        api_key=settings.judge_api_key,
        embedding_model=settings.embedding_model,
        timeout_seconds=settings.judge_timeout_seconds,
        step_timeouts=settings.judge_step_timeouts,
        fuse_grounding=settings.judge_fuse_grounding,
        max_retries=settings.judge_max_retries,
        concurrency=settings.judge_concurrency,
        max_completion_tokens=settings.judge_max_completion_tokens,
        gate=gate,
        observer=observer,
        embedder=embedder,
    )


class LocalEmbedding:
    """The MiniLM embedder behind the judge's async ``embed``: a worker thread, zero tokens."""

    def __init__(self, model: MiniLMEmbedder) -> None:
        self.model = model

    async def embed(self, texts: Sequence[str]) -> Embedded:
        vectors = await asyncio.to_thread(self.model.embed, list(texts))
        return Embedded(vectors=[[float(x) for x in row] for row in vectors.tolist()])

    async def aclose(self) -> None:
        """Nothing to close: the model is an in-memory onnxruntime session."""


def _minilm() -> MiniLMEmbedder:
    from monitor.judges.local.embedder import MiniLMEmbedder

    return MiniLMEmbedder()


def _local_judge(settings: Settings) -> Judge:
    from monitor.judges.local.judge import LocalJudge

    return LocalJudge(decision=settings.local_decision)
