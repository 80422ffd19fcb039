"""Cheap text analysis for the local judge: sentences and their parts, words, numbers, names.

Pure functions, no model. The checks here catch the commonest RAG
hallucinations without an LLM: an amount, date, number or name in a statement
that the context never mentions, and statements whose words are scattered
over the context instead of said together in one place.

A small thesaurus (`SYNONYM_GROUPS`) and a list of opposites (`OPPOSITES`)
cover what MiniLM's word vectors do not: paraphrases they rate no closer than
unrelated words, and the function words of who-gets-what ("within"/"outside").

Words are compared on a light normal form: Unicode accents stripped, lower
case, possessive dropped, a few English inflections removed (``cities`` →
``city``, ``directed`` → ``direct``). Numbers are compared by value (``$300,000``
= ``300000`` = ``0.3 million``).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from functools import lru_cache
from itertools import chain, takewhile
from operator import attrgetter
from pathlib import Path

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

#: Answer particles and discourse words: they frame a claim, they do not add to it.
DISCOURSE = frozenset(
    """
    yes yeah yep no nope sure okay ok please also just simply actually really indeed instead
    basically anyway unless whereas normally usually generally typically
    """.split()
)

#: Generic verbs and nouns, in their common forms: they hold a claim's parts together
#: ("you *use* the client", "reviews *happen* in April"); the other words carry it.
GENERIC = frozenset(
    """
    use uses used using go goes went gone going get gets got gotten getting need needs needed
    needing have has had having make makes made making take takes took taken taking give gives
    gave given giving come comes came coming put puts putting set sets setting keep keeps kept
    keeping let lets letting happen happens happened happening hold holds held holding add adds
    added adding ask asks asked asking see sees saw seen seeing show shows showed shown showing
    want wants wanted wanting try tries tried trying find finds found finding become becomes
    became becoming remain remains remained stay stays stayed thing things part parts item items
    person people's way ways kind kinds type types lot lots
    anything everything something everyone anyone someone everybody anybody somebody whatever
    whoever
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

#: Words whose opposite says the other case ("within the EU" / "outside the EU", "under
#: $50,000" / "$50,000 or more"): a clause saying one where its passage says the other
#: swapped them (most are function words, no content word of a claim).
OPPOSITES = {
    "within": ("outside",), "inside": ("outside",), "outside": ("within", "inside"),
    "under": ("over", "above", "more"), "below": ("above", "over", "more"),
    "over": ("under", "below", "less"), "above": ("below", "under", "less"),
    "before": ("after",), "after": ("before",), "minimum": ("maximum",),
    "maximum": ("minimum",), "domestic": ("international",), "international": ("domestic",),
    "online": ("paper", "offline"), "paper": ("online",), "offline": ("online",),
}

#: Units of time: a statement's "end of the week" is not the context's "next renewal" or
#: "month", however close MiniLM puts them; they match as themselves (or a thesaurus word).
TIME_UNITS = frozenset(
    """
    second seconds minute minutes hour hours day days week weeks weekend weekends month months
    quarter quarters year years decade decades morning mornings afternoon evening evenings night
    nights monday tuesday wednesday thursday friday saturday sunday weekday weekdays
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

#: (the lookahead on the first letters only lets the scan skip quickly: same matches)
_NUMBER_WORDS_RE = re.compile(
    r"\b(?=[" + "".join(sorted({w[0] for w in NUMBER_WORDS})) + r"])(?:"
    + "|".join(NUMBER_WORDS) + r")\b",
    re.IGNORECASE,
)
#: "one" as a number: only before a unit of time or count ("one month", "one-year"); elsewhere
#: it is mostly a pronoun ("the one you use")
_ONE_UNIT = re.compile(
    r"\bone(?=[\s-]+(?:business\s+|working\s+|calendar\s+|full\s+)?(?:second|minute|hour|day|"
    r"night|week|month|quarter|year|time|user|seat|device|licen[cs]e|account)s?\b)",
    re.IGNORECASE,
)
_DIGIT = re.compile(r"\d")
_PM = re.compile(r"\s?p\.?\s?m\b\.?", re.IGNORECASE)
#: A range of whole numbers ("6 to 11 years", "weeks 3–5", "between 2 and 4"): every value
#: in it is in the text
_RANGE = re.compile(r"(?<![\d.,])(\d{1,3})\s?(?:–|-|to|and)\s?(\d{1,3})(?![\d.,:])")
_SPELLED = "two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty"
_RANGE_WORDS = re.compile(rf"\b({_SPELLED})\s?(?:–|-|to|and)\s?({_SPELLED})\b", re.IGNORECASE)
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
#: (the lookahead holds every first character of a match: it only makes the scan faster)
NUMBER_RE = re.compile(
    r"(?=[\sUEG$€£¥₹\d])"
    rf"(?P<cur>{_CURRENCY})?\s?"
    r"(?P<num>\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
    r"(?P<suffix>st|nd|rd|th|s)?"
    r"(?:\s?(?P<pct>%|percent\b|per cent\b))?"
    r"(?:\s?(?P<scale>thousand|million|billion|trillion|mn|bn|[kKmMbB])\b)?"
)
WORD_RE = re.compile(r"[^\W\d_]+(?:['’][^\W\d_]+)*|\d+", re.UNICODE)
#: A leading answer particle: "No, SMS codes are not allowed." claims what follows it.
_PARTICLE = re.compile(
    r"^\s*(?:yes|yeah|yep|no|nope|sure|okay|ok)\s*[,:;.!\u2013\u2014-]+\s*", re.IGNORECASE
)
#: Clause boundaries: a semicolon, a comma before a conjunction, "and" before a subject pronoun.
_CLAUSE = re.compile(
    r"\s*;\s*"
    r"|,\s+(?:and|but|so|while|whereas|or|once|when|after|before|if|unless|because)\s+"
    r"|\s+and\s+(?=(?:it|they|you|he|she|we|this|these|there)\b)",
    re.I,
)
#: A phrase's parts (words, hyphens splitting) and the punctuation between phrases.
_PHRASE_TOKEN = re.compile(r"[\w'’]+|[^\w\s'’-]+")
#: (the lookbehind starts a match only where a word starts: same matches, no rescans)
_COMPOUND = re.compile(r"(?<![^\W\d_])[^\W\d_]+(?:-[^\W\d_]+)+")
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
        ("ment", "", 5),
        ("ation", "ate", 7),
        ("ision", "ide", 7),
        ("al", "", 6),
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
            if suffix == "es" and not w.endswith(("ches", "shes", "xes", "sses", "zes", "oes")):
                w = w[:-1]
                break
            w = w[: len(w) - len(suffix)] + repl
            break
    # "refer"/"referred" meet at "refer" (a doubled final consonant counts once)
    if len(w) > 4 and w[-1] == w[-2] and w[-1] not in "aeioulsz":
        w = w[:-1]
    # "provide"/"provided" and "merge"/"merged" meet at "provid", "merg"
    return w[:-1] if len(w) > 4 and w.endswith("e") else w


def words(text: str) -> list[str]:
    """Word tokens of ``text`` as written (letters, or digit runs)."""
    return WORD_RE.findall(text)


#: Contracted pronouns and auxiliaries ("you're", "haven't", "i'd"): function words.
_CONTRACTION = re.compile(r"^\w+'(?:re|ve|ll|d|m|s)$|n't$")


def is_content(folded: str) -> bool:
    return (folded not in STOPWORDS and not folded.isdigit() and len(folded) > 1
            and not ("'" in folded and _CONTRACTION.search(folded)))


@dataclass(frozen=True)
class _Words:
    """The tokens of one text, found and folded once for every function that reads them."""

    text: str
    #: `words` and the punctuation that ends a negator's reach (`_STOPS`), folded, in order
    marks: list[str]
    #: `words` as written
    written: list[str]
    #: `words` folded
    folded: list[str]
    #: `content_words`
    content: list[str]

    @classmethod
    def of(cls, text: str) -> _Words:
        # the words of `_DENIAL_TOKEN` are those of `WORD_RE`: no stop is a word character
        found = _DENIAL_TOKEN.findall(text)
        marks = list(map(fold, found))
        written = [t for t in found if t not in _STOPS]
        folded = [f for t, f in zip(found, marks, strict=True) if t not in _STOPS]
        return cls(text, marks, written, folded, _content(folded))

    def capitals(self) -> frozenset[str]:
        """`capitals`."""
        return frozenset(
            f for w, f in zip(self.written, self.folded, strict=True)
            if w.isalpha() and w.isupper() and 2 <= len(w) <= 6
        )

    def negated(self, *, prefixes: bool = False) -> bool:
        """`has_negation`; with ``prefixes`` also a word negated by its prefix ("unused")."""
        return (not NEGATIONS.isdisjoint(self.folded) or "n't" in self.text.lower()
                or (prefixes and any(map(negated_word, self.folded))))


@dataclass(frozen=True)
class Vocabulary:
    """The words of a text, for membership tests: folded forms and stems."""

    folded: frozenset[str]
    stems: frozenset[str]
    numbers: frozenset[float]
    #: initials of the text's phrases ("multi-factor authentication" → ``mfa``)
    acronyms: frozenset[str] = frozenset()
    #: words written in capitals (``SSO``), folded: acronyms a phrase may spell out
    capitals: frozenset[str] = frozenset()
    #: hyphenated words as written, folded (``kestrel-guest``)
    compounds: frozenset[str] = frozenset()
    #: (value, stem of a following word) of every quantity: ``14 days`` → (14.0, "day")
    quantities: frozenset[tuple[float, str]] = frozenset()

    @classmethod
    def union(cls, parts: Sequence[Vocabulary]) -> Vocabulary:
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return cls(frozenset(), frozenset(), frozenset())
        # field by field, the union of the parts' sets
        return cls(*(frozenset().union(*sets) for sets in zip(*map(_sets, parts), strict=True)))

    @classmethod
    def of(cls, text: str) -> Vocabulary:
        return cls._of(text, _Words.of(text))

    @classmethod
    def _of(cls, text: str, tokens: _Words) -> Vocabulary:
        """`of` on ``text`` tokenised already."""
        folded = set(tokens.folded)
        # split hyphenated and apostrophe forms too: "Mecklenburg-Strelitz", "rock'n'roll"
        # (a word without either is its own only part)
        folded.update(
            part for w in tokens.folded if "'" in w or "-" in w
            for part in _PARTS.split(w) if part
        )
        # a spelled number is a whole word or a part of one: without one, no scan for it
        spelled = "one" in folded or not NUMBER_WORDS.keys().isdisjoint(folded)
        counted = quantities(text, spelled=spelled)
        spanned: set[float] = set()
        spanned_units: set[tuple[float, str]] = set()
        ranged = "-" in text or "–" in text or " to " in text or " and " in text
        for m in chain(_RANGE.finditer(text) if ranged else (),
                       _RANGE_WORDS.finditer(text) if ranged and spelled else ()):
            low, high = (int(m.group(k)) if m.group(k).isdigit()
                         else int(NUMBER_WORDS[m.group(k).lower()]) for k in (1, 2))
            if low < high <= low + 50:
                values = [float(v) for v in range(low, high + 1)]
                spanned.update(values)
                # the unit after the range's end counts each value ("6 to 11 years")
                after = [stem(fold(w)) for w in words(text[m.end() : m.end() + 20])[:1]
                         if is_content(fold(w))]
                spanned_units.update((v, u) for v in values for u in after)
        return cls(
            folded=frozenset(folded),
            stems=frozenset(map(stem, folded)),
            numbers=frozenset(v for q in counted for v in q.number.values) | spanned,
            acronyms=acronyms(text),
            capitals=tokens.capitals(),
            compounds=frozenset(fold(w) for w in _COMPOUND.findall(text)) if "-" in text
            else frozenset(),
            quantities=frozenset(
                (v, unit) for q in counted for v in q.number.values for unit in q.units
            ) | spanned_units,
        )

    def has_word(self, folded_word: str) -> bool:
        return folded_word in self.folded or stem(folded_word) in self.stems


#: the sets of a `Vocabulary`, in the order of its fields
_sets = attrgetter(*(f.name for f in fields(Vocabulary)))


@dataclass(frozen=True)
class Sentence:
    """What the local judge reads of one context sentence, from a single tokenisation
    (`Vocabulary.of`, `has_negation`, `content_words` and `denials` of it)."""

    vocabulary: Vocabulary
    #: `has_negation`
    negated: bool
    #: `content_words`
    content: list[str]
    #: `denials`
    denials: tuple[frozenset[str], frozenset[str]]

    @classmethod
    def of(cls, text: str) -> Sentence:
        tokens = _Words.of(text)
        # a context sentence that says "unused" may back a claim that says "not used"
        return cls(Vocabulary._of(text, tokens), tokens.negated(prefixes=True), tokens.content,
                   _denials(tokens))


def _phrase_words(text: str) -> list[list[str]]:
    """The folded words of each stretch of ``text`` between punctuation, hyphens splitting
    (parts that start with a letter)."""
    out: list[list[str]] = [[]]
    for token in _PHRASE_TOKEN.findall(text):
        if token[0].isalpha():
            out[-1].append(fold(token))
        elif not (token[0].isalnum() or token[0] in "_'’"):  # punctuation: a new stretch
            out.append([])
    return out


def acronyms(text: str, longest: int = 5) -> frozenset[str]:
    """The initials of every `phrases` run of ``text`` (``multi-factor authentication`` → mfa)."""
    out: set[str] = set()
    for parts in _phrase_words(text):
        if len(parts) < 2:
            continue
        initials = "".join([p[0] for p in parts])
        out.update(map(initials.__getitem__, _runs(len(initials), longest)))
    return frozenset(out)


@lru_cache(maxsize=256)
def _runs(size: int, longest: int) -> tuple[slice, ...]:
    """The slices of every run of 2..``longest`` items of a sequence of ``size`` items."""
    return tuple(slice(i, i + n) for n in range(2, min(longest, size) + 1)
                 for i in range(size - n + 1))


def phrases(text: str, longest: int = 5) -> list[tuple[str, tuple[str, ...]]]:
    """Runs of 2..``longest`` words not broken by punctuation, with their initials.

    Hyphenated words count as their parts (``multi-factor`` is two words), so
    ``Multi-factor authentication`` gives ``("mfa", ("multi", "factor", "authentication"))``.
    """
    out: list[tuple[str, tuple[str, ...]]] = []
    for parts in _phrase_words(text):
        for i in range(len(parts)):
            for n in range(2, min(longest, len(parts) - i) + 1):
                run = tuple(parts[i : i + n])
                out.append(("".join(p[0] for p in run), run))
    return out


def capitals(text: str) -> frozenset[str]:
    """Folded words written in capitals, 2–6 letters: the possible acronyms of ``text``."""
    return _Words.of(text).capitals()


def negated_word(folded: str) -> bool:
    """``folded`` is a word negated by its prefix: "un" before a word of the vocabulary
    ("unused", "unpaid", "unlimited"; not "under", "universal")."""
    return len(folded) >= 6 and folded.startswith("un") and folded[2:] in _ranks()


#: Words that say the same in the policy, product and service texts RAG answers paraphrase
#: ("lost" for "expire", "sign-off" for "approval"), each group one meaning. MiniLM's word
#: vectors rate many of these pairs no closer than unrelated words of the same topic.
SYNONYM_GROUPS = (
    "expire expiry lapse lost lose forfeit forfeited void",
    "transfer move carry roll",
    "maximum max limit cap most",
    "minimum min least",
    "unused leftover remaining untaken spare",
    "following next subsequent",
    "previous prior preceding",
    "require required requirement mandatory compulsory obligatory must need needed",
    "allow allowed permit permitted",
    "approve approval approved sign authorise authorize authorised authorized",
    "refund refunded refundable reimburse reimbursed reimbursement",
    "employee employees staff worker workers personnel",
    "holiday holidays vacation leave pto",
    "salary wage wages pay compensation",
    "fee charge cost price",
    "cancel cancelled canceled terminate terminated termination",
    "purchase purchased buy bought",
    "start begin commence",
    "finish complete",
    "phone mobile cell",
    "doctor physician gp",
    "medicine medication drug",
    "car vehicle",
    "headquarters hq",
    "deadline due",
    "yearly annual annually",
    "monthly month",
    "daily day",
    "weekly week",
    "free complimentary",
    "immediately instantly",
    "help assist assistance support",
    "contact reach call ring phone",
    "delete deleted erase erased",
    "error failure",
    "monitor display screen",
)


@lru_cache(maxsize=1)
def _synonym_table() -> dict[str, frozenset[str]]:
    table: dict[str, set[str]] = {}
    for group in SYNONYM_GROUPS:
        stems = {stem(w) for w in group.split()}
        for s in stems:
            table.setdefault(s, set()).update(stems - {s})
    return {s: frozenset(others) for s, others in table.items()}


def synonyms(folded: str) -> frozenset[str]:
    """The stems of the words of `SYNONYM_GROUPS` that mean what ``folded`` means."""
    return _synonym_table().get(stem(folded), frozenset())


# --- how informative a word is


@lru_cache(maxsize=1)
def _ranks() -> dict[str, int]:
    """Frequency rank of the whole words of the vendored BERT vocabulary (``vocab.txt``).

    Past its reserved entries the WordPiece vocabulary is ordered by frequency
    in its training corpus (Wikipedia and books), so the line number is a rank.
    """
    lines = (Path(__file__).with_name("vocab.txt")).read_text(encoding="utf-8").splitlines()
    first = lines.index("the")
    return {w: i - first + 1 for i, w in enumerate(lines[first:], start=first)
            if w.isalpha() and not w.startswith("#")}


@lru_cache(maxsize=1)
def _unknown_rank() -> int:
    return max(_ranks().values()) + 1


@lru_cache(maxsize=65536)
def weight(folded: str) -> float:
    """How much a word says, ≈ its inverse document frequency: ``1 + ln(rank / 100)``, ≥ 1.

    Zipf's law makes a word's frequency ∝ 1/rank, so ln(rank) is its IDF up to a
    constant; the 100 commonest words weigh 1, a word at rank 3,000 (``printer``)
    ≈ 4.4, a word BERT's vocabulary lacks (``yubikey``) as its last word, ≈ 6.7.
    """
    ranks = _ranks()
    rank = ranks.get(folded) or ranks.get(stem(folded)) or _unknown_rank()
    return max(1.0, 1.0 + math.log(rank / 100))


# --- claims


def _name_like(written: str, folded: str) -> bool:
    """A capitalised first word that is likely a name: capitals inside ("TeenNick") or a
    word BERT's vocabulary ranks past the common ones ("Pretoria", "Hemolytic")."""
    return any(ch.isupper() for ch in written[1:]) or weight(folded) >= NAME_WEIGHT


#: `weight` from which a capitalised first word is taken for a name (rank ≈ 25,000)
NAME_WEIGHT = 6.3


def strip_particle(statement: str) -> str:
    """``statement`` without a leading answer particle ("Yes, ...", "No: ...")."""
    return _PARTICLE.sub("", statement, count=1)


def clauses(statement: str) -> list[str]:
    """The clauses of a compound statement, each checked on its own (see `Claim`)."""
    return [c for c in _CLAUSE.split(statement) if c.strip()]


@dataclass(frozen=True)
class Claim:
    """What a clause claims: its informative words, their weights, its possible acronyms."""

    text: str
    words: tuple[str, ...]
    weights: tuple[float, ...]
    capitals: frozenset[str]
    phrases: tuple[tuple[str, tuple[str, ...]], ...]
    negated: bool
    #: words written with a capital past the first word, and a first word that looks like a
    #: name (`_name_like`): matched exactly only
    capitalised: frozenset[str] = frozenset()
    #: the values of its numbers
    numbers: frozenset[float] = frozenset()

    @classmethod
    def of(cls, text: str) -> Claim:
        tokens = _Words.of(text)
        informative = tuple(
            w for w in tokens.content
            if w not in DISCOURSE and w not in GENERIC and w not in NUMBER_WORDS
        )
        return cls(
            text=text,
            words=informative,
            weights=tuple(weight(w) for w in informative),
            capitals=tokens.capitals(),
            # a phrase spelling out an acronym starts with a word that says something
            phrases=tuple(p for p in phrases(text) if p[1][0] in informative),
            negated=tokens.negated(),
            capitalised=frozenset(
                f for k, (w, f) in enumerate(zip(tokens.written, tokens.folded, strict=True))
                if w[:1].isupper() and (k or _name_like(w, f))
            ),
            numbers=frozenset(v for n in numbers(text) for v in n.values)
            if _DIGIT.search(text) or not NUMBER_WORDS.keys().isdisjoint(tokens.folded)
            else frozenset(),
        )

    @classmethod
    def unweighted(cls, folded_words: Sequence[str]) -> Claim:
        """Plain words, each weighing 1, no acronyms (the usefulness step's answer words)."""
        return cls(" ".join(folded_words), tuple(folded_words), (1.0,) * len(folded_words),
                   frozenset(), (), False)

    def missing(self, vocabulary: Vocabulary) -> list[str]:
        """The claim's words ``vocabulary`` lacks: as written, by stem, or as an acronym.

        A word written in capitals is found when it spells a phrase of the text
        (``MFA`` ↔ ``multi-factor authentication``), and a phrase's words are
        found when the text has its acronym in capitals (the reverse).
        """
        lacking = [
            w for w in self.words
            if not vocabulary.has_word(w)
            and not (w in self.capitals and w in vocabulary.acronyms)
            and vocabulary.stems.isdisjoint(synonyms(w))
        ]
        if not lacking or not self.phrases:
            return lacking
        expanded = {w for initials, run in self.phrases if initials in vocabulary.capitals
                    for w in run}
        return [w for w in lacking if w not in expanded]

    def synonymous(self, vocabulary: Vocabulary) -> list[str]:
        """The claim's words ``vocabulary`` has only as a synonym (`synonyms`): reworded."""
        return [w for w in self.words if not vocabulary.has_word(w)
                and not vocabulary.stems.isdisjoint(synonyms(w))]

    def share(self, missing: Sequence[str]) -> float:
        """The weighted share of the claim's words not in ``missing`` (1.0 without words)."""
        if not missing:
            return 1.0
        total = sum(self.weights)
        if not total:
            return 1.0
        lacking = set(missing)
        return 1.0 - sum(wt for w, wt in zip(self.words, self.weights, strict=True)
                         if w in lacking) / total


#: Where a context sentence divides into the parts that each state one fact: a semicolon
#: or colon, a comma before a conjunction, "and", "but", "while", "whereas".
_SEGMENT = re.compile(
    r"\s*[;:]\s*"
    r"|,\s+(?:and|but|so|while|whereas|or|once|when|after|before|if|unless|because)\s+"
    r"|\s+(?:but|while|whereas)\s+"
    # "and" before a number: a list of quantities ("three months for managers and one month
    # for all other staff"); elsewhere it mostly joins nouns ("SAML and OIDC")
    r"|\s+and\s+(?=(?:US\$|USD|EUR|GBP|[$€£¥₹])?\s?\d"
    r"|(?:one|two|three|four|five|six|seven|eight|nine|ten|twelve|twenty|thirty)\b)",
    re.I,
)


#: A part that starts with a number: the next item of a list of quantities.
_LIST_ITEM = re.compile(
    r"(?:US\$|USD|EUR|GBP|[$€£¥₹])?\s?\d"
    r"|(?:one|two|three|four|five|six|seven|eight|nine|ten|twelve|twenty|thirty)\b",
    re.I,
)


def segments(sentence: str) -> list[str]:
    """The parts of ``sentence`` that each state one fact ("three months for managers" |
    "one month for all other staff"): where a swapped name or number shows."""
    return [p for p in _SEGMENT.split(sentence) if words(p)]


@dataclass(frozen=True)
class Segment:
    """One part of a context sentence (`segments`): its words, names and quantities."""

    text: str
    vocabulary: Vocabulary
    #: `names`, as written
    names: tuple[str, ...]
    #: `quantities` with one unit word
    quantities: tuple[Quantity, ...]
    #: a part that goes on a list of quantities ("… EUR 60 for trips within the EU | EUR 80
    #: for trips outside the EU") shares the words the list started with ("daily meal
    #: allowance"): those of the sentence's first part before its first number
    shared: Vocabulary | None = None

    @classmethod
    def split(cls, sentence: str, vocabulary: Vocabulary | None = None) -> list[Segment]:
        """The `segments` of ``sentence``, names found in the whole sentence (a name that
        starts a part is still a name); ``vocabulary``: the sentence's, reused when the
        sentence is one part."""
        parts = segments(sentence)
        found = names(sentence) if any(ch.isupper() for ch in sentence[1:]) else []
        out: list[Segment] = []
        shared: Vocabulary | None = None
        for k, part in enumerate(parts):
            said = vocabulary if vocabulary is not None and len(parts) == 1 \
                else Vocabulary.of(part)
            counted = tuple(quantities(part, reach=1)) if said.numbers else ()
            goes_on = k > 0 and bool(_LIST_ITEM.match(part))
            if goes_on and shared is None:
                first = _numbers(parts[0])
                head = parts[0][: min(end - len(n.surface) for n, end in first)] if first \
                    else ""
                shared = Vocabulary.of(head)
            out.append(cls(part, said, tuple(n for n in found if n in part), counted,
                           shared if goes_on else None))
        return out


# --- numbers


@dataclass(frozen=True)
class Number:
    """A number as written, its kind for reasons, and the values it may stand for."""

    surface: str
    kind: str  # amount | percentage | year | date | number
    values: frozenset[float]


def numbers(text: str) -> list[Number]:
    """Numbers in ``text``: amounts, percentages, years, other figures (ordinals as numbers)."""
    return [number for number, _ in _numbers(text)]


def _numbers(text: str, *, spelled: bool = True) -> list[tuple[Number, int]]:
    """`numbers` with the end offset of each in ``text`` (numerals only unless ``spelled``)."""
    return list(_scan_numbers(text, spelled))


@lru_cache(maxsize=8192)
def _scan_numbers(text: str, spelled: bool) -> tuple[tuple[Number, int], ...]:
    """`_numbers`, once per text (the verify step reads a clause's numbers several times)."""
    return tuple(_find_numbers(text, spelled=spelled))


def _find_numbers(text: str, *, spelled: bool = True) -> list[tuple[Number, int]]:
    found: list[tuple[Number, int]] = []
    for m in _NUMBER_WORDS_RE.finditer(text) if spelled else ():
        # IGNORECASE also matches Unicode case variants ("ſix"): not number words
        value = NUMBER_WORDS.get(m.group(0).lower())
        if value is not None:
            found.append((Number(m.group(0), "number", frozenset({value})), m.end()))
    for m in _ONE_UNIT.finditer(text) if spelled else ():
        found.append((Number(m.group(0), "number", frozenset({1.0})), m.end()))
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
        if 1 <= value <= 11 and _PM.match(text, m.end()):
            values.add(value + 12)  # "2 p.m." is 14:00
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
        found.append((Number(m.group(0).strip(), kind, frozenset(values)), m.end()))
    return found


@dataclass(frozen=True)
class Quantity:
    """A number with the stems of the content words right after it (its unit)."""

    number: Number
    units: tuple[str, ...]
    #: the number and its first unit word as written ("3 days")
    surface: str


def quantities(text: str, reach: int = 2, *, spelled: bool = True) -> list[Quantity]:
    """Numbers with the stems of the (up to ``reach``) content words right after them.

    Only words that follow the number directly count (``5 business days``; not
    ``10% for each``).

    ``retried 3 times over 7 days`` → 3 (``time``), 7 (``day``). The verify step
    uses them to tell ``3 days`` from ``14 days`` in a context that also says
    ``3 times``. ``spelled=False`` skips number words: for a text known to have none.
    """
    out: list[Quantity] = []
    for number, end in _numbers(text, spelled=spelled):
        after = list(takewhile(lambda w: is_content(fold(w)), words(text[end : end + 40])[:reach]))
        units = tuple(stem(fold(w)) for w in after)
        surface = f"{number.surface} {after[0]}" if after else number.surface
        out.append(Quantity(number, units, surface))
    return out


def _near_month(text: str, start: int, end: int) -> bool:
    before = text[max(0, start - 12) : start].lower().split()
    after = text[end : end + 12].lower().split()
    near = (before[-1:] if before else []) + (after[:1] if after else [])
    return any(w.strip(".,") in MONTHS for w in near)


# --- names


#: A word of a name: letters, inner apostrophes, periods and hyphens, a trailing period.
_NAME_TOKEN = re.compile(r"[^\W\d_]+(?:['’.\-][^\W\d_]+)*\.?")
#: Punctuation that ends a name.
_NAME_BREAK = re.compile(r"[,;:()\"“”]")


def _cut_number(m: re.Match[str]) -> str:
    """A number ends a name ("in 2000 Copenhagen"), unless it is part of one ("Amazon S3")."""
    start = m.start("num")
    if not m.group(0).strip() or (start > 0 and m.string[start - 1].isalpha()):
        return m.group(0)
    return " , "


#: Words of comparison or order that say the same as another one ("the next year" is "the
#: following year").
SAME_COMPARISON = {"next": "following", "following": "next", "previous": "prior",
                   "prior": "previous", "former": "previous"}


def names(text: str) -> list[str]:
    """Capitalised word runs that look like names (``Helen Byron``, ``US``, ``Aubonne``);
    see `_names`."""
    return list(_names(text))


@lru_cache(maxsize=8192)
def _names(text: str) -> tuple[str, ...]:
    """Capitalised word runs that look like names (``Helen Byron``, ``US``, ``Aubonne``).

    A capitalised word that only starts the sentence, and is a stopword or the
    only capitalised word of its run, is not taken as a name: it is checked as
    an ordinary content word instead.
    """
    spans: list[str] = []
    if _DIGIT.search(text):  # (every number has a digit)
        text = NUMBER_RE.sub(_cut_number, text)
    tokens = list(_NAME_TOKEN.finditer(text))
    run: list[str] = []
    run_starts_sentence = False
    prev_end = 0
    for i, m in enumerate(tokens):
        token = m.group(0).rstrip(".")
        gap = text[prev_end : m.start()]
        before = gap.rstrip()[-1:] or (tokens[i - 1].group(0)[-1:] if i else "")
        sentence_start = i == 0 or before in {".", "!", "?", ":"}
        capital = token[:1].isupper()
        breaks = bool(_NAME_BREAK.search(gap))
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
    return tuple(spans)


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
    return _content(map(fold, words(text)))


def _content(folded: Iterable[str]) -> list[str]:
    """`content_words` of the folded words of a text."""
    return list(dict.fromkeys(filter(is_content, folded)))


def coverage(wanted: Sequence[str], vocabulary: Vocabulary) -> float:
    """Share of ``wanted`` (folded words) present in ``vocabulary``; 1.0 when nothing is wanted."""
    if not wanted:
        return 1.0
    return sum(vocabulary.has_word(w) for w in wanted) / len(wanted)


def has_negation(text: str) -> bool:
    return _Words.of(text).negated()


#: The punctuation that ends a negator's reach (`denials`).
_STOPS = frozenset(".,;:!?()[]\"“”\u2013\u2014")
#: Tokens for `denials`: words, and `_STOPS`.
_DENIAL_TOKEN = re.compile(
    WORD_RE.pattern + "|[" + re.escape("".join(sorted(_STOPS))) + "]", re.UNICODE
)
#: Function words a negator may reach past to the words it denies: "not *be* allowed",
#: "no *other* ...", "without *a* receipt", "none *of the* contractors".
_DENIAL_SKIP = frozenset(
    "a an the any be been being have has had ever always yet even to get got of".split()
)
#: Words after which a negator bounds instead of denying: "not only", "not just".
_DENIAL_BOUND = frozenset("only just merely simply".split())


def _is_negator(folded: str) -> bool:
    return folded in NEGATIONS or folded.endswith("n't")


def denials(text: str, reach: int = 3) -> tuple[frozenset[str], frozenset[str]]:
    """(stems a negator of ``text`` denies, stems of its other content words).

    A negator (`NEGATIONS`, ``-n't``) denies the run of up to ``reach`` content
    words that follows it, past a few function words (`_DENIAL_SKIP`), in the
    same stretch between punctuation: ``SMS codes are not allowed as a second
    factor`` denies ``allowed``; ``After 14 days without payment the account
    ...`` denies ``payment``. Not a denial: a bound (``no more than``, ``no later
    than 30 days``, ``not only``) and ``or not`` (``whether or not``).
    """
    return _denials(_Words.of(text), reach)


def _denials(found: _Words, reach: int = 3) -> tuple[frozenset[str], frozenset[str]]:
    """`denials` of a text tokenised already."""
    tokens = found.marks
    if NEGATIONS.isdisjoint(tokens) and "n't" not in " ".join(tokens):  # no negator at all
        return frozenset(), frozenset(map(stem, found.content))
    denied: set[str] = set()
    governed: set[int] = set()
    for i, token in enumerate(tokens):
        if not _is_negator(token) or (i and tokens[i - 1] == "or"):
            continue
        j = i + 1
        while j < len(tokens) and tokens[j] in _DENIAL_SKIP:
            j += 1
        if j < len(tokens) and tokens[j] in _DENIAL_BOUND:
            continue
        run: list[int] = []
        while j < len(tokens) and len(run) < reach and is_content(tokens[j]) \
                and not _is_negator(tokens[j]):
            run.append(j)
            j += 1
        if j < len(tokens) and tokens[j] == "than":
            continue  # a bound: "no later than", "not longer than"
        governed.update(run)
        denied.update(stem(tokens[k]) for k in run)
    asserted = {stem(t) for k, t in enumerate(tokens)
                if k not in governed and is_content(t) and not _is_negator(t)}
    return frozenset(denied), frozenset(asserted)


def quote(items: Iterable[str], limit: int = 3) -> str:
    listed = list(items)
    shown = ", ".join(f"'{w}'" for w in listed[:limit])
    return shown + (f" and {len(listed) - limit} more" if len(listed) > limit else "")
