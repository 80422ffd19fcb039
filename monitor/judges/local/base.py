"""The plumbing of a judge that answers in-process: worker threads, the Judge protocol, questions.

`judge.LocalJudge` answers the steps (`InProcessJudge.answer`); see docs/design.md,
"Judges".
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import math
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, TypeVar

from monitor.judges import Embedded, Judged, OutT, Prompt
from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.steps import QUESTIONS, GeneratedQuestion
from monitor.records import Usage
from monitor.text import evasive

T = TypeVar("T")

KIND = "local"

#: What the ``questions`` step's question starts with: a local judge generates no question,
#: the response stands in for one (relevancy details show it; `InProcessJudge.embed` drops it).
RESPONSE_AS_QUESTION = "[no question generated; the response is compared] "

#: Steps answered on the caller's thread: a regex on the response costs less than the hop
#: to a worker thread (the others split sentences, read contexts or run a model).
INLINE_STEPS = frozenset({QUESTIONS})


#: cgroup v2's CPU limit of this container ("max 100000" when there is none)
CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


def cpu_budget(cpu_max: Path = CPU_MAX) -> int:
    """The cores this process may use: the CPUs it may run on, capped by its container's
    CPU limit (cgroup v2 ``cpu.max``, rounded up; a pod's ``limits.cpu``), at least 1."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        quota, period = cpu_max.read_text(encoding="ascii").split()[:2]
        if quota != "max":
            cores = min(cores or 1, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass
    return max(1, cores or 1)


def default_threads() -> int:
    """Worker threads of the local judge: two per core it may use (a thread waits in Python
    while another runs a model; onnxruntime releases the GIL), from 2 to 8. Each thread in
    a model pass holds that pass's activations, so fewer threads on a small pod is less
    memory as well as less switching."""
    return min(8, 2 * cpu_budget())


@dataclass(frozen=True)
class Screen:
    """The risk screen of one record (``screen`` of either judge)."""

    #: hallucination risk in [0, 1]; feed it to `monitor.risk`
    risk: float
    #: local faithfulness (supported / statements), NaN without statements
    faithfulness: float
    #: the reason of the weakest statement
    reason: str
    #: graded local faithfulness: the statements' mean support, NaN without statements
    support: float = float("nan")


@dataclass
class InProcessJudge:
    """The Judge protocol's plumbing for a judge that answers in-process, at zero tokens."""

    embedder: MiniLMEmbedder = field(default_factory=MiniLMEmbedder)
    #: worker threads for the CPU work
    threads: int = 32
    kind: str = KIND
    #: it answers the basic steps only, never the fused ``grounding`` step
    fuse_grounding: ClassVar[bool] = False
    #: deterministic: every choice of a prompt is the same answer
    varies_choices: ClassVar[bool] = False
    thread_name: ClassVar[str] = "local-judge"

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError("threads must be >= 1")
        self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix=self.thread_name)

    async def _in_thread(self, work: Callable[..., T], *args: object) -> T:
        """``work(*args)`` in one of the judge's threads (with the caller's context vars)."""
        call = functools.partial(contextvars.copy_context().run, work, *args)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def aclose(self) -> None:
        """Let the worker threads go (idle ones at once; running steps finish)."""
        self._executor.shutdown(wait=False)

    async def generate(self, prompt: Prompt[OutT], n: int = 1) -> Judged[OutT]:
        if n < 1:
            raise ValueError("n must be >= 1")
        if prompt.step in INLINE_STEPS:
            answer = self.answer(prompt)
        else:
            answer = await self._in_thread(self.answer, prompt)
        return Judged(values=[answer] * n, usage=Usage())

    async def embed(self, texts: Sequence[str]) -> Embedded:
        # the response standing in for a generated question is embedded as the response
        texts = [t.removeprefix(RESPONSE_AS_QUESTION) for t in texts]
        vectors = await self._in_thread(self.embedder.embed, texts)
        # a repeated text (the relevancy questions) has the same vector: converted once
        rows: dict[str, list[float]] = {}
        for text, vector in zip(texts, vectors, strict=True):
            if text not in rows:
                rows[text] = vector.tolist()
        return Embedded(vectors=[rows[text] for text in texts], usage=Usage())

    def answer(self, prompt: Prompt[OutT]) -> OutT:
        """The local answer to one prompt, validated as the prompt's output model."""
        raise NotImplementedError

    def noncommittal(self, text: str) -> bool:
        """``text`` only declines, defers or says it does not know (`evasive.noncommittal`)."""
        return evasive.noncommittal(text)

    def question(self, response: str) -> GeneratedQuestion:
        """No question is generated: the response stands in for one, marked as such
        (`RESPONSE_AS_QUESTION`, which `embed` leaves out)."""
        noncommittal = (
            bool(evasive.NONCOMMITTAL.search(response.lower()))
            or not response.strip()
            or self.noncommittal(response)
        )
        return GeneratedQuestion(
            question=RESPONSE_AS_QUESTION + response, noncommittal=int(noncommittal)
        )
