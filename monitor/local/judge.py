"""`LocalJudge`: every judge step answered in-process, at zero tokens.

The local judge speaks the same four steps as the LLM judge
(`monitor.metrics.steps`), so every metric — online and reference-based —
runs unchanged on it. Its answers are documented approximations, not an LLM's:

``statements``
    Sentence splitting (nupunkt; long compound sentences also at ``;``).
    Sentences that assert nothing are left out, as the LLM judge is told to
    ("No statements if the text asserts nothing"): a bare answer particle
    ("Yes."), a sentence that only declines to answer (`NONCOMMITTAL`: "I don't
    know", "it depends") and, in a response that declines, one that only sends
    the user elsewhere (`DEFERRAL`: "Please contact the billing team") — never
    a sentence with a number. Pronouns are not resolved: the verify step looks
    at neighbouring sentences instead.
``verify``
    A leading answer particle is set aside ("No, SMS codes are not allowed"
    claims "SMS codes are not allowed"). A statement is supported (1) when it
    passes, in order:

    1. every number in it (amounts, dates, years, percentages, counts) occurs
       in the context with the same value, and a counted unit ("3 days") is not
       one the context counts only with other numbers ("3 times", "14 days");
    2. every capitalised name in it occurs in the context (a hyphenated one as
       written), or is the acronym of a phrase there (``SSO`` ↔ "Single
       sign-on");
    3. each clause (split at ``;``, at a comma before a conjunction, at "and"
       before a subject pronoun) passes 4–6 on its own, and the statement is as
       supported as its weakest clause;
    4. its informative words — content words without answer particles and
       discourse words (`lexical.DISCOURSE`) or generic verbs and nouns
       (`lexical.GENERIC`: use, go, get, happen, thing, …), each weighted by
       its IDF (`lexical.weight`, from the word's frequency rank) — are
       mostly said *together*: the weighted share found in one context window
       (up to ``window_sentences`` neighbouring sentences of one passage) is at
       least ``window_coverage``. A word counts as found by folded form, stem,
       acronym (``MFA`` ↔ "multi-factor authentication", both ways) or, in the
       ``semantic_windows`` lexically best windows, as a MiniLM synonym of a
       window's word (cosine ≥ ``word_similarity``); a word of comparison or
       order ("first", "larger") only as itself. Below ``min_coverage`` of its
       words anywhere in the context a clause fails at once;
    5. it does not negate what its best window says, and, without a negation
       of its own, does not assert a word its best window denies: one a
       negator governs there (`lexical.denials`: up to three content words
       right after "not", "no", "never", "without", "-n't", … past a few
       function words, not a bound like "no later than") and no sentence of
       the window asserts, in a sentence holding at least ``min_coverage`` of
       its weight ("SMS codes are allowed" vs "… are not allowed"; the reason
       names the word: ``context negates 'allowed'``);
    6. a clause just short of 4 (weighted share ≥ ``tie_coverage``) still
       passes when MiniLM says it restates its best window (sentence cosine ≥
       ``sentence_similarity``).

    Paraphrases pass; invented numbers, units, names and words gathered from
    all over the context do not. The reason names what was missing, e.g.
    ``amount '$500,000' not in context``; `Check.rule` names the rule.
``questions``
    The response itself is returned as the generated question, so
    response_relevancy becomes cosine(embed(response), embed(user_input));
    ``noncommittal`` is set by phrases ("I don't know", "no information",
    "cannot answer", …).
``usefulness``
    A context is useful when it holds at least half of the answer's content
    words (exactly, or as MiniLM synonyms within one passage) or one of the
    answer's numbers.

``embed`` is the local MiniLM (`monitor.local.embedder`). All answers are
deterministic; usage is always zero. CPU work runs in the judge's own worker
threads (``threads``, 32 by default) so the event loop stays free; the
``questions`` step, one regex, is answered in place. Many threads, not the
event loop's default handful, because a MiniLM pass releases the GIL: while
one runs, other records' rules go on in Python, and the texts of every
thread waiting meet in the next pass (one process scoring 64 records at once:
≈ 1.3× the records/s, and less CPU per record, than with 6 threads;
docs/benchmarks.md).

Cost: MiniLM is nearly all of it, so each step asks it at most once per
kind of text — the synonym words of all statements of a ``verify`` (all
contexts of a ``usefulness``) go in one `MiniLMEmbedder.embed` call, made
only for the statements the lexical rules leave undecided and only for the
windows that could still be a statement's best one, and the near-miss
clauses of rule 6 with their windows in a second one, made only when there
are any; concurrent records' calls share forward passes in the embedder.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import chain
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from monitor.local import lexical as lx
from monitor.local.embedder import MiniLMEmbedder
from monitor.metrics.steps import (
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
)
from monitor.prompt import Embedded, Judged, JudgeError, OutT, Prompt
from monitor.records import Usage

T = TypeVar("T")

KIND = "local"

Vector = npt.NDArray[np.float32]

_NAME_PARTS = re.compile(r"[\s.\-]+")

#: Phrases that make a response noncommittal (matched on lower case, accents kept).
NONCOMMITTAL = re.compile(
    r"\b(?:i\s+(?:do\s+not|don't|don’t)\s+know|i\s+(?:am|'m|’m)\s+not\s+(?:sure|certain|able)"
    r"|not\s+sure|no\s+(?:information|data|details|answer|idea|mention|record)"
    r"|(?:do\s+not|don't|don’t)\s+have\s+(?:that|this|the|any|enough)\s+information"
    r"|(?:cannot|can't|can’t|unable\s+to|not\s+able\s+to)\s+"
    r"(?:answer|say|tell|determine|find|provide|help|confirm|know|give)"
    r"|(?:does|do)\s+not\s+(?:mention|say|specify|contain|provide|state)"
    r"|doesn't\s+(?:mention|say|specify|contain|provide|state)"
    r"|not\s+(?:mentioned|specified|stated|provided|available|enough\s+information)"
    r"|insufficient\s+information|unknown|unclear|no\s+way\s+to\s+know"
    r"|(?:it|that)\s+(?:depends|varies|(?:may|might|can)\s+vary))\b"
)

#: Sending the user elsewhere ("please contact the billing team", "support would know
#: more"): part of declining to answer when the response also declines.
DEFERRAL = re.compile(
    r"^\s*(?:please\s+)?(?:contact|ask|check\s+with|reach\s+out\s+to|talk\s+to)\b"
    r"|\byou\s+(?:may|might)\s+want\s+to\s+(?:check|ask|contact|reach)\b"
    r"|\bwould\s+know\s+more\b"
)


#: Steps answered on the caller's thread: a regex on the response costs less than the hop
#: to a worker thread (the others split sentences, read contexts or call MiniLM).
INLINE_STEPS = frozenset({QUESTIONS})


@dataclass(frozen=True)
class LocalThresholds:
    """The few numbers the local judge decides with (see the module docstring)."""

    #: weighted share of a clause's informative words one context window must hold (7/8)
    window_coverage: float = 0.875
    #: below this share of its words anywhere in the context, a clause fails at once
    min_coverage: float = 0.5
    #: MiniLM cosine at which two words count as the same (synonyms, other forms)
    word_similarity: float = 0.8
    #: share of the answer's content words a useful context holds
    useful_coverage: float = 0.5
    #: windows compared word by word with MiniLM per statement (the lexically best ones)
    semantic_windows: int = 3
    #: window share from which MiniLM may decide (rule 5) ...
    tie_coverage: float = 0.7
    #: ... by the cosine of the clause and its best window (a restatement)
    sentence_similarity: float = 0.85
    #: neighbouring sentences a context window spans at most
    window_sentences: int = 3


@dataclass(frozen=True)
class Check:
    """The local verdict on one statement, with the evidence."""

    verdict: int
    reason: str
    #: continuous support in [0, 1] (1 = fully supported), for ranking and risk screens
    support: float
    window_coverage: float = 0.0
    #: the context window that best supports the statement (index into the prepared context)
    window: int | None = None
    #: the rule that decided: number, name, words, negation, comparison, window, restated
    rule: str = ""


@dataclass(frozen=True)
class Screen:
    """The risk screen of one record (`LocalJudge.screen`)."""

    #: hallucination risk in [0, 1]; feed it to `monitor.risk`
    risk: float
    #: local faithfulness (supported / statements), NaN without statements
    faithfulness: float
    #: the reason of the weakest statement
    reason: str


@dataclass(frozen=True)
class _Windows:
    """A clause's (or an answer's) words against the windows of a context."""

    claim: lx.Claim
    #: per window, the claim's words it lacks (folded form, stem, acronym compared)
    exact: list[list[str]]
    #: window indexes, best (largest weighted share matched, then shortest) first
    order: list[int]


@dataclass
class _Context:
    """A context string prepared once: its vocabulary and its windows."""

    text: str
    vocabulary: lx.Vocabulary
    windows: list[str]
    window_vocabularies: list[lx.Vocabulary]
    window_negated: list[bool]
    window_content: list[list[str]]
    #: per window, its sentences that deny words: (the stems a negator denies there and
    #: no sentence of the window asserts, the sentence's vocabulary)
    window_denials: list[list[tuple[frozenset[str], lx.Vocabulary]]]


@dataclass
class LocalJudge:
    """The Judge protocol answered in-process (``kind = "local"``, zero tokens)."""

    embedder: MiniLMEmbedder = field(default_factory=MiniLMEmbedder)
    thresholds: LocalThresholds = field(default_factory=LocalThresholds)
    #: prepared context chunks kept (chunks repeat across metrics and records)
    context_cache_size: int = 4096
    #: worker threads for the CPU work (see the module docstring)
    threads: int = 32
    kind: str = KIND

    def __post_init__(self) -> None:
        if self.threads < 1:
            raise ValueError("threads must be >= 1")
        self._contexts: OrderedDict[str, _Context] = OrderedDict()
        self._lock = threading.Lock()
        self._executor = ThreadPoolExecutor(self.threads, thread_name_prefix="local-judge")

    async def _in_thread(self, work: Callable[..., T], *args: object) -> T:
        """``work(*args)`` in one of the judge's threads (with the caller's context vars)."""
        call = functools.partial(contextvars.copy_context().run, work, *args)
        return await asyncio.get_running_loop().run_in_executor(self._executor, call)

    async def aclose(self) -> None:
        """Let the worker threads go (idle ones at once; running steps finish)."""
        self._executor.shutdown(wait=False)

    # --- the Judge protocol

    async def generate(self, prompt: Prompt[OutT], n: int = 1) -> Judged[OutT]:
        if n < 1:
            raise ValueError("n must be >= 1")
        if prompt.step in INLINE_STEPS:
            answer = self.answer(prompt)
        else:
            answer = await self._in_thread(self.answer, prompt)
        return Judged(values=[answer] * n, usage=Usage())

    async def embed(self, texts: Sequence[str]) -> Embedded:
        texts = list(texts)
        vectors = await self._in_thread(self.embedder.embed, texts)
        # a repeated text (the relevancy questions) has the same vector: converted once
        rows: dict[str, list[float]] = {}
        for text, vector in zip(texts, vectors, strict=True):
            if text not in rows:
                rows[text] = vector.tolist()
        return Embedded(vectors=[rows[text] for text in texts], usage=Usage())

    # --- synchronous answers (also usable without an event loop)

    def answer(self, prompt: Prompt[OutT]) -> OutT:
        """The local answer to one prompt, validated as the prompt's output model."""
        inputs = prompt.inputs
        result: Statements | Verdicts | GeneratedQuestion | ContextVerdicts
        if prompt.step == STATEMENTS and isinstance(inputs, StatementsInput):
            result = Statements(statements=self.statements(inputs.text))
        elif prompt.step == VERIFY and isinstance(inputs, VerifyInput):
            result = Verdicts(
                verdicts=[
                    StatementVerdict(statement=s, reason=c.reason, verdict=c.verdict)
                    for s, c in zip(
                        inputs.statements, self.verify(inputs.context, inputs.statements),
                        strict=True,
                    )
                ]
            )
        elif prompt.step == QUESTIONS and isinstance(inputs, QuestionsInput):
            result = self.question(inputs.response)
        elif prompt.step == USEFULNESS and isinstance(inputs, UsefulnessInput):
            result = ContextVerdicts(verdicts=self.usefulness(inputs.answer, inputs.contexts))
        else:
            raise JudgeError(
                "bad_request", f"local judge cannot answer step {prompt.step!r}"
            )
        return prompt.output.model_validate(result.model_dump())

    # statements

    def statements(self, text: str) -> list[str]:
        """The sentences of ``text`` that assert something (see the module docstring)."""
        sentences = lx.sentences(text)
        declines = any(
            all(NONCOMMITTAL.search(c.lower()) for c in lx.clauses(s)) for s in sentences
        )
        return [s for s in sentences if self._asserts(s, declines=declines)]

    @staticmethod
    def _asserts(sentence: str, *, declines: bool) -> bool:
        """False for a bare answer particle ("Yes."), for a sentence that only declines to
        answer ("I don't know", "it depends") and, in a response that declines, for one that
        only sends the user elsewhere ("Please contact support.") — unless it has a number."""
        if not lx.words(lx.strip_particle(sentence)):
            return False
        if lx.numbers(sentence):
            return True
        return not all(
            NONCOMMITTAL.search(c.lower()) or (declines and DEFERRAL.search(c.lower()))
            for c in lx.clauses(sentence)
        )

    # verify

    def verify(self, context: str, statements: Sequence[str]) -> list[Check]:
        return self._checks(statements, self._context(context))

    def check(self, statement: str, context: _Context | str, *, semantic: bool = True) -> Check:
        """Is ``statement`` supported by ``context``? (see the module docstring for the rules)"""
        ctx = context if isinstance(context, _Context) else self._context(context)
        [result] = self._checks([statement], ctx, semantic=semantic)
        return result

    def _checks(
        self, statements: Sequence[str], ctx: _Context, *, semantic: bool = True
    ) -> list[Check]:
        """`check` of every statement; the MiniLM words of all of them in one embed call."""
        first = [self._lexical_check(s, ctx) for s in statements]
        pending = [(w, ctx) for p in first if isinstance(p, list) for w in p]
        vectors = self._word_vectors(pending) if semantic else {}
        clauses = [
            p if isinstance(p, Check) else [self._window_check(w, ctx, vectors) for w in p]
            for p in first
        ]
        if semantic:
            self._break_ties(first, clauses, ctx)
        # a statement is as supported as its weakest clause
        return [c if isinstance(c, Check) else min(c, key=lambda x: (x.verdict, x.support))
                for c in clauses]

    def _break_ties(
        self,
        first: Sequence[Check | list[_Windows]],
        clauses: list[Check | list[Check]],
        ctx: _Context,
    ) -> None:
        """Rule 6: a clause just short of ``window_coverage`` passes when MiniLM says it
        restates its best window (sentence cosine ≥ ``sentence_similarity``); in place."""
        t = self.thresholds
        close = [
            (k, i)
            for k, checks in enumerate(clauses)
            if isinstance(checks, list)
            for i, c in enumerate(checks)
            if c.rule == "window" and c.verdict == 0 and c.window is not None
            and t.tie_coverage <= c.window_coverage < t.window_coverage
        ]
        if not close:
            return
        pairs = []
        for k, i in close:
            windows, checks = first[k], clauses[k]
            assert isinstance(windows, list) and isinstance(checks, list)
            window = checks[i].window
            assert window is not None
            pairs.append((windows[i].claim.text, ctx.windows[window]))
        texts = list(dict.fromkeys(x for pair in pairs for x in pair))
        vectors = dict(zip(texts, self.embedder.embed(texts), strict=True))
        for (k, i), (claim, window_text) in zip(close, pairs, strict=True):
            checks = clauses[k]
            assert isinstance(checks, list)
            cosine = float(vectors[claim] @ vectors[window_text])
            if cosine >= t.sentence_similarity:
                c = checks[i]
                checks[i] = Check(
                    1,
                    f"{c.window_coverage:.0%} of the content words in one context passage, "
                    f"which it restates (MiniLM cosine {cosine:.2f})",
                    c.window_coverage,
                    c.window_coverage,
                    c.window,
                    "restated",
                )

    def _lexical_check(self, statement: str, ctx: _Context) -> Check | list[_Windows]:
        """Rules 1–3 and the word counts of rule 4; `_Windows` (per clause) when windows decide."""
        t = self.thresholds
        claim = lx.strip_particle(statement)
        known = ctx.vocabulary.numbers
        counted = lx.quantities(claim, reach=1)
        missing_numbers = [q.number for q in counted if not q.number.values & known]
        if missing_numbers:
            first = missing_numbers[0]
            more = f" (and {len(missing_numbers) - 1} more)" if len(missing_numbers) > 1 else ""
            return Check(0, f"{first.kind} '{first.surface}' not in context{more}", 0.0,
                         rule="number")
        miscounted = self._miscounted(counted, ctx)
        if miscounted is not None:
            return Check(0, f"number '{miscounted.surface}' not in context (it has other "
                         "numbers of that unit)", 0.0, rule="number")
        missing_names = [name for name in lx.names(claim) if not self._has_name(name, ctx)]
        if missing_names:
            return Check(0, f"name {lx.quote(missing_names)} not in context", 0.0, rule="name")

        windows: list[_Windows] = []
        for clause in lx.clauses(claim):
            parsed = lx.Claim.of(clause)
            if not parsed.words:
                continue
            missing = parsed.missing(ctx.vocabulary)
            anywhere = 1.0 - len(missing) / len(parsed.words)
            if anywhere < t.min_coverage:
                return Check(0, f"words {lx.quote(missing)} not in context", anywhere / 2,
                             anywhere, rule="words")
            windows.append(self._windows(parsed, ctx))
        if not windows:
            return Check(1, "no content words to check", 1.0, 1.0, rule="words")
        return windows

    @staticmethod
    def _miscounted(claimed: Sequence[lx.Quantity], ctx: _Context) -> lx.Quantity | None:
        """A quantity of a claim ("3 days", from ``quantities(claim, reach=1)``) whose unit the
        context counts only with other numbers ("3 times", "14 days"): the number is there,
        but not of that unit."""
        counted = ctx.vocabulary.quantities
        units = {unit for _, unit in counted}
        for q in claimed:
            if q.units and q.units[0] in units and not any(
                (v, q.units[0]) in counted for v in q.number.values
            ):
                return q
        return None

    @staticmethod
    def _has_name(name: str, ctx: _Context) -> bool:
        """Every part of ``name`` is in the context (a hyphenated one as written), or
        ``name`` is an acronym of a phrase there."""
        vocabulary = ctx.vocabulary
        compounds = [lx.fold(w) for w in name.split() if "-" in w]
        if all(vocabulary.has_word(lx.fold(w)) for w in _NAME_PARTS.split(name) if w) and all(
            c in vocabulary.compounds for c in compounds
        ):
            return True
        return name.isupper() and lx.fold(name) in vocabulary.acronyms

    def _window_check(
        self, windows: _Windows, ctx: _Context, vectors: dict[str, Vector]
    ) -> Check:
        t = self.thresholds
        best, window_cov, unmatched = self._best_window(windows, ctx, vectors)
        if best is not None and windows.claim.negated and not ctx.window_negated[best]:
            return Check(0, "negation not in the closest context passage", 0.0, window_cov, best,
                         "negation")
        denied = self._denied(windows.claim, ctx, best)
        if denied:
            return Check(0, f"context negates {lx.quote(denied)}", 0.0, window_cov, best,
                         "negation")
        comparisons = [w for w in unmatched if w in lx.COMPARISONS]
        if comparisons:
            return Check(0, f"comparison {lx.quote(comparisons)} not in the closest context "
                         "passage", 0.0, window_cov, best, "comparison")
        if window_cov >= t.window_coverage:
            how = "all" if not unmatched else f"{window_cov:.0%} of the"
            return Check(
                1, f"{how} content words in one context passage", window_cov, window_cov, best,
                "window",
            )
        return Check(
            0,
            f"{lx.quote(unmatched)} not said together with the rest in any context passage",
            window_cov / 2,
            window_cov,
            best,
            "window",
        )

    def _denied(self, claim: lx.Claim, ctx: _Context, best: int | None) -> list[str]:
        """Rule 5, the other way: words ``claim`` asserts (it has no negation) that a sentence
        of its best window denies, when that sentence holds at least ``min_coverage`` of the
        claim's weight ("SMS codes are allowed" vs "SMS codes are not allowed")."""
        if best is None or claim.negated:
            return []
        for denied, vocabulary in ctx.window_denials[best]:
            words = [w for w in claim.words if lx.stem(w) in denied]
            if words and claim.share(claim.missing(vocabulary)) >= self.thresholds.min_coverage:
                return words
        return []

    @staticmethod
    def _denials(
        denials: Sequence[tuple[frozenset[str], frozenset[str]]],
        vocabularies: Sequence[lx.Vocabulary],
    ) -> list[tuple[frozenset[str], lx.Vocabulary]]:
        """The denying sentences of one window (see `_Context.window_denials`)."""
        if not any(denied for denied, _ in denials):
            return []
        asserted = frozenset().union(*(a for _, a in denials))
        return [
            (denied - asserted, vocabulary)
            for (denied, _), vocabulary in zip(denials, vocabularies, strict=True)
            if denied - asserted
        ]

    def _windows(self, claim: lx.Claim, ctx: _Context) -> _Windows:
        """``claim`` against every window of ``ctx``, windows ranked by words matched exactly."""
        exact = [claim.missing(v) for v in ctx.window_vocabularies]
        shares = [claim.share(missing) for missing in exact]
        order = sorted(range(len(exact)), key=lambda i: (-shares[i], len(ctx.windows[i]), i))
        return _Windows(claim, exact, order)

    def _synonym_words(self, windows: _Windows, ctx: _Context) -> list[str]:
        """The words MiniLM compares for ``windows``: none when a window matches exactly."""
        if not windows.order or not windows.exact[windows.order[0]]:
            return []
        exact = windows.exact
        # only soft words (no comparisons) are compared, in windows that can still win
        top = [
            i for i in self._contenders(windows)
            if ctx.window_content[i] and any(w not in lx.COMPARISONS for w in exact[i])
        ]
        unmatched = sorted({w for i in top for w in exact[i] if w not in lx.COMPARISONS})
        candidates = sorted({w for i in top for w in ctx.window_content[i]})
        return [*unmatched, *candidates]

    def _contenders(self, windows: _Windows) -> list[int]:
        """The lexically best windows `_best_window` compares word by word, without those
        that could not beat the best one even with every soft word matched (the share
        of the first window's exact matches is a floor, and the first of equals wins)."""
        claim, exact = windows.claim, windows.exact
        top = windows.order[: self.thresholds.semantic_windows]
        if not top:
            return []
        floor = claim.share(exact[top[0]])
        return [top[0], *(
            i for i in top[1:]
            if claim.share([w for w in exact[i] if w in lx.COMPARISONS]) > floor
        )]

    def _word_vectors(self, pending: Sequence[tuple[_Windows, _Context]]) -> dict[str, Vector]:
        """The MiniLM vectors of every word ``pending`` compares, from one embed call."""
        words = list(dict.fromkeys(
            w for windows, ctx in pending for w in self._synonym_words(windows, ctx)
        ))
        if not words:
            return {}
        return dict(zip(words, self.embedder.embed(words), strict=True))

    def _best_window(
        self, windows: _Windows, ctx: _Context, vectors: dict[str, Vector]
    ) -> tuple[int | None, float, list[str]]:
        """The window holding most of the claim: (index, weighted share matched, words not).

        Words match by folded form, stem or acronym; the words still unmatched in
        the lexically best windows may match a window's word by MiniLM similarity
        (synonyms, other word forms: ``bought``/``purchased``, ``film``/``movie``)
        — when ``vectors`` (from `_word_vectors`) holds them.
        """
        claim, exact = windows.claim, windows.exact
        if not windows.order:
            return None, 0.0, list(claim.words)
        best = windows.order[0]
        if not exact[best] or not vectors:
            return best, claim.share(exact[best]), exact[best]
        best_share, best_missing = -1.0, list(claim.words)
        for i in self._contenders(windows):
            missing = exact[i]
            soft = [w for w in missing if w not in lx.COMPARISONS]
            window_words = ctx.window_content[i]
            if window_words and soft:
                sims = np.stack([vectors[w] for w in soft]) @ np.stack(
                    [vectors[w] for w in window_words]
                ).T
                matched = {
                    w for w, row in zip(soft, sims, strict=True)
                    if float(row.max()) >= self.thresholds.word_similarity
                }
                missing = [w for w in missing if w not in matched]
            share = claim.share(missing)
            if share > best_share:
                best, best_share, best_missing = i, share, missing
        return best, best_share, best_missing

    # the risk screen (not a judge step: a record-level score for risk-based sampling)

    def screen(self, contexts: Sequence[str], response: str, *, semantic: bool = True) -> Screen:
        """A cheap hallucination risk for one record, in [0, 1] (1 = surely unsupported).

        1 − the support of the response's weakest statement under the local
        verify step: 1 for an invented number or name, 0.5–1 for words the
        context lacks or does not say together, 0–0.125 for supported ones.
        ``semantic=False`` skips the MiniLM word matching: lexical checks only,
        no model call at all, a little stricter.
        """
        statements = self.statements(response) or ([response] if response.strip() else [])
        if not statements:
            return Screen(risk=0.5, faithfulness=float("nan"), reason="empty response")
        checks = self._checks(statements, self._context("\n".join(contexts)), semantic=semantic)
        worst = min(checks, key=lambda c: c.support)
        return Screen(
            risk=round(1.0 - worst.support, 6),
            faithfulness=sum(c.verdict for c in checks) / len(checks),
            reason=worst.reason,
        )

    # questions

    def question(self, response: str) -> GeneratedQuestion:
        noncommittal = bool(NONCOMMITTAL.search(response.lower())) or not response.strip()
        return GeneratedQuestion(question=response, noncommittal=int(noncommittal))

    # usefulness

    def usefulness(self, answer: str, contexts: Sequence[str]) -> list[ContextVerdict]:
        t = self.thresholds
        wanted = lx.content_words(answer)
        answer_numbers = lx.numbers(answer)
        prepared = [self._context(text) for text in contexts]
        shares = [lx.coverage(wanted, ctx.vocabulary) if wanted else 0.0 for ctx in prepared]
        # synonyms count too, within one passage of the context: all contexts' words in one call
        windows = {
            k: self._windows(lx.Claim.unweighted(wanted), ctx)
            for k, (ctx, share) in enumerate(zip(prepared, shares, strict=True))
            if wanted and 0 < share < t.useful_coverage
        }
        vectors = self._word_vectors([(w, prepared[k]) for k, w in windows.items()])
        verdicts: list[ContextVerdict] = []
        for k, ctx in enumerate(prepared):
            share = shares[k]
            if k in windows:
                _, share, _ = self._best_window(windows[k], ctx, vectors)
            shared_numbers = [n.surface for n in answer_numbers
                              if n.values & ctx.vocabulary.numbers]
            useful = (bool(wanted) and share >= t.useful_coverage) or bool(shared_numbers)
            reason = f"holds {share:.0%} of the answer's content words"
            if shared_numbers:
                reason += f" and {lx.quote(shared_numbers)}"
            verdicts.append(ContextVerdict(reason=reason, verdict=int(useful)))
        return verdicts

    # contexts

    def _context(self, text: str) -> _Context:
        """``text`` prepared for checks; chunks (lines) are prepared once and cached."""
        chunks = [self._chunk(line) for line in text.splitlines() if line.strip()]
        if len(chunks) == 1:
            return chunks[0]
        return _Context(
            text=text,
            vocabulary=lx.Vocabulary.union([c.vocabulary for c in chunks]),
            windows=[w for c in chunks for w in c.windows],
            window_vocabularies=[v for c in chunks for v in c.window_vocabularies],
            window_negated=[n for c in chunks for n in c.window_negated],
            window_content=[w for c in chunks for w in c.window_content],
            window_denials=[d for c in chunks for d in c.window_denials],
        )

    def _chunk(self, text: str) -> _Context:
        with self._lock:
            cached = self._contexts.get(text)
            if cached is not None:
                self._contexts.move_to_end(text)
                return cached
        sentences = lx.sentences(text)
        read = [lx.Sentence.of(s) for s in sentences]
        vocabularies = [r.vocabulary for r in read]
        negated = [r.negated for r in read]
        content = [r.content for r in read]
        denials = [r.denials for r in read]
        # windows: runs of 1..window_sentences neighbouring sentences, shortest first
        spans = [
            (i, i + n)
            for n in range(1, self.thresholds.window_sentences + 1)
            for i in range(len(sentences) - n + 1)
        ]
        window_vocabularies = [
            vocabularies[a] if b == a + 1 else lx.Vocabulary.union(vocabularies[a:b])
            for a, b in spans
        ]
        whole = (0, len(sentences))  # a chunk of a few sentences is one of its windows
        prepared = _Context(
            text=text,
            vocabulary=window_vocabularies[spans.index(whole)] if whole in spans
            else lx.Vocabulary.union(vocabularies),
            windows=[" ".join(sentences[a:b]) for a, b in spans],
            window_vocabularies=window_vocabularies,
            window_negated=[any(negated[a:b]) for a, b in spans],
            window_content=[
                list(dict.fromkeys(chain.from_iterable(content[a:b]))) for a, b in spans
            ],
            window_denials=[self._denials(denials[a:b], vocabularies[a:b]) for a, b in spans],
        )
        with self._lock:
            self._contexts[text] = prepared
            if len(self._contexts) > self.context_cache_size:
                self._contexts.popitem(last=False)
        return prepared
