"""`LocalJudge`: every judge step answered in-process at zero tokens, claim by claim.

The judge answers one question, `LocalJudge.support`: each claim's `Decision` against the
retrieved passages (decided in `readings.Reader.decide`, the only place a support decision
is made). Everything else goes through it: the metrics' steps (`generate`, claims by
`claims`, verdicts by `assess`, usefulness per context), the risk screen (`screen`) and the
training code (`support`, and through `reader` the inputs the combiner weighs).
See docs/local-judge.md and docs/model.md.
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
from typing import ClassVar, Literal, TypeVar

from monitor.judges import Embedded, Judged, JudgeError, OutT, Prompt, steps
from monitor.judges.local import claims as cl
from monitor.judges.local.answer import AnswerModel
from monitor.judges.local.combiner import Combiner
from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.entailment import SupportModel
from monitor.judges.local.readings import Decision, Reader
from monitor.judges.local.reasons import excerpt
from monitor.records import Usage
from monitor.text import evasive

__all__ = ["Decision", "LocalJudge", "AnswerReading", "Screen"]

T = TypeVar("T")

KIND = "local"
#: How the local judge says a claim is unsupported (`LocalJudge.decision`).
LocalDecision = Literal["answer", "claim"]
#: The metrics whose ``verify`` step reads one answer against its retrieved context, where the
#: ``answer`` decision applies; the reference-based ones judge each claim on its own.
WHOLE_ANSWER_METRICS = frozenset({"faithfulness"})
#: The judge's model, as the start-up log and ``rag_monitor_judge_info`` name it.
MODEL_NAME = "claims+support-model"

#: Steps answered on the caller's thread: a regex on the response costs less than the hop
#: to a worker thread (the others split sentences, read contexts or run a model).
INLINE_STEPS = frozenset({steps.QUESTIONS})

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


def passages(contexts: Sequence[str]) -> list[str]:
    """The passages of ``contexts``: each line with text is one (the ``verify`` step's
    context is the retrieved contexts joined a line apart, `steps.join_contexts`, so a
    context and its lines read alike)."""
    return [line for c in contexts for line in c.split("\n") if line.strip()]


@dataclass(frozen=True)
class Screen:
    """The risk screen of one record (`LocalJudge.screen`)."""

    #: hallucination risk in [0, 1]; feed it to `monitor.risk`
    risk: float
    #: local faithfulness (supported / claims), NaN without claims
    faithfulness: float
    #: the reason of the weakest claim
    reason: str
    #: graded local faithfulness: the claims' mean support, NaN without claims
    support: float = float("nan")


@dataclass(frozen=True)
class AnswerReading:
    """The claims of one text against its context, read as a whole (`LocalJudge.assess`)."""

    decisions: list[Decision]
    #: the probability that the text holds at least one unsupported claim
    probability: float
    #: the cut at and above which the judge says it does
    cut: float

    @property
    def flagged(self) -> bool:
        return self.probability >= self.cut

    @property
    def unsupported(self) -> list[bool]:
        """Which claims the judge says are unsupported: none when the answer is not flagged;
        when it is, the claims below the claim threshold, and at least the weakest."""
        if not self.flagged or not self.decisions:
            return [False] * len(self.decisions)
        weakest = min(range(len(self.decisions)), key=lambda k: self.decisions[k].probability)
        return [not d.supported or k == weakest for k, d in enumerate(self.decisions)]

    def reasons(self, source: steps.VerifySource = "context") -> list[str]:
        compare = ">=" if self.flagged else "<"
        answer = f"; answer p={self.probability:.2f} {compare} cut {self.cut:.2f}"
        return [
            d.reason(source, supported=not bad, answer=answer)
            for d, bad in zip(self.decisions, self.unsupported, strict=True)
        ]


@dataclass
class LocalJudge:
    """The Judge protocol answered in-process, claim by claim, at zero tokens
    (``kind = "local"``)."""

    embedder: MiniLMEmbedder = field(default_factory=MiniLMEmbedder)
    #: the support model (built over ``embedder`` when not given)
    model: SupportModel | None = None
    #: the combiner's weights (the shipped ones when not given)
    combiner: Combiner | None = None
    #: the answer-level model and its cut (the shipped ones when not given)
    answer_model: AnswerModel | None = None
    #: how a claim is said to be unsupported against retrieved context: on its own
    #: probability ("claim"), or only in an answer judged as a whole to hold one ("answer")
    decision: LocalDecision = "answer"
    #: worker threads (onnxruntime releases the GIL: two per core it may use keep them busy)
    threads: int = field(default_factory=default_threads)
    model_name: str = MODEL_NAME
    kind: str = KIND
    #: it answers the basic steps only, never the fused ``grounding`` step
    fuse_grounding: ClassVar[bool] = False
    #: deterministic: every choice of a prompt is the same answer
    varies_choices: ClassVar[bool] = False
    #: faithfulness's ``verify`` reads the claims as one answer (`WHOLE_ANSWER_METRICS`),
    #: another metric's claim by claim: one prompt, two answers
    reads_metric: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError("threads must be >= 1")
        self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="local-judge")
        self.support_model = self.model or SupportModel(self.embedder)
        #: what the judge reads of each claim, and where it decides its support
        self.reader = Reader(self.support_model, self.combiner)
        self._answer_model = self.answer_model

    # --- the Judge protocol

    async def generate(self, prompt: Prompt[OutT], n: int = 1) -> Judged[OutT]:
        if n < 1:
            raise ValueError("n must be >= 1")
        if prompt.step in INLINE_STEPS:
            answer = self._answer(prompt)
        else:
            answer = await self._in_thread(self._answer, prompt)
        return Judged(values=[answer] * n, usage=Usage())

    async def embed(self, texts: Sequence[str]) -> Embedded:
        vectors = await self._in_thread(self.embedder.embed, texts)
        # a repeated text (the relevancy questions) has the same vector: converted once
        rows: dict[str, list[float]] = {}
        for text, vector in zip(texts, vectors, strict=True):
            if text not in rows:
                rows[text] = vector.tolist()
        return Embedded(vectors=[rows[text] for text in texts], usage=Usage())

    async def aclose(self) -> None:
        """Let the worker threads go (idle ones at once; running steps finish)."""
        self._executor.shutdown(wait=False)

    async def _in_thread(self, work: Callable[..., T], *args: object) -> T:
        """``work(*args)`` in one of the judge's threads (with the caller's context vars)."""
        call = functools.partial(contextvars.copy_context().run, work, *args)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    # --- the judge's own questions

    def warm_up(self) -> None:
        """Load the models and the weights now, not on the first record."""
        self.reader.weights  # noqa: B018 - loads and checks the pinned file
        self._answers  # noqa: B018 - loads and checks the pinned file
        self.support_model.warm_up()
        self.embedder.warm_up()  # the window ranking's model (its own session)

    @property
    def cut(self) -> float:
        """The answer probability at and above which the judge says an answer holds an
        unsupported claim (`AnswerReading.flagged`; the risk screen's flag)."""
        return self._answers.cut

    def claims(self, text: str, question: str | None = None) -> cl.Claims:
        """The atomic claims of ``text``, each with the question it is read after where it
        is a phrase answer (`claims.claims`)."""
        return cl.claims(text, question)

    def support(
        self,
        claims: Sequence[str],
        contexts: Sequence[str],
        asked: Sequence[str | None] | None = None,
    ) -> list[Decision]:
        """Each claim's support by ``contexts`` taken together, each line of them a passage
        (`passages`): the judge's one question, asked by every step and screen. ``asked``:
        the question each claim is read after (`Claims.asked`), None for none."""
        return self.reader.decide(cl.Claims.of(claims, asked), passages(contexts))[0]

    def assess(
        self,
        claims: Sequence[str],
        contexts: Sequence[str],
        asked: Sequence[str | None] | None = None,
    ) -> AnswerReading:
        """``claims`` (one text's) against ``contexts`` read as a whole: each claim's support
        (`support`), and the probability that at least one of them is unsupported."""
        found = self.support(claims, contexts, asked)
        if not found:
            return AnswerReading(found, 0.0, self.cut)
        probability = self._answers.probability([d.probability for d in found])
        return AnswerReading(found, round(probability, 6), self.cut)

    def screen(self, contexts: Sequence[str], response: str, question: str | None = None) -> Screen:
        """A hallucination risk for one record, in [0, 1] (1 = surely unsupported): the
        probability that the response holds at least one unsupported claim (`assess`), with
        the faithfulness the ``verify`` step gives it. Not a judge step: the record-level
        score risk-based sampling reads."""
        said = cl.claims_or_text(response, question)
        if not said.said:
            return Screen(risk=0.5, faithfulness=float("nan"), reason="empty response")
        reading = self.assess(said.said, contexts, said.asked)
        found = reading.decisions
        worst = min(range(len(found)), key=lambda k: found[k].probability)
        if self.decision == "answer":
            bad, reason = reading.unsupported, reading.reasons()[worst]
        else:
            bad, reason = [not d.supported for d in found], found[worst].reason()
        return Screen(
            risk=reading.probability,
            faithfulness=1.0 - sum(bad) / len(found),
            reason=reason,
            support=sum(d.probability for d in found) / len(found),
        )

    # --- the steps, answered synchronously in a worker thread

    @property
    def _answers(self) -> AnswerModel:
        if self._answer_model is None:
            self._answer_model = AnswerModel.load()
        return self._answer_model

    def _answer(self, prompt: Prompt[OutT]) -> OutT:
        """The local answer to one prompt, validated as the prompt's output model."""
        inputs = prompt.inputs
        result: steps.Statements | steps.Verdicts | steps.GeneratedQuestion | steps.ContextVerdicts
        if prompt.step == steps.STATEMENTS and isinstance(inputs, steps.StatementsInput):
            found = self.claims(inputs.text, inputs.question)
            result = steps.Statements(
                statements=found.said,
                noncommittal=int(evasive.noncommittal(inputs.text)),
                read_after=found.asked if any(found.asked) else None,
            )
        elif prompt.step == steps.VERIFY and isinstance(inputs, steps.VerifyInput):
            result = self._verdicts(inputs, whole=prompt.metric in WHOLE_ANSWER_METRICS)
        elif prompt.step == steps.QUESTIONS and isinstance(inputs, steps.QuestionsInput):
            result = _question(inputs.response)
        elif prompt.step == steps.USEFULNESS and isinstance(inputs, steps.UsefulnessInput):
            result = steps.ContextVerdicts(
                verdicts=self._usefulness(inputs.answer, inputs.contexts, inputs.question)
            )
        else:
            raise JudgeError("bad_request", f"local judge cannot answer step {prompt.step!r}")
        return prompt.output.model_validate(result.model_dump())

    def _verdicts(self, inputs: steps.VerifyInput, *, whole: bool = True) -> steps.Verdicts:
        """The ``verify`` step: each claim's verdict, and against retrieved context (``source``
        "context") the probability that the claims hold an unsupported one (`assess`). A claim
        is judged on its own probability, unless ``whole`` (faithfulness reads an answer,
        `WHOLE_ANSWER_METRICS`) and ``decision`` is "answer": then only when the claims as a
        whole are judged to hold one (`AnswerReading.unsupported`)."""
        probability: float | None = None
        if inputs.source == "context":
            reading = self.assess(inputs.statements, [inputs.context], inputs.read_after)
            probability = reading.probability if reading.decisions else None
            if whole and self.decision == "answer":
                bad, reasons = reading.unsupported, reading.reasons(inputs.source)
            else:
                bad = [not d.supported for d in reading.decisions]
                reasons = [d.reason(inputs.source) for d in reading.decisions]
        else:
            found = self.support(inputs.statements, [inputs.context], inputs.read_after)
            bad = [not d.supported for d in found]
            reasons = [d.reason(inputs.source) for d in found]
        return steps.Verdicts(
            verdicts=[
                steps.StatementVerdict(statement=s, reason=why, verdict=int(not no))
                for s, why, no in zip(inputs.statements, reasons, bad, strict=True)
            ],
            hallucination_probability=probability,
        )

    def _usefulness(
        self, answer: str, contexts: Sequence[str], question: str | None = None
    ) -> list[steps.ContextVerdict]:
        """A context is useful when it supports at least one claim of the answer (each
        context read on its own: `Reader.decide` per context, in one model pass)."""
        said = cl.claims_or_text(answer, question)
        if not said.said:
            return [
                steps.ContextVerdict(reason="the answer states nothing", verdict=0)
                for _ in contexts
            ]
        verdicts: list[steps.ContextVerdict] = []
        for found in self.reader.decide(said, contexts, per_context=True):
            best = max(range(len(found)), key=lambda k: found[k].probability)
            p = found[best].probability
            if found[best].supported:
                why = f"supports {excerpt(said.said[best], 80)} (p={p:.2f})"
            else:
                why = f"supports none of the answer's claims (best p={p:.2f})"
            verdicts.append(steps.ContextVerdict(reason=why, verdict=int(found[best].supported)))
        return verdicts


def _question(response: str) -> steps.GeneratedQuestion:
    """The ``questions`` step: no question is generated, the response stands in for one
    (`GeneratedQuestion.is_response`)."""
    noncommittal = (
        bool(evasive.NONCOMMITTAL.search(response.lower()))
        or not response.strip()
        or evasive.noncommittal(response)
    )
    return steps.GeneratedQuestion(
        question=response, noncommittal=int(noncommittal), is_response=True
    )
