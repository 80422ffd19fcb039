"""Names: capitalised word runs, and the acronyms a text's phrases spell.

``Helen Byron``, ``US`` and ``Amazon S3`` are names; a capitalised word that
only starts a sentence is not. ``SSO`` is the acronym of "Single sign-on",
``MFA`` of "multi-factor authentication".
"""

from __future__ import annotations

import re
from functools import lru_cache

from monitor.judges.local.lexical.thesaurus import weight
from monitor.judges.local.lexical.wordforms import STOPWORDS, Tokens, fold
from monitor.text.numerals import DIGIT, NUMBER_RE

#: A word of a name: letters, inner apostrophes, periods and hyphens, a trailing period.
_NAME_TOKEN = re.compile(r"[^\W\d_]+(?:['’.\-][^\W\d_]+)*\.?")
#: Punctuation that ends a name.
_NAME_BREAK = re.compile(r"[,;:()\"“”]")
#: What separates the parts of a name ("Helen Byron", "U.S.", "Mecklenburg-Strelitz").
NAME_PARTS = re.compile(r"[\s.\-]+")


def _cut_number(m: re.Match[str]) -> str:
    """A number ends a name ("in 2000 Copenhagen"), unless it is part of one ("Amazon S3")."""
    start = m.start("num")
    if not m.group(0).strip() or (start > 0 and m.string[start - 1].isalpha()):
        return m.group(0)
    return " , "


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
    if DIGIT.search(text):  # (every number has a digit)
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


def name_like(written: str, folded: str) -> bool:
    """A capitalised first word that is likely a name: capitals inside ("TeenNick") or a
    word BERT's vocabulary ranks past the common ones ("Pretoria", "Hemolytic")."""
    return any(ch.isupper() for ch in written[1:]) or weight(folded) >= NAME_WEIGHT


#: `weight` from which a capitalised first word is taken for a name (rank ≈ 25,000)
NAME_WEIGHT = 6.3


#: A phrase's parts (words, hyphens splitting) and the punctuation between phrases.
_PHRASE_TOKEN = re.compile(r"[\w'’]+|[^\w\s'’-]+")


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
    return tuple(
        slice(i, i + n) for n in range(2, min(longest, size) + 1) for i in range(size - n + 1)
    )


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
    return Tokens.of(text).capitals()
