"""Lexical evidence: what a claim says that no context (and not the question) says.

The support model reads a claim against a few windows; this module reads it
against every word of the record. Per claim it finds the content words, the
numbers (by value: "$300,000" = "300000", "twenty-five" = 25, "a week" = 7
days, a duration inside a stated range) and the names that occur nowhere in the
contexts or the question. `monitor.judges.local.combiner` turns these gaps and
the model's logit into one support probability. See docs/local-judge.md.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import snowballstemmer

from monitor.text.numerals import DIGIT, NUMBER_WORDS, located_numbers, numbers
from monitor.text.sentences import WORD_RE

#: Words that carry no checkable content: articles, pronouns, auxiliaries, prepositions,
#: conjunctions, and answer particles.
FUNCTION_WORDS = frozenset(
    """
    a about above after again against all also although am an and any are around as at be
    because been before being below between both but by can could did do does doing done down
    during each either else even ever every few for from further get gets got had has have
    having he her here hers him his how however i if in into is it its itself just less like
    may me might more most much must my no nor not now of off on once one only onto or other
    our ours out over own per please quite rather really same shall she should since so some
    such than that the their theirs them then there these they this those though through thus
    to too under until up upon us very was we well were what when where whether which while
    who whom whose why will with within would yet you your yours yes yeah okay ok sure
    s t d ll m re ve
    """.split()
)

#: Durations in days, for "a week", "two months", "5-7 business days".
_UNIT_DAYS = {
    "minute": 1 / 1440,
    "hour": 1 / 24,
    "day": 1.0,
    "night": 1.0,
    "week": 7.0,
    "fortnight": 14.0,
    "month": 30.0,
    "quarter": 91.0,
    "year": 365.0,
}
_SPELLED = {"a": 1.0, "an": 1.0, "one": 1.0, "half": 0.5, "couple": 2.0}
_DURATION = re.compile(
    r"\b(?P<a>\d+(?:\.\d+)?|a|an|one|[a-z]+(?:-[a-z]+)?)"
    r"(?:\s*(?:-|–|to|or)\s*(?P<b>\d+(?:\.\d+)?|[a-z]+(?:-[a-z]+)?))?"
    r"(?:\s+(?:business|working|calendar|full|more))?[\s-]+"
    r"(?P<unit>minute|hour|day|night|week|fortnight|month|quarter|year)s?\b",
    re.IGNORECASE,
)
#: Words that make a duration approximate ("about a week", "roughly two months").
_ROUGHLY = re.compile(r"\b(?:about|around|roughly|approximately|nearly|almost|under|up to)\s+$")
#: How far an approximate duration may be from a stated one (a week for 5-7 days).
ROUGH = 0.3
#: The word after a number that only says what the number counts in: said when the number is.
_UNIT = re.compile(r"\s+(dollars?|euros?|pounds?|cents?|percent|per\s+cent)\b", re.IGNORECASE)


@lru_cache(maxsize=65536)
def fold(word: str) -> str:
    """Accents stripped, lower case, the possessive dropped: ``Müller's`` → ``muller``."""
    text = unicodedata.normalize("NFKD", word.replace("’", "'"))
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    return text.removesuffix("'s").strip("'")


#: Snowball's English stemmer (Porter2), one per thread (a stemmer keeps state while it works)
_STEMMERS = threading.local()


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A folded word's stem by Snowball's English (Porter2) stemmer: plural, past, -ing and
    -ly forms of one word meet ("refunds"/"refunded"/"refunding" → "refund", "cancelled" →
    "cancel"), and its exceptions keep apart words that only look alike ("news" ≠ "new")."""
    stemmer = getattr(_STEMMERS, "english", None)
    if stemmer is None:
        stemmer = _STEMMERS.english = snowballstemmer.stemmer("english")
    return str(stemmer.stemWord(word))


def content(text: str) -> list[str]:
    """The content words of ``text``, folded, in order (no function words, no digits)."""
    found = []
    for w in WORD_RE.findall(text):
        f = fold(w)
        if (
            len(f) > 1
            and not f.isdigit()
            and f not in FUNCTION_WORDS
            and f not in NUMBER_WORDS
            and "'" not in f
        ):
            found.append(f)
    return found


def names(text: str) -> list[str]:
    """Capitalised words not at the start of a sentence or clause, folded (names, brands,
    places), and all-capital acronyms anywhere."""
    found = []
    for m in WORD_RE.finditer(text):
        w = m.group(0)
        if not w[:1].isupper() or fold(w) in FUNCTION_WORDS:
            continue
        before = text[: m.start()].rstrip()
        starts = not before or before[-1] in '.!?:;"“(-–—'
        if not starts or (len(w) > 1 and w.isupper()):
            found.append(fold(w))
    return found


def _value(word: str | None) -> float | None:
    if word is None:
        return None
    word = word.lower()
    if word in _SPELLED:
        return _SPELLED[word]
    try:
        return float(word)
    except ValueError:
        pass
    found = numbers(word)
    return max(found[0].values) if len(found) == 1 else None


@dataclass(frozen=True)
class Duration:
    """A stated duration, as a range of days, and the words it was written with."""

    low: float
    high: float
    rough: bool
    words: tuple[str, ...]

    def matches(self, other: Duration) -> bool:
        """``self`` (a claim's) says what ``other`` (a context's) says: inside its range, or
        near it when ``self`` is approximate."""
        slack = ROUGH if self.rough else 0.0
        return other.low * (1 - slack) - 1e-9 <= self.low and self.high <= other.high * (1 + slack)


def durations(text: str) -> list[Duration]:
    """The durations ``text`` states ("about a week", "5-7 business days", "two months")."""
    found = []
    for m in _DURATION.finditer(text):
        a, b = _value(m.group("a")), _value(m.group("b"))
        if a is None:
            continue
        days = _UNIT_DAYS[m.group("unit").lower()]
        low, high = a * days, (b if b is not None else a) * days
        rough = bool(_ROUGHLY.search(text[: m.start()].lower()))
        said = tuple(fold(w) for w in WORD_RE.findall(m.group(0)))
        found.append(Duration(min(low, high), max(low, high), rough, said))
    return found


@dataclass(frozen=True)
class Gaps:
    """What one claim says that the record's evidence does not."""

    #: the claim's content words (folded), and those no context or the question has
    words: tuple[str, ...]
    missing_words: tuple[str, ...]
    #: the claim's numbers (as written) whose value no context or the question states
    missing_numbers: tuple[str, ...]
    #: the claim's names (folded) no context or the question has
    missing_names: tuple[str, ...]
    #: the claim's words occur in this order, one after another, in a context
    copied: bool = False

    @property
    def missing_share(self) -> float:
        """The share of the claim's content words missing (0 for a claim without any)."""
        return len(self.missing_words) / len(self.words) if self.words else 0.0

    def decisive(self) -> list[str]:
        """The missing numbers and names, then the other missing words, once each."""
        return list(
            dict.fromkeys([*self.missing_numbers, *self.missing_names, *self.missing_words])
        )


@dataclass(frozen=True)
class Evidence:
    """Every word, number, duration and name of a record's contexts and question."""

    stems: frozenset[str]
    folded: frozenset[str]
    values: frozenset[float]
    durations: tuple[Duration, ...]
    #: each text's words, folded, one space apart (for copies)
    runs: tuple[str, ...] = ()
    #: each number's value → the capitalised words (folded) of the sentences stating it
    #: (`_stated_with`): what the texts state it for
    subjects: tuple[tuple[float, frozenset[str]], ...] = ()
    #: each number's value → how a text first writes it in figures ("25", "$300")
    figures: tuple[tuple[float, str], ...] = ()

    @classmethod
    def of(cls, texts: Iterable[str]) -> Evidence:
        stems: set[str] = set()
        folded: set[str] = set()
        values: set[float] = set()
        spans: list[Duration] = []
        runs: list[str] = []
        subjects: dict[float, set[str]] = {}
        figures: dict[float, str] = {}
        for text in texts:
            said = [fold(w) for w in WORD_RE.findall(text)]
            runs.append(f" {' '.join(said)} ")
            folded.update(said)
            stems.update(stem(w) for w in said)
            for n in numbers(text):
                values.update(n.values)
                if DIGIT.search(n.surface):
                    for v in n.values:
                        figures.setdefault(v, n.surface)
            spans.extend(durations(text))
            for value, near in _stated_with(text):
                subjects.setdefault(value, set()).update(near)
        return cls(
            frozenset(stems),
            frozenset(folded),
            frozenset(values),
            tuple(spans),
            tuple(runs),
            tuple((v, frozenset(near)) for v, near in subjects.items()),
            tuple(figures.items()),
        )

    def in_figures(self, claim: str) -> str:
        """``claim`` with each spelled number whose value the texts state in figures written
        as they write it ("twenty-five" → "25", "three hundred" → "$300"): the support model
        does not read a spelled number as the figure. Nothing else is rewritten (a duration
        stays as the answer wrote it: written the contexts' way, it hid what else the claim
        got wrong; docs/benchmarks.md "The claims the model reads")."""
        figures = dict(self.figures)
        for n in numbers(claim):
            if DIGIT.search(n.surface):
                continue
            stated = sorted(v for v in n.values if v in figures)
            if stated:
                claim = claim.replace(n.surface, figures[stated[0]], 1)
        return claim

    def gaps(self, claim: str) -> Gaps:
        """What ``claim`` says that this evidence does not (see `Gaps`)."""
        matched: set[str] = set()
        for d in durations(claim):
            if any(d.matches(c) for c in self.durations):
                matched.update(d.words)
        missing_numbers = []
        # the names of the claim the texts know: a number must be stated beside one of them
        known = {n for n in names(claim) if n in self.folded}
        subjects = dict(self.subjects)
        for n, end in located_numbers(claim):
            common = n.values & self.values
            if common and (not known or any(known & subjects.get(v, frozenset()) for v in common)):
                unit = _UNIT.match(claim, end)  # "three hundred dollars" for "$300"
                if unit:
                    matched.add(fold(unit.group(1)))
            elif fold(n.surface) not in matched:
                missing_numbers.append(n.surface)
        said = content(claim)
        missing = tuple(
            w
            for w in said
            if w not in matched and w not in self.folded and stem(w) not in self.stems
        )
        unnamed = tuple(n for n in dict.fromkeys(names(claim)) if n not in self.folded)
        run = " ".join(fold(w) for w in WORD_RE.findall(claim))
        copied = bool(run) and any(f" {run} " in r for r in self.runs)
        return Gaps(tuple(said), missing, tuple(missing_numbers), unnamed, copied)


#: Where a text's sentences end (a light cut: only which names stand near a number depends on it).
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n+")


def _stated_with(text: str) -> list[tuple[float, list[str]]]:
    """Each number's value in ``text`` with the capitalised words (folded) of the sentence
    that states it, and of the sentence before when this one names nothing after its first
    word ("It costs $20." reads the one before)."""
    out: list[tuple[float, list[str]]] = []
    sentences = _SENTENCE_END.split(text)
    for k, sentence in enumerate(sentences):
        found = numbers(sentence)
        if not found:
            continue
        capitals = [w for w in WORD_RE.findall(sentence) if w[:1].isupper()]
        if k and not capitals[1:]:
            capitals += [w for w in WORD_RE.findall(sentences[k - 1]) if w[:1].isupper()]
        near = [fold(w) for w in capitals]
        out.extend((v, near) for n in found for v in n.values)
    return out


class EvidenceCache:
    """`Evidence` of the last ``size`` records' texts, safe to share between threads (the
    steps of one record read the same contexts several times)."""

    def __init__(self, size: int = 256) -> None:
        self.size = size
        self._found: OrderedDict[tuple[str, ...], Evidence] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, texts: Sequence[str]) -> Evidence:
        key = tuple(texts)
        with self._lock:
            known = self._found.get(key)
            if known is not None:
                self._found.move_to_end(key)
                return known
        found = Evidence.of(key)
        with self._lock:
            self._found[key] = found
            while len(self._found) > self.size:
                self._found.popitem(last=False)
        return found
