"""`LocalJudge`: the rule judge, every judge step answered in-process at zero tokens.

See docs/local-judge.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from monitor.judges import JudgeError, OutT, Prompt
from monitor.judges.local import statements as st
from monitor.judges.local.base import InProcessJudge, Screen
from monitor.judges.local.contexts import Context, Contexts
from monitor.judges.local.lexical.clauses import Claim
from monitor.judges.local.lexical.vocabulary import coverage
from monitor.judges.local.lexical.wordforms import content_words
from monitor.judges.local.reasons import quote
from monitor.judges.local.support import best_window, rank_windows, word_vectors
from monitor.judges.local.thresholds import LocalThresholds
from monitor.judges.local.verify import Check, checks
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
from monitor.text.numerals import numbers


@dataclass
class LocalJudge(InProcessJudge):
    """The Judge protocol answered in-process by word rules (``kind = "local"``, zero tokens)."""

    thresholds: LocalThresholds = field(default_factory=LocalThresholds)
    #: prepared context chunks kept (chunks repeat across metrics and records)
    context_cache_size: int = 4096

    def __post_init__(self) -> None:
        super().__post_init__()
        self._contexts = Contexts(self.thresholds.window_sentences, self.context_cache_size)

    # --- synchronous answers (also usable without an event loop)

    def answer(self, prompt: Prompt[OutT]) -> OutT:
        """The local answer to one prompt, validated as the prompt's output model."""
        inputs = prompt.inputs
        result: Statements | Verdicts | GeneratedQuestion | ContextVerdicts
        if prompt.step == STATEMENTS and isinstance(inputs, StatementsInput):
            result = Statements(
                statements=self.statements(inputs.text),
                noncommittal=int(self.noncommittal(inputs.text)),
            )
        elif prompt.step == VERIFY and isinstance(inputs, VerifyInput):
            result = Verdicts(
                verdicts=[
                    StatementVerdict(statement=s, reason=c.reason, verdict=c.verdict)
                    for s, c in zip(
                        inputs.statements,
                        self.verify(inputs.context, inputs.statements, inputs.source),
                        strict=True,
                    )
                ]
            )
        elif prompt.step == QUESTIONS and isinstance(inputs, QuestionsInput):
            result = self.question(inputs.response)
        elif prompt.step == USEFULNESS and isinstance(inputs, UsefulnessInput):
            result = ContextVerdicts(verdicts=self.usefulness(inputs.answer, inputs.contexts))
        else:
            raise JudgeError("bad_request", f"local judge cannot answer step {prompt.step!r}")
        return prompt.output.model_validate(result.model_dump())

    # statements

    def statements(self, text: str) -> list[str]:
        """The sentences of ``text`` that assert something (`statements.statements`)."""
        return st.statements(text)

    # verify

    def verify(
        self, context: str, statements: Sequence[str], source: VerifySource = "context"
    ) -> list[Check]:
        """`check` of each statement against ``context`` (what it is, for the reasons:
        ``source``)."""
        return checks(
            statements,
            self._contexts.prepare(context),
            self.embedder,
            self.thresholds,
            source=source,
        )

    def check(
        self,
        statement: str,
        context: Context | str,
        *,
        semantic: bool = True,
        source: VerifySource = "context",
    ) -> Check:
        """Is ``statement`` supported by ``context``? (the rules: `verify`)"""
        ctx = context if isinstance(context, Context) else self._contexts.prepare(context)
        [result] = checks(
            [statement], ctx, self.embedder, self.thresholds, semantic=semantic, source=source
        )
        return result

    # the risk screen (not a judge step: a record-level score for risk-based sampling)

    def screen(self, contexts: Sequence[str], response: str, *, semantic: bool = True) -> Screen:
        """A cheap hallucination risk for one record, in [0, 1] (1 = surely unsupported).

        1 − the support of the response's weakest statement under the local
        verify step: 1 for an invented or swapped number or name and for a
        negation, above 0.5 for words the context lacks or does not say
        together, at most 1 − ``support`` (0.35) for supported ones.
        ``semantic=False`` skips the MiniLM word matching: lexical checks only,
        no model call at all, a little stricter.
        """
        statements = self.statements(response) or ([response] if response.strip() else [])
        if not statements:
            return Screen(risk=0.5, faithfulness=float("nan"), reason="empty response")
        found = checks(
            statements,
            self._contexts.prepare("\n".join(contexts)),
            self.embedder,
            self.thresholds,
            semantic=semantic,
        )
        worst = min(found, key=lambda c: c.support)
        return Screen(
            risk=round(1.0 - worst.support, 6),
            faithfulness=sum(c.verdict for c in found) / len(found),
            reason=worst.reason,
            support=sum(c.support for c in found) / len(found),
        )

    # usefulness

    def usefulness(self, answer: str, contexts: Sequence[str]) -> list[ContextVerdict]:
        t = self.thresholds
        wanted = content_words(answer)
        answer_numbers = numbers(answer)
        prepared = [self._contexts.prepare(text) for text in contexts]
        shares = [coverage(wanted, ctx.vocabulary) if wanted else 0.0 for ctx in prepared]
        # synonyms count too, within one passage of the context: all contexts' words in one call
        windows = {
            k: rank_windows(Claim.unweighted(wanted), ctx)
            for k, (ctx, share) in enumerate(zip(prepared, shares, strict=True))
            if wanted and 0 < share < t.useful_coverage
        }
        vectors = word_vectors([(w, prepared[k]) for k, w in windows.items()], self.embedder, t)
        verdicts: list[ContextVerdict] = []
        for k, ctx in enumerate(prepared):
            share = shares[k]
            if k in windows:
                _, share, _, _ = best_window(windows[k], ctx, vectors, t, graded=False)
            shared_numbers = [
                n.surface for n in answer_numbers if n.values & ctx.vocabulary.numbers
            ]
            useful = (bool(wanted) and share >= t.useful_coverage) or bool(shared_numbers)
            reason = f"holds {share:.0%} of the answer's content words"
            if shared_numbers:
                reason += f" and {quote(shared_numbers)}"
            verdicts.append(ContextVerdict(reason=reason, verdict=int(useful)))
        return verdicts
