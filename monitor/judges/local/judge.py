"""`LocalJudge`: every judge step answered in-process, at zero tokens.

The local judge speaks the same four steps as the LLM judge
(`monitor.metrics.steps`), so every metric — online and reference-based —
runs unchanged on it. Its answers are documented approximations, not an LLM's:

``statements``
    Sentence splitting (nupunkt; long compound sentences also at ``;``).
    Sentences that assert nothing are left out, as the LLM judge is told to
    ("No statements if the text asserts nothing"): a bare answer particle
    ("Yes."), a sentence that only declines to answer (`NONCOMMITTAL`: "I don't
    know", "it depends on your contract", "I'd rather not guess"; an apology in
    front is set aside) or only sends the user elsewhere as advice (`DEFERS`:
    "I'd recommend checking with a pharmacist") and, in a response that
    declines, one that only sends the user elsewhere (`DEFERRAL`: "Please
    contact the billing team") — never a sentence with a number. A response
    that declines and asserts nothing is ``noncommittal`` (`Statements.
    noncommittal`: faithfulness is then unscoreable, never 0). A sentence that
    starts by referring back ("They expire on 30 June.") joins the one before
    it in one statement; other pronouns are not resolved.
``verify``
    A leading answer particle is set aside ("No, SMS codes are not allowed"
    claims "SMS codes are not allowed"). Each statement gets a graded support
    in [0, 1] (`Check.support`) and a verdict: supported (1) when it passes,
    in order:

    1. every number in it (amounts, dates, years, percentages, counts; "one"
       before a unit; "2 p.m." is also 14) occurs in the context with the same
       value, or inside a range the context gives ("6 to 11 years"), and a
       counted unit ("3 days") is not one the context counts only with other
       numbers ("3 times", "14 days");
    2. every capitalised name in it occurs in the context (a hyphenated one as
       written), or is the acronym of a phrase there (``SSO`` ↔ "Single
       sign-on"). A missing number or name is reported with what the closest
       part of the context says in its place when it has one of that kind:
       ``answer says 'Google Drive', the context says 'Amazon S3'``;
    3. each clause (its sentences, split at ``;``, at a comma before a
       conjunction, at "and" before a subject pronoun) passes 4–7 on its own,
       and the statement is as supported as its weakest clause;
    4. its informative words — content words without answer particles,
       discourse words (`lexical.DISCOURSE`), generic verbs, nouns and pronouns
       (`lexical.GENERIC`: use, get, thing, anything, …), contractions and
       number words, each weighted by its IDF (`lexical.weight`, from the
       word's frequency rank) — are said *together*, in one context window (up
       to ``window_sentences`` neighbouring sentences of one passage; windows
       ranked by the words they hold exactly, then by the clause's numbers).
       A word counts 1 when found by folded form, stem, acronym (``MFA`` ↔
       "multi-factor authentication", both ways) or a word of its group of
       `lexical.SYNONYM_GROUPS` (``lost`` ↔ "expire", ``sign`` ↔ "approve": a
       small thesaurus of the paraphrases these answers use); in the lexically best
       windows (``semantic_windows``) it counts by the MiniLM cosine of its
       closest word of the window, 0 below ``soft_low``, 1 from ``soft_high``,
       linear between (`soft_match`: ``leftover``/``unused``,
       ``move``/``transfer``). The support is the weighted share so counted,
       and the clause passes at ``support``. Graded matches are for
       paraphrases: when only one word of the clause is reworded (not in the
       window as written, by stem or acronym), a word MiniLM compares must be
       a synonym (cosine ≥ ``word_similarity``) and the clause must reach
       ``window_coverage`` (a copy that changes one word changes the fact:
       "deleted" for "moved"), as must a clause of at most ``short_claim``
       words. Words written with a capital past the first (and a first word
       that looks like a name), units of time (`lexical.TIME_UNITS`: "week" is
       not "renewal") and words of comparison or order ("first", "larger";
       "next" is "following") match only as themselves or by the thesaurus.
       ``semantic=False`` (the lexical risk screen) counts exact matches
       only, needs ``window_coverage`` and
       fails a clause with less than ``min_coverage`` of its words anywhere in
       the context at once;
    5. it does not negate what its best window says ("un-" words such as
       "unused" negate a context sentence too), does not flip a word by its
       prefix ("unpaid" where the window says "paid", or the reverse), and,
       without a negation of its
       own, does not assert a word its best window denies: one a negator
       governs there (`lexical.denials`: up to three content words right after
       "not", "no", "never", "without", "-n't", … past a few function words,
       not a bound like "no later than") and no sentence of the window
       asserts, in a sentence holding at least ``min_coverage`` of its weight
       ("SMS codes are allowed" vs "… are not allowed"; the reason names the
       word: ``context negates 'allowed'``);
    6. a clause that would pass does not say a name, number or word where the
       context says another (the swap check, `_swapped`): the rest of the
       clause (its words but that one, and its other numbers) is aligned to the
       part of the context that holds most of it (`lexical.segments`: sentences
       cut at ``;``, ``:``, a comma before a conjunction, "but", "while",
       "whereas", "and" before a number — such a next item of a list of
       quantities shares the words its list started with); when that part
       lacks it, holds more of the rest than every part that has it (and no
       part that has it is a title of three words or fewer), and has another
       of its kind, the clause swapped them, and the reason names both, with
       the part quoted: ``answer says 'one month', the context says 'three
       months'``. Of its kind: a name; a number of the same kind and unit; for
       a word of weight ≥ ``role_weight`` said elsewhere in the context (who
       does what), its opposite (`lexical.OPPOSITES`: "within"/"outside") or
       a word MiniLM calls parallel (cosine in [``role_similarity``,
       ``role_same``): "annual" for "monthly", "designers" for
       "engineers"), not another form of it. A word swaps, and a name or
       number that no single part holds swaps, only where the aligned part
       holds ``swap_rest`` of the rest;
    7. a clause short of passing with a window share ≥ ``tie_coverage`` still
       passes when MiniLM says it restates its best window (sentence cosine ≥
       ``sentence_similarity``).

    Paraphrases pass; invented numbers, units and names, swapped ones and
    words gathered from all over the context do not. An unsupported clause's
    reason quotes the answer's words and the closest passage, e.g. ``words
    'cash' not in context (support 0.42); closest: “Employees may transfer
    …”``; it says "the reference" or "the response" instead of "context" as
    `VerifyInput.source` says (factual_correctness). `Check.rule` names the
    rule (number, name, words, window, negation, comparison, swap,
    restated). The step's verdicts are 0/1 (`StatementVerdict`); the graded
    support shows in an unsupported statement's reason.
``questions``
    No question is generated: the response stands in for one, marked as such
    (`RESPONSE_AS_QUESTION`, which `LocalJudge.embed` leaves out), so
    response_relevancy becomes cosine(embed(response), embed(user_input));
    ``noncommittal`` is set by phrases ("I don't know", "no information",
    "cannot answer", …) and for a response the ``statements`` step calls
    noncommittal.
``usefulness``
    A context is useful when it holds at least half of the answer's content
    words (exactly, or as MiniLM synonyms within one passage) or one of the
    answer's numbers.

``embed`` is the local MiniLM (`monitor.judges.local.embedder`). All answers are
deterministic; usage is always zero. CPU work runs in the judge's own worker
threads (``threads``, 32 by default) so the event loop stays free; the
``questions`` step, one regex, is answered in place. Many threads, not the
event loop's default handful, because a MiniLM pass releases the GIL: while
one runs, other records' rules go on in Python, and the texts of every
thread waiting meet in the next pass (one process scoring 64 records at once
gets more records/s, and less CPU per record, than with the default executor's
threads; ``bench/local_scorer.py``, docs/benchmarks.md).

Cost: MiniLM is nearly all of it, so each step asks it at most once per
kind of text — the synonym words of all statements of a ``verify`` (all
contexts of a ``usefulness``) go in one `MiniLMEmbedder.embed` call, made
only for the statements the lexical rules leave undecided and only for the
windows that could still be a statement's best one, and the near-miss
clauses of rule 7 with their windows in a second one, made only when there
are any; concurrent records' calls share forward passes in the embedder.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from itertools import chain
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.lexical.clauses import (
    Claim,
    Segment,
    clauses,
    segments,
    sentences,
    strip_particle,
)
from monitor.judges.local.lexical.names import names
from monitor.judges.local.lexical.numerals import MONTHS, Quantity, numbers, quantities
from monitor.judges.local.lexical.thesaurus import (
    COMPARISONS,
    OPPOSITES,
    SAME_COMPARISON,
    TIME_UNITS,
    negated_word,
)
from monitor.judges.local.lexical.vocabulary import Sentence, Vocabulary, coverage
from monitor.judges.local.lexical.wordforms import (
    DISCOURSE,
    GENERIC,
    content_words,
    fold,
    stem,
    words,
)
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
    VerifySource,
)
from monitor.prompt import Embedded, Judged, JudgeError, OutT, Prompt
from monitor.records import Usage

T = TypeVar("T")

KIND = "local"

Vector = npt.NDArray[np.float32]

_NAME_PARTS = re.compile(r"[\s.\-]+")

#: Phrases that make a response noncommittal (matched on lower case, accents kept).
NONCOMMITTAL = re.compile(
    r"\b(?:i\s+(?:do\s+not|don't|don’t)\s+know|i(?:\s+am|'m|’m)\s+not\s+(?:sure|certain|able)"
    r"|not\s+sure|no\s+(?:information|data|details|answer|idea|mention|record)"
    r"|(?:do\s+not|don't|don’t)\s+have\s+(?:that|this|the|any|enough)\s+information"
    r"|(?:cannot|can't|can’t|unable\s+to|not\s+able\s+to)\s+"
    r"(?:answer|say|tell|determine|find|provide|help|confirm|know|give|share|disclose|discuss"
    r"|comment)"
    r"|(?:does|do)\s+not\s+(?:mention|say|specify|contain|provide|state|cover)"
    r"|(?:doesn't|don't|doesn’t|don’t)\s+(?:mention|say|specify|contain|provide|state|cover)"
    r"|(?:don't|don’t|do\s+not)\s+have\s+(?:enough\s+)?(?:details|data|information)"
    r"|not\s+(?:mentioned|specified|stated|provided|available|enough\s+information)"
    r"|insufficient\s+information|unknown|unclear|no\s+way\s+to\s+know"
    r"|(?:it|that)\s+(?:depends|varies|(?:may|might|can)\s+vary)"
    r"|(?:can|may|might|could|will)\s+(?:depend|differ|vary)"
    r"|(?:rules|policies|terms|conditions|details|things|it|that|this)\s+(?:differ|vary|varies)"
    r"|rather\s+not\s+(?:guess|say|speculate)"
    r"|\bi\s*(?:'m|’m|\s+am)\s+(?:not\s+able|unable)\s+to\s+\w+)\b"
)

#: Sending the user elsewhere ("please contact the billing team", "support would know
#: more"): part of declining to answer when the response also declines.
DEFERRAL = re.compile(
    r"^\s*(?:please\s+)?(?:contact|ask|check\s+with|reach\s+out\s+to|talk\s+to)\b"
    r"|\byou\s+(?:may|might|could|should)\s+(?:want\s+to\s+)?(?:check|ask|contact|reach)\b"
    r"|\b(?:suggest|recommend)\s+(?:you\s+)?(?:check|ask|contact|reach|talk)"
    r"|\b(?:checking|check)\s+with\b|\breach(?:ing)?\s+out\s+to\b"
    r"|\bwould\s+know\s+(?:more|better)\b|\bcan\s+help\s+(?:you\s+)?with\s+(?:that|this)\b"
    r"|\bi(?:'d|’d|\s+would)\s+(?:\w+\s+)?(?:check|ask|contact|call|recommend|suggest)"
    r"|\bshould\s+be\s+able\s+to\s+help\b|\bgive\s+.{1,40}\s+a\s+call\b"
)

#: Sending the user elsewhere as the whole answer: a sentence that only does this declines
#: by itself ("I'd really recommend checking with a pharmacist"); a plain instruction ("Ask
#: your manager for approval") does not.
DEFERS = re.compile(
    r"\b(?:suggest|recommend)\s+(?:you\s+)?(?:check|ask|contact|reach|talk|speak)"
    r"|\bi(?:'d|’d|\s+would)\s+(?:\w+\s+)?(?:check|ask|contact|call)"
    r"|\bshould\s+be\s+able\s+to\s+help\b|\bwould\s+know\s+(?:more|better)\b"
    r"|\b(?:best|better)\s+to\s+(?:ask|check|contact|call|speak)"
)

#: An apology that frames a refusal ("I'm sorry, but ...", "Unfortunately, ..."): no claim.
_APOLOGY = re.compile(
    r"^\s*(?:i\s*(?:'m|’m|\s+am)\s+(?:sorry|afraid)|sorry|unfortunately)\b[\s,:;.!-]*",
    re.IGNORECASE,
)


#: What the ``questions`` step's question starts with: the local judge generates no question,
#: the response stands in for one (relevancy details show it; `LocalJudge.embed` drops it).
RESPONSE_AS_QUESTION = "[no question generated; the response is compared] "

#: A sentence that starts by referring to the one before it.
_REFERS_BACK = re.compile(r"(?:They|It|This|That|These|Those|Its|Their)\b")

#: Steps answered on the caller's thread: a regex on the response costs less than the hop
#: to a worker thread (the others split sentences, read contexts or call MiniLM).
INLINE_STEPS = frozenset({QUESTIONS})


@dataclass(frozen=True)
class LocalThresholds:
    """The few numbers the local judge decides with (see the module docstring)."""

    #: graded support (weighted share of a clause's informative words one context window
    #: holds, MiniLM word matches counted by `soft_match`) at which a clause is supported
    support: float = 0.65
    #: the share one window must hold for a near copy (one word reworded), a short clause
    #: and with ``semantic=False`` (7/8)
    window_coverage: float = 0.875
    #: lexical only: below this share of its words anywhere in the context, a clause fails at
    #: once; and the share of a clause a denying sentence must hold (rule 5)
    min_coverage: float = 0.5
    #: MiniLM word cosine from which a word of the window counts towards a clause's word ...
    soft_low: float = 0.3
    #: ... and at which it counts fully (linear in between)
    soft_high: float = 0.6
    #: MiniLM cosine at which two words count as the same (usefulness, near copies, short
    #: clauses)
    word_similarity: float = 0.8
    #: share of the rest of a clause a passage without its name or number must hold for
    #: the passage's other name or number to be a swap (rule 6)
    swap_rest: float = 0.67
    #: words of a clause weighing at least this are checked for a swap (who does what) ...
    role_weight: float = 3.0
    #: ... against a word of the part the rest is said in, at this MiniLM cosine or more ...
    role_similarity: float = 0.5
    #: ... and less than this (the same word said again: "refunded"/"refundable")
    role_same: float = 0.9
    #: a clause of at most this many informative words gets no graded word matches
    short_claim: int = 2
    #: share of the answer's content words a useful context holds
    useful_coverage: float = 0.5
    #: windows compared word by word with MiniLM per statement (the lexically best ones)
    semantic_windows: int = 3
    #: window share from which MiniLM may decide a clause short of passing (rule 7) ...
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
    #: the rule that decided: number, name, words, negation, comparison, swap, window,
    #: restated
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
    #: graded local faithfulness: the mean `Check.support` of the statements, NaN without
    #: statements (what faithfulness would be if the metric averaged supports)
    support: float = float("nan")


@dataclass(frozen=True)
class _Windows:
    """A clause's (or an answer's) words against the windows of a context."""

    claim: Claim
    #: per window, the claim's words it lacks (folded form, stem, acronym compared)
    exact: list[list[str]]
    #: window indexes, best (largest weighted share matched, then shortest) first
    order: list[int]


@dataclass
class _Context:
    """A context string prepared once: its vocabulary and its windows."""

    text: str
    vocabulary: Vocabulary
    windows: list[str]
    window_vocabularies: list[Vocabulary]
    window_negated: list[bool]
    window_content: list[list[str]]
    #: per window, its sentences that deny words: (the stems a negator denies there and
    #: no sentence of the window asserts, the sentence's vocabulary)
    window_denials: list[list[tuple[frozenset[str], Vocabulary]]]
    #: its sentences, with their vocabularies (for `LocalJudge._segments`)
    sentences: list[str]
    sentence_vocabularies: list[Vocabulary]
    #: the chunks of a context of several (empty for a chunk)
    chunks: tuple[_Context, ...] = ()
    #: the parts of its sentences that each state one fact (`Segment`), in order; made on
    #: first use (`LocalJudge._segments`)
    segments: list[Segment] | None = None


@dataclass(frozen=True)
class _Specific:
    """A name, number or word of a clause, as the swap check compares it."""

    #: as written in the clause
    surface: str
    #: "name", "word", or the number's kind (amount, percentage, year, date, number)
    kind: str
    #: its folded words (left out when the rest of the clause is aligned)
    words: frozenset[str]
    #: numbers: the values it may stand for
    values: frozenset[float] = frozenset()
    #: numbers: the stem of the unit word after it ("" without one)
    unit: str = ""
    #: names: a month ("March")
    month: bool = False
    #: numbers: the number alone, as written ("ten" of "ten leftover")
    number: str = ""

    def said(self, other: str) -> str:
        """How a reason quotes this specific next to ``other``, what the context says: a
        number with its unit only when ``other`` has it too."""
        if self.number and not (self.unit and stem(fold(other.split()[-1])) == self.unit):
            return self.number
        return self.surface


#: How much a number of a clause weighs when the rest of the clause is aligned (a word of
#: rank ≈ 2,000)
NUMBER_WEIGHT = 4.0

#: What the statements of a ``verify`` are checked against, as reasons name it.
_WHERE = {"context": "context", "reference": "the reference", "response": "the response"}


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
        # the response standing in for a generated question is embedded as the response
        texts = [t.removeprefix(RESPONSE_AS_QUESTION) for t in texts]
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
            result = Statements(statements=self.statements(inputs.text),
                                noncommittal=int(self.noncommittal(inputs.text)))
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
            raise JudgeError(
                "bad_request", f"local judge cannot answer step {prompt.step!r}"
            )
        return prompt.output.model_validate(result.model_dump())

    # statements

    def statements(self, text: str) -> list[str]:
        """The sentences of ``text`` that assert something (see the module docstring)."""
        found = sentences(text)
        declines = any(self._declines(s) for s in found)
        kept: list[str] = []
        for s in found:
            if not self._asserts(s, declines=declines):
                continue
            # a sentence that goes on about the last one ("They expire on 30 June.") is not
            # standalone: it is one statement with the sentence it refers to
            if kept and _REFERS_BACK.match(s):
                kept[-1] = f"{kept[-1]} {s}"
            else:
                kept.append(s)
        return kept

    def noncommittal(self, text: str) -> bool:
        """``text`` only declines, defers ("check with HR") or says it does not know: it has
        a sentence that declines and no sentence that asserts."""
        found = sentences(text)
        return any(self._declines(s) for s in found) and not self.statements(text)

    @staticmethod
    def _declines(sentence: str) -> bool:
        """``sentence`` declines to answer ("I'm not sure about that", "It depends on your
        contract, so please ask your account manager"): each clause declines or sends the
        user elsewhere, and one declines."""
        said = _APOLOGY.sub("", sentence.lower(), count=1)
        if not said.strip() or numbers(sentence):
            return False
        if DEFERS.search(said):
            return True
        parts = clauses(said)
        declining = [bool(NONCOMMITTAL.search(c)) for c in parts]
        return any(declining) and all(
            d or DEFERRAL.search(c) for d, c in zip(declining, parts, strict=True)
        )

    @staticmethod
    def _asserts(sentence: str, *, declines: bool) -> bool:
        """False for a bare answer particle ("Yes."), for a sentence that only declines to
        answer ("I don't know", "it depends") and, in a response that declines, for one that
        only sends the user elsewhere ("Please contact support.") — unless it has a number."""
        if not words(strip_particle(sentence)):
            return False
        if numbers(sentence):
            return True
        if LocalJudge._declines(sentence):
            return False
        said = _APOLOGY.sub("", sentence.lower(), count=1)
        return not all(
            NONCOMMITTAL.search(c) or (declines and DEFERRAL.search(c))
            for c in clauses(said)
        )

    # verify

    def verify(
        self, context: str, statements: Sequence[str], source: VerifySource = "context"
    ) -> list[Check]:
        """`check` of each statement against ``context`` (what it is, for the reasons:
        ``source``)."""
        return self._checks(statements, self._context(context), source=source)

    def check(
        self,
        statement: str,
        context: _Context | str,
        *,
        semantic: bool = True,
        source: VerifySource = "context",
    ) -> Check:
        """Is ``statement`` supported by ``context``? (see the module docstring for the rules)"""
        ctx = context if isinstance(context, _Context) else self._context(context)
        [result] = self._checks([statement], ctx, semantic=semantic, source=source)
        return result

    def _checks(
        self,
        statements: Sequence[str],
        ctx: _Context,
        *,
        semantic: bool = True,
        source: VerifySource = "context",
    ) -> list[Check]:
        """`check` of every statement; the MiniLM words of all of them in one embed call."""
        first = [self._lexical_check(s, ctx, semantic, source) for s in statements]
        pending = [(w, ctx) for p in first if isinstance(p, list) for w in p]
        vectors = self._word_vectors(pending) if semantic else {}
        clauses = [
            p if isinstance(p, Check)
            else [self._window_check(w, ctx, vectors, semantic, source) for w in p]
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
        """Rule 7: a clause just short of passing passes when MiniLM says it restates
        its best window (sentence cosine ≥ ``sentence_similarity``); in place."""
        t = self.thresholds
        close = [
            (k, i)
            for k, checks in enumerate(clauses)
            if isinstance(checks, list)
            for i, c in enumerate(checks)
            if c.rule == "window" and c.verdict == 0 and c.window is not None
            and t.tie_coverage <= c.window_coverage
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
                    f"{c.window_coverage:.0%} of the content words in one passage, "
                    f"which it restates (MiniLM cosine {cosine:.2f}): {_excerpt(window_text)}",
                    max(c.support, t.support),
                    c.window_coverage,
                    c.window,
                    "restated",
                )

    def _lexical_check(
        self, statement: str, ctx: _Context, semantic: bool, source: VerifySource
    ) -> Check | list[_Windows]:
        """Rules 1–3 and the word counts of rule 4; `_Windows` (per clause) when windows decide."""
        t = self.thresholds
        where = _WHERE[source]
        claim = strip_particle(statement)
        known = ctx.vocabulary.numbers
        counted = quantities(claim, reach=1)
        missing_numbers = [q for q in counted if not q.number.values & known]
        if missing_numbers:
            first = missing_numbers[0].number
            more = f" (and {len(missing_numbers) - 1} more)" if len(missing_numbers) > 1 else ""
            absent = self._number(missing_numbers[0])
            other = self._counterpart_in_context(claim, absent, ctx)
            if other:
                return Check(0, f"answer says '{absent.said(other)}', {source_says(source)} "
                             f"'{other}' ({first.kind} not in {where}){more}", 0.0,
                             rule="number")
            return Check(0, f"{first.kind} '{first.surface}' not in {where}{more}", 0.0,
                         rule="number")
        miscounted = self._miscounted(counted, ctx)
        if miscounted is not None:
            return Check(0, f"number '{miscounted.surface}' not in {where} (it has other "
                         "numbers of that unit)", 0.0, rule="number")
        missing_names = [name for name in names(claim) if not self._has_name(name, ctx)]
        if missing_names:
            other = self._counterpart_in_context(claim, self._name(missing_names[0]), ctx)
            if other:
                return Check(0, f"answer says '{missing_names[0]}', {source_says(source)} "
                             f"'{other}'", 0.0, rule="name")
            return Check(0, f"name {quote(missing_names)} not in {where}", 0.0, rule="name")

        windows: list[_Windows] = []
        for clause in (c for sentence in sentences(claim) for c in clauses(sentence)):
            parsed = Claim.of(clause)
            if not parsed.words:
                continue
            missing = parsed.missing(ctx.vocabulary)
            anywhere = 1.0 - len(missing) / len(parsed.words)
            if not semantic and anywhere < t.min_coverage:
                return Check(0, f"words {quote(missing)} not in {where}", anywhere / 2,
                             anywhere, rule="words")
            windows.append(self._windows(parsed, ctx))
        if not windows:
            return Check(1, "no content words to check", 1.0, 1.0, rule="words")
        return windows

    # the swap check (rule 6): a name or number said of something else in the context

    @staticmethod
    def _name(name: str) -> _Specific:
        parts = frozenset(fold(w) for w in _NAME_PARTS.split(name) if w)
        return _Specific(name, "name", parts, month=bool(parts) and parts <= MONTHS)

    @staticmethod
    def _number(q: Quantity) -> _Specific:
        return _Specific(
            q.surface, q.number.kind,
            frozenset(fold(w) for w in words(q.number.surface)),
            # a date's "unit" is its month, a year's whatever follows: no unit
            q.number.values,
            q.units[0] if q.units and q.number.kind not in ("date", "year") else "",
            number=q.number.surface,
        )

    def _specifics(self, clause: str, claim: Claim | None = None) -> list[_Specific]:
        """The names and numbers of ``clause`` (numbers first), then, with ``claim``, its
        informative words that no name holds (who does what: "monthly", "engineers")."""
        found = [*(self._number(q) for q in quantities(clause, reach=1)),
                 *(self._name(n) for n in names(clause))]
        if claim is not None:
            named = {w for f in found for w in f.words}
            found.extend(_Specific(w, "word", frozenset({w})) for w in dict.fromkeys(
                fold(x) for x in words(clause)) if w in OPPOSITES)
            found.extend(
                _Specific(w, "word", frozenset({w})) for w, wt in
                zip(claim.words, claim.weights, strict=True)
                if w not in named and w not in claim.capitalised and w not in COMPARISONS
                and wt >= self.thresholds.role_weight
            )
        return found

    @staticmethod
    def _holds(segment: Segment, specific: _Specific) -> bool:
        vocabulary = segment.vocabulary
        if specific.kind == "word":
            return vocabulary.has_word(specific.surface)
        if specific.kind != "name":
            return bool(specific.values & vocabulary.numbers)
        return all(vocabulary.has_word(w) for w in specific.words) or (
            specific.surface.isupper() and fold(specific.surface) in vocabulary.acronyms
        )

    def _other_word(
        self, segment: Segment, specific: _Specific, claim: str,
        holding: Sequence[Segment], semantic: bool = True,
    ) -> str | None:
        """The word of ``segment`` in the role ``specific`` has in ``claim``: one neither the
        claim nor the parts holding ``specific`` have, closest to it by MiniLM (cosine ≥
        ``role_similarity``: "annual" for "monthly", "designers" for "engineers"; with
        ``semantic=False`` opposites only, no model call)."""
        said = Vocabulary.of(claim)
        opposite = [w for w in OPPOSITES.get(specific.surface, ())
                    if w in segment.vocabulary.folded and w not in said.folded]
        if opposite:
            return opposite[0]
        root = specific.surface[:5]
        candidates = [
            w for w in content_words(segment.text)
            if w not in DISCOURSE and w not in GENERIC and not said.has_word(w)
            and not w.startswith(root)  # another form of the same word ("refundable")
            and not any(g.vocabulary.has_word(w) for g in holding)
        ]
        if not candidates or not semantic:
            return None
        vectors = self.embedder.embed([specific.surface, *candidates])
        t = self.thresholds
        # parallel, not the same: a synonym is the same thing said again
        fits = [(float(c), w) for c, w in zip(vectors[1:] @ vectors[0], candidates, strict=True)
                if t.role_similarity <= float(c) < t.role_same]
        return max(fits)[1] if fits else None

    @staticmethod
    def _other(
        segment: Segment, specific: _Specific, claim: str, *, strict: bool = True
    ) -> str | None:
        """A name or number of ``segment`` of the same kind as ``specific`` that ``claim``
        does not have: what the context says where the claim says ``specific``."""
        if specific.kind == "name":
            said = {fold(w) for w in words(claim)}
            for name in segment.names:
                parts = {fold(w) for w in _NAME_PARTS.split(name) if w}
                # of its kind: a month for a month, an acronym for an acronym
                if parts and parts.isdisjoint(said) and (parts <= MONTHS) == specific.month \
                        and name.isupper() == specific.surface.isupper():
                    # as written, with the digits a name may end in ("Amazon S3")
                    written = re.search(re.escape(name) + r"[\w-]*", segment.text)
                    return written.group(0) if written else name
            return None
        values = {v for n in numbers(claim) for v in n.values}
        for q in segment.quantities:
            if q.number.values & values or q.number.kind != specific.kind:
                continue
            same_unit = bool(specific.unit and q.units and q.units[0] == specific.unit)
            if strict and specific.unit and not same_unit \
                    and q.number.kind not in ("date", "year"):
                continue
            # with its unit when the units agree ("three months"), else the number alone
            return q.surface if same_unit else q.number.surface
        return None

    @staticmethod
    def _other_numbers(clause: str, specific: _Specific) -> list[frozenset[float]]:
        """The values of the numbers of ``clause`` other than ``specific``."""
        return [n.values for n in numbers(clause) if not n.values & specific.values]

    @staticmethod
    def _rest_share(
        claim: Claim, specific: _Specific, segment: Segment,
        others: Sequence[frozenset[float]] = (),
    ) -> float:
        """The weighted share of the rest of ``claim`` — its words but ``specific``'s, and
        its other numbers (``others``, each weighing `NUMBER_WEIGHT`) — ``segment`` has."""
        total = found = 0.0
        for w, wt in zip(claim.words, claim.weights, strict=True):
            if w in specific.words:
                continue
            total += wt
            if segment.vocabulary.has_word(w) or (
                segment.shared is not None and segment.shared.has_word(w)
            ):
                found += wt
        for values in others:
            total += NUMBER_WEIGHT
            if values & segment.vocabulary.numbers:
                found += NUMBER_WEIGHT
        return found / total if total else 0.0

    def _swapped(
        self, clause: str, claim: Claim, passages: Sequence[Segment],
        semantic: bool = True,
    ) -> tuple[_Specific, str, Segment] | None:
        """Rule 6: a name or number of ``clause`` that its window says of something else.

        The rest of the clause (its words but the name's or number's) is aligned
        to the part of the window holding most of it (`segments`); when that
        part lacks the name or number, holds more of the rest than every part
        that has it, and has another of the same kind (a name; a number of the
        same kind and unit), the clause swapped them: (specific, the other, part).
        """
        parts = segments(clause)
        if len(parts) > 1:
            for part in parts:
                found = self._swapped(part, Claim.of(part), passages, semantic)
                if found is not None:
                    return found
            return None
        for specific in self._specifics(clause, claim):
            others = self._other_numbers(clause, specific)
            shares = [self._rest_share(claim, specific, g, others) for g in passages]
            if not shares:
                return None
            best = max(range(len(shares)), key=shares.__getitem__)
            if shares[best] <= 0.0 or self._holds(passages[best], specific):
                continue
            holding = [k for k, g in enumerate(passages) if self._holds(g, specific)]
            # said where more of the rest is, or as the title of the passage ("Single sign-on.")
            if any(shares[k] >= shares[best] or len(words(passages[k].text)) <= 3
                   for k in holding):
                continue
            # not in this passage at all: a swap only where most of the rest is said
            if not holding and shares[best] < self.thresholds.swap_rest:
                continue
            if specific.kind == "word":
                # a word of the clause the context says elsewhere, where the rest is said
                if not holding or shares[best] < self.thresholds.swap_rest:
                    continue
                other = self._other_word(passages[best], specific, clause,
                                         [passages[k] for k in holding], semantic)
            else:
                other = self._other(passages[best], specific, clause)
            if other:
                return specific, other, passages[best]
        return None

    def _counterpart_in_context(self, claim: str, specific: _Specific, ctx: _Context) -> str:
        """For a name or number not in the context: what the part of the context holding most
        of the rest of ``claim`` says in its place ("" when nothing of that kind is there)."""
        parsed = Claim.of(claim)
        if not parsed.words or not ctx.windows:
            return ""
        segments = self._segments(ctx)
        others = self._other_numbers(claim, specific)
        shares = [self._rest_share(parsed, specific, g, others) for g in segments]
        if not shares or max(shares) <= 0.0:
            return ""
        best = segments[max(range(len(shares)), key=shares.__getitem__)]
        # the same unit in the closest part, then anywhere in the context, then any unit
        return (self._other(best, specific, claim)
                or next(filter(None, (self._other(g, specific, claim) for g in segments)), None)
                or self._other(best, specific, claim, strict=False) or "")

    @staticmethod
    def _miscounted(claimed: Sequence[Quantity], ctx: _Context) -> Quantity | None:
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
        compounds = [fold(w) for w in name.split() if "-" in w]
        if all(vocabulary.has_word(fold(w)) for w in _NAME_PARTS.split(name) if w) and all(
            c in vocabulary.compounds for c in compounds
        ):
            return True
        return name.isupper() and fold(name) in vocabulary.acronyms

    def _window_check(
        self,
        windows: _Windows,
        ctx: _Context,
        vectors: dict[str, Vector],
        semantic: bool = True,
        source: VerifySource = "context",
    ) -> Check:
        t = self.thresholds
        where = _WHERE[source]
        best, share, unmatched, reworded = self._best_window(windows, ctx, vectors)
        if best is None:
            return Check(0, f"{quote(windows.claim.words)} not in {where}", 0.0, rule="words")
        closest = _excerpt(ctx.windows[best])
        if windows.claim.negated and not ctx.window_negated[best]:
            return Check(0, f"negation not in the closest {where} passage: {closest}", 0.0,
                         share, best, "negation")
        denied = self._denied(windows.claim, ctx, best)
        if denied:
            return Check(0, f"{where} negates {quote(denied)}", 0.0, share, best,
                         "negation")
        passage = ctx.window_vocabularies[best]
        flipped = self._flipped(windows.claim, passage, ctx.window_negated[best])
        if flipped is not None:
            said, other = flipped
            return Check(0, f"answer says '{said}', {source_says(source)} '{other}': {closest}",
                         0.0, share, best, "negation")
        comparisons = [w for w in unmatched if w in COMPARISONS
                       and not passage.has_word(SAME_COMPARISON.get(w, w))]
        if comparisons:
            return Check(0, f"comparison {quote(comparisons)} not in the closest {where} "
                         f"passage: {closest}", 0.0, share, best, "comparison")
        needed = t.support if semantic and reworded else t.window_coverage
        # a close passage (the clause would pass) that says its name or number of another thing
        swapped = self._swapped(windows.claim.text, windows.claim, self._segments(ctx),
                                semantic) \
            if share >= needed else None
        if swapped is not None:
            specific, other, part = swapped
            return Check(0, f"answer says '{specific.said(other)}', {source_says(source)} "
                         f"'{other}': {_excerpt(part.text)}", 0.0, share, best, "swap")
        if share >= needed:
            how = "all" if not unmatched else f"{share:.0%} of the"
            return Check(1, f"{how} content words in one {where} passage", share, share, best,
                         "window")
        absent = [w for w in unmatched if not ctx.vocabulary.has_word(w)]
        said = (f"words {quote(absent)} not in {where}" if absent
                else f"{quote(unmatched)} not said together with the rest in any {where} "
                "passage")
        return Check(0, f"{said} (support {share:.2f}); closest: {closest}", share / 2, share,
                     best, "window")

    @staticmethod
    def _flipped(
        claim: Claim, passage: Vocabulary, passage_negated: bool
    ) -> tuple[str, str] | None:
        """A word of ``claim`` negated by its prefix where the passage has the plain word
        ("unpaid" for "paid"), or, in a claim without a negation, the reverse: (the claim's
        word, the passage's)."""
        for w in claim.words:
            if negated_word(w) and not passage_negated and passage.has_word(w[2:]) \
                    and not passage.has_word(w):
                return w, w[2:]
            if not claim.negated and not passage.has_word(w) and passage.has_word("un" + w):
                return w, "un" + w
        return None

    def _denied(self, claim: Claim, ctx: _Context, best: int | None) -> list[str]:
        """Rule 5, the other way: words ``claim`` asserts (it has no negation) that a sentence
        of its best window denies, when that sentence holds at least ``min_coverage`` of the
        claim's weight ("SMS codes are allowed" vs "SMS codes are not allowed")."""
        if best is None or claim.negated:
            return []
        for denied, vocabulary in ctx.window_denials[best]:
            words = [w for w in claim.words if stem(w) in denied]
            if words and claim.share(claim.missing(vocabulary)) >= self.thresholds.min_coverage:
                return words
        return []

    @staticmethod
    def _denials(
        denials: Sequence[tuple[frozenset[str], frozenset[str]]],
        vocabularies: Sequence[Vocabulary],
    ) -> list[tuple[frozenset[str], Vocabulary]]:
        """The denying sentences of one window (see `_Context.window_denials`)."""
        if not any(denied for denied, _ in denials):
            return []
        asserted = frozenset().union(*(a for _, a in denials))
        return [
            (denied - asserted, vocabulary)
            for (denied, _), vocabulary in zip(denials, vocabularies, strict=True)
            if denied - asserted
        ]

    def _windows(self, claim: Claim, ctx: _Context) -> _Windows:
        """``claim`` against every window of ``ctx``, windows ranked by words matched exactly."""
        exact = [claim.missing(v) for v in ctx.window_vocabularies]
        shares = [claim.share(missing) for missing in exact]
        # then by the claim's numbers the window has ("leave by 11 a.m." → "Check-out is 11:00")
        values = claim.numbers
        held = [len(values & v.numbers) if values else 0 for v in ctx.window_vocabularies]
        order = sorted(range(len(exact)),
                       key=lambda i: (-shares[i], -held[i], len(ctx.windows[i]), i))
        return _Windows(claim, exact, order)

    def _synonym_words(self, windows: _Windows, ctx: _Context) -> list[str]:
        """The words MiniLM compares for ``windows``: none when a window matches exactly."""
        if not windows.order or not windows.exact[windows.order[0]]:
            return []
        exact, claim = windows.exact, windows.claim
        # only soft words (`_exact_only` ones are not) are compared, in windows that can win
        top = [
            i for i in self._contenders(windows)
            if ctx.window_content[i] and any(not _exact_only(claim, w) for w in exact[i])
        ]
        unmatched = sorted({w for i in top for w in exact[i] if not _exact_only(claim, w)})
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
            if claim.share([w for w in exact[i] if _exact_only(claim, w)]) > floor
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
        self,
        windows: _Windows,
        ctx: _Context,
        vectors: dict[str, Vector],
        *,
        graded: bool = True,
    ) -> tuple[int | None, float, list[str], bool]:
        """The window holding most of the claim: (index, graded support, words not matched,
        reworded).

        Words match by folded form, stem or acronym (1 each); the words still
        unmatched in the lexically best windows count by `soft_match` of their
        closest word of the window, by MiniLM similarity (synonyms, other word
        forms: ``bought``/``purchased``, ``leftover``/``unused``) — when ``vectors``
        (from `_word_vectors`) holds them. Words of comparison only match exactly.
        A word counting less than half is "not matched". Graded matches count
        only when the window lacks two words or more of the claim (``reworded``:
        a paraphrase rewords; a copy that changes one word changes the fact, and
        that word must match as a synonym). ``graded=False`` (usefulness): a word
        matches, fully, at cosine ≥ ``word_similarity`` only.
        """
        claim, exact = windows.claim, windows.exact
        if not windows.order:
            return None, 0.0, list(claim.words), False
        best = windows.order[0]
        if not exact[best] or not vectors:
            return best, claim.share(exact[best]), exact[best], False
        total = sum(claim.weights) or 1.0
        weight = dict(zip(claim.words, claim.weights, strict=True))
        # a short claim (a bare name or phrase) has nothing to be loose about: its words match
        # as synonyms only, as in usefulness
        graded = graded and len(claim.words) > self.thresholds.short_claim
        best_share, best_missing, best_reworded = -1.0, list(claim.words), False
        for i in self._contenders(windows):
            missing = exact[i]
            soft = [w for w in missing if not _exact_only(claim, w)]
            window_words = ctx.window_content[i]
            credit: dict[str, float] = {}
            # words found as synonyms are reworded too
            reworded = graded and len(soft) + len(
                claim.synonymous(ctx.window_vocabularies[i])) > 1
            if window_words and soft:
                sims = np.stack([vectors[w] for w in soft]) @ np.stack(
                    [vectors[w] for w in window_words]
                ).T
                credit = {
                    w: self.soft_match(float(row.max())) if reworded
                    else float(float(row.max()) >= self.thresholds.word_similarity)
                    for w, row in zip(soft, sims, strict=True)
                }
            share = claim.share(missing) + sum(
                weight[w] * c for w, c in credit.items()) / total
            if share > best_share:
                best, best_share, best_reworded = i, share, reworded
                best_missing = [w for w in missing if credit.get(w, 0.0) < 0.5]
        return best, best_share, best_missing, best_reworded

    def soft_match(self, cosine: float) -> float:
        """How much a word counts as matched by a window word at this MiniLM cosine: 0 up to
        ``soft_low``, 1 from ``soft_high``, linear in between."""
        t = self.thresholds
        return min(1.0, max(0.0, (cosine - t.soft_low) / (t.soft_high - t.soft_low)))

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
        checks = self._checks(statements, self._context("\n".join(contexts)), semantic=semantic)
        worst = min(checks, key=lambda c: c.support)
        return Screen(
            risk=round(1.0 - worst.support, 6),
            faithfulness=sum(c.verdict for c in checks) / len(checks),
            reason=worst.reason,
            support=sum(c.support for c in checks) / len(checks),
        )

    # questions

    def question(self, response: str) -> GeneratedQuestion:
        """No question is generated: the response stands in for one, marked as such
        (`RESPONSE_AS_QUESTION`, which `embed` leaves out)."""
        noncommittal = (bool(NONCOMMITTAL.search(response.lower())) or not response.strip()
                        or self.noncommittal(response))
        return GeneratedQuestion(question=RESPONSE_AS_QUESTION + response,
                                 noncommittal=int(noncommittal))

    # usefulness

    def usefulness(self, answer: str, contexts: Sequence[str]) -> list[ContextVerdict]:
        t = self.thresholds
        wanted = content_words(answer)
        answer_numbers = numbers(answer)
        prepared = [self._context(text) for text in contexts]
        shares = [coverage(wanted, ctx.vocabulary) if wanted else 0.0 for ctx in prepared]
        # synonyms count too, within one passage of the context: all contexts' words in one call
        windows = {
            k: self._windows(Claim.unweighted(wanted), ctx)
            for k, (ctx, share) in enumerate(zip(prepared, shares, strict=True))
            if wanted and 0 < share < t.useful_coverage
        }
        vectors = self._word_vectors([(w, prepared[k]) for k, w in windows.items()])
        verdicts: list[ContextVerdict] = []
        for k, ctx in enumerate(prepared):
            share = shares[k]
            if k in windows:
                _, share, _, _ = self._best_window(windows[k], ctx, vectors, graded=False)
            shared_numbers = [n.surface for n in answer_numbers
                              if n.values & ctx.vocabulary.numbers]
            useful = (bool(wanted) and share >= t.useful_coverage) or bool(shared_numbers)
            reason = f"holds {share:.0%} of the answer's content words"
            if shared_numbers:
                reason += f" and {quote(shared_numbers)}"
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
            vocabulary=Vocabulary.union([c.vocabulary for c in chunks]),
            windows=[w for c in chunks for w in c.windows],
            window_vocabularies=[v for c in chunks for v in c.window_vocabularies],
            window_negated=[n for c in chunks for n in c.window_negated],
            window_content=[w for c in chunks for w in c.window_content],
            window_denials=[d for c in chunks for d in c.window_denials],
            sentences=[x for c in chunks for x in c.sentences],
            sentence_vocabularies=[v for c in chunks for v in c.sentence_vocabularies],
            chunks=tuple(chunks),
        )

    @staticmethod
    def _segments(ctx: _Context) -> list[Segment]:
        """The segments of ``ctx``, each chunk's made once, on first use (only the swap check
        and the reasons of missing names and numbers read them)."""
        if ctx.chunks:
            return [g for c in ctx.chunks for g in LocalJudge._segments(c)]
        if ctx.segments is None:
            # deterministic: threads racing here compute the same list
            ctx.segments = [
                g for s, v in zip(ctx.sentences, ctx.sentence_vocabularies, strict=True)
                for g in Segment.split(s, v)
            ]
        return ctx.segments

    def _chunk(self, text: str) -> _Context:
        with self._lock:
            cached = self._contexts.get(text)
            if cached is not None:
                self._contexts.move_to_end(text)
                return cached
        split = sentences(text)
        read = [Sentence.of(s) for s in split]
        vocabularies = [r.vocabulary for r in read]
        negated = [r.negated for r in read]
        content = [r.content for r in read]
        denials = [r.denials for r in read]
        # windows: runs of 1..window_sentences neighbouring sentences, shortest first
        spans = [
            (i, i + n)
            for n in range(1, self.thresholds.window_sentences + 1)
            for i in range(len(split) - n + 1)
        ]
        window_vocabularies = [
            vocabularies[a] if b == a + 1 else Vocabulary.union(vocabularies[a:b])
            for a, b in spans
        ]
        whole = (0, len(split))  # a chunk of a few sentences is one of its windows
        prepared = _Context(
            text=text,
            vocabulary=window_vocabularies[spans.index(whole)] if whole in spans
            else Vocabulary.union(vocabularies),
            windows=[" ".join(split[a:b]) for a, b in spans],
            window_vocabularies=window_vocabularies,
            window_negated=[any(negated[a:b]) for a, b in spans],
            window_content=[
                list(dict.fromkeys(chain.from_iterable(content[a:b]))) for a, b in spans
            ],
            window_denials=[self._denials(denials[a:b], vocabularies[a:b]) for a, b in spans],
            sentences=split,
            sentence_vocabularies=vocabularies,
        )
        with self._lock:
            self._contexts[text] = prepared
            if len(self._contexts) > self.context_cache_size:
                self._contexts.popitem(last=False)
        return prepared


def _exact_only(claim: Claim, word: str) -> bool:
    """A word of ``claim`` MiniLM does not match: a word of comparison or order, a unit of
    time, a word written with a capital (`Claim.capitalised`)."""
    return word in COMPARISONS or word in TIME_UNITS or word in claim.capitalised


def source_says(source: VerifySource) -> str:
    """"the context says", "the reference says", "the response says"."""
    return f"the {source} says"


def _excerpt(text: str, limit: int = 160) -> str:
    """``text`` quoted for a reason, cut at ``limit`` characters."""
    text = " ".join(text.split())
    return f"“{text if len(text) <= limit else text[: limit - 1].rstrip() + '…'}”"


def quote(items: Iterable[str], limit: int = 3) -> str:
    listed = list(items)
    shown = ", ".join(f"'{w}'" for w in listed[:limit])
    return shown + (f" and {len(listed) - limit} more" if len(listed) > limit else "")
