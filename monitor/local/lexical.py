"""Cheap text analysis for the local judge: sentences, words, numbers and names.

Pure functions, no model. The checks here catch the commonest RAG
hallucinations without an LLM: an amount, date, number or name in a statement
that the context never mentions, and statements whose words are scattered
over the context instead of said together in one place.

Words are compared on a light normal form: Unicode accents stripped, lower
case, possessive dropped, a few English inflections removed (``cities`` →
``city``, ``directed`` → ``direct``). Numbers are compared by value (``$300,000``
= ``300000`` = ``0.3 million``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache

#: English function words, question words, auxiliaries and a few generic verbs that carry
#: no checkable content of their own.
STOPWORDS = frozenset(
    """
    a about above after again against all also although am an and another any are around as
    at be because been before being below between both but by can could did do does doing done
    down during each either else even ever every few for from further get gets got had has have
    having he her here hers herself him himself his how however i if in into is it its itself
    just least less like made make many may me might more most much must my myself neither nor
    not now of off on once one only onto or other others our ours ourselves out over own per
    quite rather same several shall she should since so some such than that the their theirs
    them themselves then there these they this those though through thus to too toward towards
    under until up upon us very was we were what whatever when where whether which while who
    whom whose why will with within without would yet you your yours yourself yourselves
    s t d ll m re ve n't also well called known named based
    """.split()
)

#: Words that turn a statement into its opposite.
NEGATIONS = frozenset("not no never none nobody nothing neither nor cannot without n't".split())

#: Words of degree and order: a statement using one claims a comparison, which only the
#: same word in the context supports (never a look-alike: ``earlier`` is not ``early``).
COMPARISONS = frozenset(
    """
    first last earlier earliest later latest before after older oldest younger youngest
    larger largest smaller smallest bigger biggest longer longest shorter shortest higher
    highest lower lowest more most fewer fewest less least greater greatest better best worse
    worst only sole single previous next former latter
    """.split()
)

#: Spelled numbers taken as values ("one" is left out: it is mostly a pronoun).
NUMBER_WORDS = {
    w: float(i)
    for i, w in enumerate(
        "zero _ two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
    if w != "_"
} | {"thirty": 30.0, "forty": 40.0, "fifty": 50.0, "sixty": 60.0, "seventy": 70.0,
     "eighty": 80.0, "ninety": 90.0, "hundred": 100.0, "dozen": 12.0,
     "twice": 2.0, "double": 2.0, "triple": 3.0}

_NUMBER_WORDS_RE = re.compile(r"\b(?:" + "|".join(NUMBER_WORDS) + r")\b", re.IGNORECASE)
_DIGIT = re.compile(r"\d")
_PARTS = re.compile(r"['-]")

MONTHS = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)

_SCALES = {
    "thousand": 1e3,
    "k": 1e3,
    "million": 1e6,
    "m": 1e6,
    "mn": 1e6,
    "billion": 1e9,
    "bn": 1e9,
    "b": 1e9,
    "trillion": 1e12,
}

_CURRENCY = r"(?:US\$|USD|EUR|GBP|[$€£¥₹])"
NUMBER_RE = re.compile(
    rf"(?P<cur>{_CURRENCY})?\s?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<suffix>st|nd|rd|th|s)?"
    r"(?:\s?(?P<pct>%|percent\b|per cent\b))?"
    r"(?:\s?(?P<scale>thousand|million|billion|trillion|mn|bn|[kKmMbB])\b)?"
)
WORD_RE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*|\d+", re.UNICODE)
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")


# --- words


@lru_cache(maxsize=65536)
def fold(word: str) -> str:
    """Accents stripped, lower case, possessive dropped: ``Rodríguez's`` → ``rodriguez``."""
    text = unicodedata.normalize("NFKD", word)
    text = "".join(ch for ch in text if not unicodedata.combining(ch)).lower()
    text = text.replace("’", "'")
    if text.endswith("'s"):
        text = text[:-2]
    return text.strip("'")


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A deliberately light English stemmer on a folded word (precision over recall)."""
    w = word
    if len(w) <= 3 or w.isdigit():
        return w
    for suffix, repl, min_len in (
        ("ies", "y", 4),
        ("sses", "ss", 4),
        ("ness", "", 5),
        ("ments", "ment", 5),
        ("ings", "", 5),
        ("ing", "", 5),
        ("edly", "", 5),
        ("ied", "y", 4),
        ("ed", "", 5),
        ("es", "", 5),
        ("s", "", 4),
        ("ly", "", 5),
    ):
        if w.endswith(suffix) and len(w) - len(suffix) + len(repl) >= min_len - 1:
            if suffix == "s" and w.endswith(("ss", "us", "is")):
                return w
            if suffix == "es" and not w.endswith(("ches", "shes", "xes", "sses", "zes")):
                w = w[:-1]
                break
            w = w[: len(w) - len(suffix)] + repl
            break
    # "provide"/"provided" and "merge"/"merged" meet at "provid", "merg"
    return w[:-1] if len(w) > 4 and w.endswith("e") else w


def words(text: str) -> list[str]:
    """Word tokens of ``text`` as written (letters, or digit runs)."""
    return WORD_RE.findall(text)


def is_content(folded: str) -> bool:
    return folded not in STOPWORDS and not folded.isdigit() and len(folded) > 1


@dataclass(frozen=True)
class Vocabulary:
    """The words of a text, for membership tests: folded forms and stems."""

    folded: frozenset[str]
    stems: frozenset[str]
    numbers: frozenset[float]

    @classmethod
    def union(cls, parts: Sequence[Vocabulary]) -> Vocabulary:
        return cls(
            folded=frozenset().union(*(p.folded for p in parts)),
            stems=frozenset().union(*(p.stems for p in parts)),
            numbers=frozenset().union(*(p.numbers for p in parts)),
        )

    @classmethod
    def of(cls, text: str) -> Vocabulary:
        folded = {fold(w) for w in words(text)}
        # split hyphenated and apostrophe forms too: "Mecklenburg-Strelitz", "rock'n'roll"
        folded |= {part for w in folded for part in _PARTS.split(w) if part}
        return cls(
            folded=frozenset(folded),
            stems=frozenset(stem(w) for w in folded),
            numbers=frozenset(v for n in numbers(text) for v in n.values),
        )

    def has_word(self, folded_word: str) -> bool:
        return folded_word in self.folded or stem(folded_word) in self.stems


# --- numbers


@dataclass(frozen=True)
class Number:
    """A number as written, its kind for reasons, and the values it may stand for."""

    surface: str
    kind: str  # amount | percentage | year | date | number
    values: frozenset[float]


def numbers(text: str) -> list[Number]:
    """Numbers in ``text``: amounts, percentages, years, other figures (ordinals as numbers)."""
    found: list[Number] = []
    for m in _NUMBER_WORDS_RE.finditer(text):
        found.append(Number(m.group(0), "number", frozenset({NUMBER_WORDS[m.group(0).lower()]})))
    if not _DIGIT.search(text):
        return found
    for m in NUMBER_RE.finditer(text):
        start = m.start("num")
        if start > 0 and (text[start - 1].isalpha() or text[start - 1] in "_"):
            continue  # part of an identifier like "A4", "B52"
        raw = m.group("num").replace(",", "")
        try:
            value = float(raw)
        except ValueError:  # pragma: no cover - the regex only matches numerals
            continue
        values = {value}
        scale_word = (m.group("scale") or "").lower()
        if scale_word and (scale_word in {"thousand", "million", "billion", "trillion"}
                           or m.group("cur")):
            values = {value * _SCALES[scale_word]}
        if m.group("cur"):
            kind = "amount"
        elif m.group("pct"):
            kind = "percentage"
        elif 1000 <= value <= 2100 and raw.isdigit() and len(raw) == 4:
            kind = "year"
        elif _near_month(text, m.start(), m.end()):
            kind = "date"
        else:
            kind = "number"
        found.append(Number(m.group(0).strip(), kind, frozenset(values)))
    return found


def _near_month(text: str, start: int, end: int) -> bool:
    before = text[max(0, start - 12) : start].lower().split()
    after = text[end : end + 12].lower().split()
    near = (before[-1:] if before else []) + (after[:1] if after else [])
    return any(w.strip(".,") in MONTHS for w in near)


# --- names


def names(text: str) -> list[str]:
    """Capitalised word runs that look like names (``Helen Byron``, ``US``, ``Aubonne``).

    A capitalised word that only starts the sentence, and is a stopword or the
    only capitalised word of its run, is not taken as a name: it is checked as
    an ordinary content word instead.
    """
    spans: list[str] = []
    text = NUMBER_RE.sub(lambda m: " , " if m.group(0).strip() else m.group(0), text)
    tokens = list(re.finditer(r"[^\W\d_]+(?:['’.\-][^\W\d_]+)*\.?", text))
    run: list[str] = []
    run_starts_sentence = False
    prev_end = 0
    for i, m in enumerate(tokens):
        token = m.group(0).rstrip(".")
        gap = text[prev_end : m.start()]
        before = gap.rstrip()[-1:] or (tokens[i - 1].group(0)[-1:] if i else "")
        sentence_start = i == 0 or before in {".", "!", "?", ":"}
        capital = token[:1].isupper()
        breaks = bool(re.search(r"[,;:()\"“”]", gap))
        if run and (not capital or breaks):
            spans.extend(_close_run(run, run_starts_sentence))
            run = []
        if capital:
            if not run:
                run_starts_sentence = sentence_start
            run.append(token)
        prev_end = m.end()
    if run:
        spans.extend(_close_run(run, run_starts_sentence))
    return spans


def _close_run(run: list[str], starts_sentence: bool) -> list[str]:
    while run and fold(run[0]) in STOPWORDS:
        run = run[1:]
        starts_sentence = False if not run else starts_sentence
    if not run:
        return []
    if starts_sentence and len(run) == 1 and not run[0].isupper():
        return []
    return [" ".join(run)]


# --- sentences


def sentences(text: str, *, long_clause: int = 25) -> list[str]:
    """Sentences of ``text`` (nupunkt), long compound sentences also split at ``;``.

    A sentence of more than ``long_clause`` words is split at semicolons when
    every part keeps at least three words.
    """
    out: list[str] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        for sentence in _punkt(line):
            parts = [p.strip() for p in sentence.split(";")]
            if (
                len(parts) > 1
                and len(words(sentence)) > long_clause
                and all(len(words(p)) >= 3 for p in parts)
            ):
                out.extend(parts)
            elif sentence.strip():
                out.append(sentence.strip())
    return out


def _punkt(text: str) -> list[str]:
    try:
        import nupunkt
    except ImportError:  # pragma: no cover - nupunkt is a dependency; regex as a fallback
        return [s for s in _SENTENCE_SPLIT.split(text) if s.strip()]
    return [s if isinstance(s, str) else s[0] for s in nupunkt.sent_tokenize(text)]


def content_words(text: str) -> list[str]:
    """Folded content words of ``text``, in order, without repeats."""
    seen: dict[str, None] = {}
    for w in words(text):
        f = fold(w)
        if is_content(f):
            seen.setdefault(f, None)
    return list(seen)


def coverage(wanted: Sequence[str], vocabulary: Vocabulary) -> float:
    """Share of ``wanted`` (folded words) present in ``vocabulary``; 1.0 when nothing is wanted."""
    if not wanted:
        return 1.0
    return sum(vocabulary.has_word(w) for w in wanted) / len(wanted)


def has_negation(text: str) -> bool:
    folded = {fold(w) for w in words(text)}
    return bool(folded & NEGATIONS) or "n't" in text.lower()


def quote(items: Iterable[str], limit: int = 3) -> str:
    listed = list(items)
    shown = ", ".join(f"'{w}'" for w in listed[:limit])
    return shown + (f" and {len(listed) - limit} more" if len(listed) > limit else "")
