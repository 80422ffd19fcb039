"""What the local judge reads of each claim, and the one place a claim's support is decided.

`Reader.decide` gives each claim one support probability: the support model's logit
against the claim's evidence windows (its best by words, its nearest, the two nearest joined:
`SupportModel.support`), combined with
the lexical gaps (`evidence`: the words, numbers and names of the claim no context states)
by the fitted `combiner`. `LocalJudge.support` is the judge's one question and answers it
here; the training code reads the same inputs the combiner weighs (`Reader.read`,
`Reader.gaps`, `Reader.pairs`), so what it fits on is what the judge decides on.
See docs/local-judge.md and docs/model.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from monitor.judges.local import claims as cl
from monitor.judges.local.combiner import Combiner
from monitor.judges.local.entailment import THRESHOLD, Candidates, Support, SupportModel
from monitor.judges.local.evidence import EvidenceCache, Gaps
from monitor.judges.local.reasons import WHERE, excerpt, quote
from monitor.judges.steps import VerifySource


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
class Reading:
    """One claim as `Reader.read` finds it, before the combiner weighs it."""

    support: Support
    gaps: Gaps
    #: a phrase answer read after its question
    phrase: bool


class Reader:
    """Claims read against contexts: the support model's best window, the lexical gaps, and
    the combiner's probability over both (`decide`). Safe to call from many threads."""

    def __init__(self, support_model: SupportModel, combiner: Combiner | None = None) -> None:
        self.support_model = support_model
        self._combiner = combiner
        self._evidence = EvidenceCache()

    @property
    def weights(self) -> Combiner:
        """The combiner's weights (the shipped ones, loaded and checked on first use, when
        none were given)."""
        if self._combiner is None:
            self._combiner = Combiner.load()
        return self._combiner

    def decide(
        self, claims: cl.Claims, contexts: Sequence[str], *, per_context: bool = False
    ) -> list[list[Decision]]:
        """Each claim's `Decision` against ``contexts`` taken together (one row), or against
        each context on its own (``per_context``: one row per context), in one model pass."""
        return [
            [self._decision(reading) for reading in row]
            for row in self.read(claims, contexts, per_context=per_context)
        ]

    def _decision(self, reading: Reading) -> Decision:
        s, gaps = reading.support, reading.gaps
        # without a window there is no evidence at all: nothing is supported
        p = self.weights.probability(s.logit, gaps, phrase=reading.phrase) if s.window else 0.0
        return Decision(round(p, 6), s.probability, s.window, gaps)

    def read(
        self, claims: cl.Claims, contexts: Sequence[str], *, per_context: bool = False
    ) -> list[list[Reading]]:
        """What `decide` weighs for each claim: the lexical gaps (against the contexts
        taken together, or against each context), and the model's best window for the
        claim as the answer wrote it (a spelled number the contexts state in figures
        written in their figures: `Evidence.in_figures`), a phrase answer after the turn it
        answers (`Claims.asked`)."""
        gaps, said = self._lexical(claims, contexts)
        if not per_context:
            rows = [(gaps, self.support_model.support(said, contexts))]
        else:
            split = self.support_model.support_by_context(said, contexts)
            rows = [
                ([self._evidence.get([c]).gaps(text) for text in claims.said], found)
                for c, found in zip(contexts, split, strict=True)
            ]
        return [
            [Reading(s, g, a is not None) for a, g, s in zip(claims.asked, row, sup, strict=True)]
            for row, sup in rows
        ]

    def pairs(self, claims: cl.Claims, contexts: Sequence[str]) -> list[tuple[str, Candidates]]:
        """What `read` gives the support model for each claim against ``contexts`` taken
        together, without reading it: the claim as the model reads it (as the answer wrote
        it, its spelled numbers in the contexts' figures, a phrase answer after its
        question) and the windows it is read against (`SupportModel.candidates`). The
        training code's transfer check reads these."""
        _, said = self._lexical(claims, contexts)
        return list(zip(said, self.support_model.candidates(said, contexts), strict=True))

    def gaps(self, claims: cl.Claims, contexts: Sequence[str]) -> list[tuple[Gaps, bool]]:
        """What `read` finds for each claim besides the model's logit: its lexical gaps
        against ``contexts`` taken together, and whether it is a phrase answer read after
        its question (the combiner's other inputs; the combiner's fit and `lexical_risk`
        read these). No number is rewritten in the contexts' figures: nothing here reads
        the claim as the model does, and the cheap screen stays cheap."""
        together = self._evidence.get(contexts)
        return [
            (together.gaps(c), a is not None)
            for c, a in zip(claims.said, claims.asked, strict=True)
        ]

    def _lexical(self, claims: cl.Claims, contexts: Sequence[str]) -> tuple[list[Gaps], list[str]]:
        """Each claim's gaps against ``contexts`` taken together (a phrase answer's own
        words only: the question's are given, not claimed), and the claim as the model
        reads it."""
        together = self._evidence.get(contexts)
        gaps = [together.gaps(text) for text in claims.said]
        figures = cl.Claims([together.in_figures(text) for text in claims.said], claims.asked)
        return gaps, figures.as_read()


def lexical_risk(
    reader: Reader, contexts: Sequence[str], response: str, question: str | None = None
) -> float:
    """The cheapest screen: no model call, only the lexical gaps, weighed as the combiner
    weighs them with the model undecided (logit 0). 1 − the weakest claim's probability
    (0.5 for a blank response: nothing to go on)."""
    found = cl.claims_or_text(response, question)
    if not found.said:
        return 0.5
    gaps = reader.gaps(found, list(contexts))
    weakest = min(reader.weights.probability(0.0, g, phrase=phrase) for g, phrase in gaps)
    return round(1.0 - min(1.0, weakest), 6)
