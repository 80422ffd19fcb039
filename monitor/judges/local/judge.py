"""`LocalJudge`: every judge step answered in-process at zero tokens, claim by claim.

An answer is read as its atomic claims (`claims`). Each claim gets one support
probability (`LocalJudge.decide`, the only place a support decision is made):
the support model's logit against the claim's nearest evidence windows (and the
two nearest joined), combined with the lexical gaps (`evidence`: the words,
numbers and names of the claim no context states) by the fitted `combiner`.
See docs/local-judge.md and docs/model.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from monitor.judges import JudgeError, OutT, Prompt
from monitor.judges.local import claims as cl
from monitor.judges.local.answer import AnswerModel
from monitor.judges.local.base import InProcessJudge, Screen, default_threads
from monitor.judges.local.combiner import Combiner
from monitor.judges.local.entailment import THRESHOLD, Candidates, Support, SupportModel
from monitor.judges.local.evidence import EvidenceCache, Gaps
from monitor.judges.local.reasons import WHERE, excerpt, quote
from monitor.judges.steps import (
    QUESTIONS,
    STATEMENTS,
    USEFULNESS,
    VERIFY,
    ContextVerdict,
    ContextVerdicts,
    GeneratedQuestion,
    QuestionsInput,
    Statements,
    StatementsInput,
    StatementVerdict,
    UsefulnessInput,
    Verdicts,
    VerifyInput,
    VerifySource,
)

#: How the local judge says a claim is unsupported (`LocalJudge.decision`).
LocalDecision = Literal["answer", "claim"]
#: The metrics whose ``verify`` step reads one answer against its retrieved context, where the
#: ``answer`` decision applies; the reference-based ones judge each claim on its own.
WHOLE_ANSWER_METRICS = frozenset({"faithfulness"})
#: The judge's model, as the start-up log and ``rag_monitor_judge_info`` name it.
MODEL_NAME = "claims+support-model"


@dataclass(frozen=True)
class Decision:
    """One claim's support, with what it rests on."""

    #: the combined probability that the claim is supported, in [0, 1]
    probability: float
    #: the support model's probability for its best window, and that window ("" if none)
    model_probability: float
    window: str
    #: what the claim says that the evidence does not
    gaps: Gaps

    @property
    def supported(self) -> bool:
        return self.probability >= THRESHOLD

    def reason(
        self, source: VerifySource = "context", *, supported: bool | None = None, answer: str = ""
    ) -> str:
        """The verdict (the claim's own unless ``supported`` says otherwise), its probability,
        the words that decided it and the closest window; ``answer`` says how the answer as a
        whole was read (`AnswerReading.reasons`)."""
        supported = self.supported if supported is None else supported
        said = "supported" if supported else "not supported"
        why = f"{said} (p={self.probability:.2f}, model {self.model_probability:.2f}{answer})"
        missing = self.gaps.decisive()
        if missing:
            why += f"; {quote(missing)} in no passage of {WHERE[source]}"
        if not self.window:
            return f"{why}; {WHERE[source]} is empty"
        return f"{why}; closest in {WHERE[source]}: {excerpt(self.window)}"


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

    def reasons(self, source: VerifySource = "context") -> list[str]:
        compare = ">=" if self.flagged else "<"
        answer = f"; answer p={self.probability:.2f} {compare} cut {self.cut:.2f}"
        return [
            d.reason(source, supported=not bad, answer=answer)
            for d, bad in zip(self.decisions, self.unsupported, strict=True)
        ]


@dataclass(frozen=True)
class Reading:
    """One claim as `LocalJudge.read` finds it, before the combiner weighs it."""

    support: Support
    gaps: Gaps
    #: a phrase answer read after its question
    phrase: bool


@dataclass
class LocalJudge(InProcessJudge):
    """The Judge protocol answered in-process, claim by claim (``kind = "local"``)."""

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
    thread_name: ClassVar[str] = "local-judge"

    def __post_init__(self) -> None:
        super().__post_init__()
        self.support_model = self.model or SupportModel(self.embedder)
        self._combiner = self.combiner
        self._answers = self.answer_model
        self._evidence = EvidenceCache()

    @property
    def weights(self) -> Combiner:
        if self._combiner is None:
            self._combiner = Combiner.load()
        return self._combiner

    @property
    def answers(self) -> AnswerModel:
        if self._answers is None:
            self._answers = AnswerModel.load()
        return self._answers

    def warm_up(self) -> None:
        """Load the models and the weights now, not on the first record."""
        self.weights  # noqa: B018 - loads and checks the pinned file
        self.answers  # noqa: B018 - loads and checks the pinned file
        self.support_model.warm_up()

    # --- the one support decision

    def decide(
        self, claims: Sequence[str], contexts: Sequence[str], *, per_context: bool = False
    ) -> list[list[Decision]]:
        """Each claim's `Decision` against ``contexts`` taken together (one row), or against
        each context on its own (``per_context``: one row per context), in one model pass."""
        out = []
        for readings in self.read(claims, contexts, per_context=per_context):
            row = []
            for reading in readings:
                s, gaps = reading.support, reading.gaps
                p = (
                    self.weights.probability(s.logit, gaps, phrase=reading.phrase)
                    if s.window
                    else 0.0
                )
                row.append(Decision(round(p, 6), s.probability, s.window, gaps))
            out.append(row)
        return out

    def read(
        self, claims: Sequence[str], contexts: Sequence[str], *, per_context: bool = False
    ) -> list[list[Reading]]:
        """What `decide` weighs for each claim: the lexical gaps (against the contexts
        taken together, or against each context), and the model's best window for the
        claim as the answer wrote it (a spelled number the contexts state in figures
        written in their figures: `Evidence.in_figures`)."""
        read, gaps, said = self._lexical(claims, contexts)
        if not per_context:
            rows = [(gaps, self.support_model.support(said, contexts))]
        else:
            split = self.support_model.support_by_context(said, contexts)
            rows = [
                ([self._evidence.get([c]).gaps(text) for text, _ in read], found)
                for c, found in zip(contexts, split, strict=True)
            ]
        return [
            [Reading(s, g, phrase) for (_, phrase), g, s in zip(read, row, sup, strict=True)]
            for row, sup in rows
        ]

    def pairs(self, claims: Sequence[str], contexts: Sequence[str]) -> list[tuple[str, Candidates]]:
        """What `read` gives the support model for each claim against ``contexts`` taken
        together, without reading it: the claim as the model reads it (as the answer wrote
        it, its spelled numbers in the contexts' figures) and the windows it is read
        against (`SupportModel.candidates`). The training code's transfer check reads
        these."""
        _, _, said = self._lexical(claims, contexts)
        return list(zip(said, self.support_model.candidates(said, contexts), strict=True))

    def gaps(self, claims: Sequence[str], contexts: Sequence[str]) -> list[tuple[Gaps, bool]]:
        """What `read` finds for each claim besides the model's logit: its lexical gaps
        against ``contexts`` taken together, and whether it is a phrase answer read after
        its question (the combiner's other inputs; the combiner's fit reads these)."""
        read, gaps, _ = self._lexical(claims, contexts)
        return [(g, phrase) for (_, phrase), g in zip(read, gaps, strict=True)]

    def _lexical(
        self, claims: Sequence[str], contexts: Sequence[str]
    ) -> tuple[list[tuple[str, bool]], list[Gaps], list[str]]:
        """Each claim without the question a phrase answer is read after (and whether it
        is one), its gaps against ``contexts`` taken together, and the claim as the model
        reads it."""
        read = [cl.phrase(claim) for claim in claims]
        together = self._evidence.get(contexts)
        gaps = [together.gaps(text) for text, _ in read]
        said = [
            claim.replace(text, together.in_figures(text))
            for claim, (text, _) in zip(claims, read, strict=True)
        ]
        return read, gaps, said

    # --- synchronous answers (also usable without an event loop)

    def answer(self, prompt: Prompt[OutT]) -> OutT:
        """The local answer to one prompt, validated as the prompt's output model."""
        inputs = prompt.inputs
        result: Statements | Verdicts | GeneratedQuestion | ContextVerdicts
        if prompt.step == STATEMENTS and isinstance(inputs, StatementsInput):
            result = Statements(
                statements=self.statements(inputs.text, inputs.question),
                noncommittal=int(self.noncommittal(inputs.text)),
            )
        elif prompt.step == VERIFY and isinstance(inputs, VerifyInput):
            result = self.verdicts(inputs, whole=prompt.metric in WHOLE_ANSWER_METRICS)
        elif prompt.step == QUESTIONS and isinstance(inputs, QuestionsInput):
            result = self.question(inputs.response)
        elif prompt.step == USEFULNESS and isinstance(inputs, UsefulnessInput):
            result = ContextVerdicts(
                verdicts=self.usefulness(inputs.answer, inputs.contexts, inputs.question)
            )
        else:
            raise JudgeError("bad_request", f"local judge cannot answer step {prompt.step!r}")
        return prompt.output.model_validate(result.model_dump())

    def statements(self, text: str, question: str | None = None) -> list[str]:
        """The atomic claims of ``text`` (`claims.claims`)."""
        return cl.claims(text, question)

    def screened(self, text: str, question: str | None = None) -> list[str]:
        """The claims the screens and usefulness read: ``text``'s claims (`statements`), or
        ``text`` whole when it has none (none when it is blank)."""
        return self.statements(text, question) or ([text] if text.strip() else [])

    def support(self, context: str, claims: Sequence[str]) -> list[Decision]:
        """Each claim's support by ``context`` (one passage a line)."""
        passages = [line for line in context.split("\n") if line.strip()]
        return self.decide(claims, passages)[0]

    def assess(self, context: str, claims: Sequence[str]) -> AnswerReading:
        """``claims`` (one text's) against ``context`` read as a whole: each claim's support,
        and the probability that at least one of them is unsupported (`answer`)."""
        found = self.support(context, claims)
        if not found:
            return AnswerReading(found, 0.0, self.answers.cut)
        probability = self.answers.probability([d.probability for d in found])
        return AnswerReading(found, round(probability, 6), self.answers.cut)

    def verdicts(self, inputs: VerifyInput, *, whole: bool = True) -> Verdicts:
        """The ``verify`` step: each claim's verdict, and against retrieved context (``source``
        "context") the probability that the claims hold an unsupported one (`assess`). A claim
        is judged on its own probability, unless ``whole`` (faithfulness reads an answer,
        `WHOLE_ANSWER_METRICS`) and ``decision`` is "answer": then only when the claims as a
        whole are judged to hold one (`AnswerReading.unsupported`)."""
        probability: float | None = None
        if inputs.source == "context":
            reading = self.assess(inputs.context, inputs.statements)
            probability = reading.probability if reading.decisions else None
            if whole and self.decision == "answer":
                bad, reasons = reading.unsupported, reading.reasons(inputs.source)
            else:
                bad = [not d.supported for d in reading.decisions]
                reasons = [d.reason(inputs.source) for d in reading.decisions]
        else:
            found = self.support(inputs.context, inputs.statements)
            bad = [not d.supported for d in found]
            reasons = [d.reason(inputs.source) for d in found]
        return Verdicts(
            verdicts=[
                StatementVerdict(statement=s, reason=why, verdict=int(not no))
                for s, why, no in zip(inputs.statements, reasons, bad, strict=True)
            ],
            hallucination_probability=probability,
        )

    # --- the risk screens (not judge steps: record-level scores for risk-based sampling)

    def screen(self, contexts: Sequence[str], response: str, question: str | None = None) -> Screen:
        """A hallucination risk for one record, in [0, 1] (1 = surely unsupported): the
        probability that the response holds at least one unsupported claim (`assess`), with
        the faithfulness the ``verify`` step gives it."""
        said = self.screened(response, question)
        if not said:
            return Screen(risk=0.5, faithfulness=float("nan"), reason="empty response")
        reading = self.assess("\n".join(contexts), said)
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

    def lexical_risk(
        self, contexts: Sequence[str], response: str, question: str | None = None
    ) -> float:
        """The cheapest screen: no model call, only the lexical gaps, weighed as the combiner
        weighs them with the model undecided (logit 0). 1 − the weakest claim's probability."""
        said = self.screened(response, question)
        if not said:
            return 0.5
        evidence = self._evidence.get(list(contexts))
        weakest = 1.0
        for claim in said:
            text, phrase = cl.phrase(claim)
            p = self.weights.probability(0.0, evidence.gaps(text), phrase=phrase)
            weakest = min(weakest, p)
        return round(1.0 - weakest, 6)

    # usefulness

    def usefulness(
        self, answer: str, contexts: Sequence[str], question: str | None = None
    ) -> list[ContextVerdict]:
        """A context is useful when it supports at least one claim of the answer."""
        said = self.screened(answer, question)
        if not said:
            return [ContextVerdict(reason="the answer states nothing", verdict=0) for _ in contexts]
        verdicts: list[ContextVerdict] = []
        for found in self.decide(said, contexts, per_context=True):
            best = max(range(len(found)), key=lambda k: found[k].probability)
            p = found[best].probability
            if found[best].supported:
                why = f"supports {excerpt(said[best], 80)} (p={p:.2f})"
            else:
                why = f"supports none of the answer's claims (best p={p:.2f})"
            verdicts.append(ContextVerdict(reason=why, verdict=int(found[best].supported)))
        return verdicts
