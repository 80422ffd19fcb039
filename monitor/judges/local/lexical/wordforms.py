"""Words as the checks compare them: tokens, folded forms, stems, and words that say nothing.

A word is compared on its folded form (accents stripped, lower case,
possessive dropped) or its light stem; stopwords, discourse words and generic
verbs and nouns carry no checkable content. `Tokens` holds one text's tokens,
found and folded once for every reader.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from monitor.text.sentences import WORD_RE, words

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


#: The punctuation that ends a negator's reach (`negation.denials`).
STOPS = frozenset('.,;:!?()[]"“”\u2013\u2014')
#: What `Tokens` finds: words, and `STOPS`.
TOKEN_RE = re.compile(WORD_RE.pattern + "|[" + re.escape("".join(sorted(STOPS))) + "]", re.UNICODE)


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


#: Contracted pronouns and auxiliaries ("you're", "haven't", "i'd"): function words.
_CONTRACTION = re.compile(r"^\w+'(?:re|ve|ll|d|m|s)$|n't$")


def is_content(folded: str) -> bool:
    return (
        folded not in STOPWORDS
        and not folded.isdigit()
        and len(folded) > 1
        and not ("'" in folded and _CONTRACTION.search(folded))
    )


def content_words(text: str) -> list[str]:
    """Folded content words of ``text``, in order, without repeats."""
    return _content(map(fold, words(text)))


def _content(folded: Iterable[str]) -> list[str]:
    """`content_words` of the folded words of a text."""
    return list(dict.fromkeys(filter(is_content, folded)))


@dataclass(frozen=True)
class Tokens:
    """The tokens of one text, found and folded once for every function that reads them."""

    text: str
    #: `words` and the punctuation that ends a negator's reach (`STOPS`), folded, in order
    marks: list[str]
    #: `words` as written
    written: list[str]
    #: `words` folded
    folded: list[str]
    #: `content_words`
    content: list[str]

    @classmethod
    def of(cls, text: str) -> Tokens:
        # the words of `TOKEN_RE` are those of `WORD_RE`: no stop is a word character
        found = TOKEN_RE.findall(text)
        marks = list(map(fold, found))
        written = [t for t in found if t not in STOPS]
        folded = [f for t, f in zip(found, marks, strict=True) if t not in STOPS]
        return cls(text, marks, written, folded, _content(folded))

    def capitals(self) -> frozenset[str]:
        """`names.capitals`."""
        return frozenset(
            f
            for w, f in zip(self.written, self.folded, strict=True)
            if w.isalpha() and w.isupper() and 2 <= len(w) <= 6
        )

    def negated(self) -> bool:
        """`negation.has_negation`."""
        return not NEGATIONS.isdisjoint(self.folded) or "n't" in self.text.lower()
