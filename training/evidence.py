"""What the support model reads of one statement against its contexts: a few generic measurements.

Nothing here decides anything. `measure` turns a statement and the windows of
its contexts into a fixed vector of evidence (`FEATURES`): how many of its
words the best window says (exactly, by stem, or as MiniLM finds them close),
how similar the two are as sentences, whether the statement carries a number
or a name that no context has, whether one side negates and the other does
not. The weights that turn this vector into a probability of support are
fitted to labelled data (`training.model`, by `training.fit`), not
written by hand.

Windows are runs of one or two neighbouring sentences of one passage (a
passage is one retrieved context, one line of the joined context string); a
statement's best window is the one MiniLM places nearest to it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.lexical.thesaurus import weight
from monitor.judges.local.lexical.wordforms import Tokens, stem
from monitor.text.numerals import numbers
from monitor.text.sentences import sentences

Vector = npt.NDArray[np.float32]

#: The measurements, in the order of the vector `measure` returns.
FEATURES = (
    # the weighted share of the statement's content words the best window says (stem match)
    "window_recall",
    # the same share over all the contexts together
    "context_recall",
    # the weighted share counted softly: a word the window lacks counts its MiniLM cosine
    # to the window's closest word
    "soft_recall",
    # the weight of the heaviest content word no context has (0 when none is missing)
    "heaviest_missing",
    # MiniLM cosine of the statement and its best window
    "cosine",
    # the share of the statement's adjacent content-word pairs the contexts say adjacently
    "pair_recall",
    # the statement has numbers, and how many of them no context has (by value)
    "has_number",
    "missing_numbers",
    # words with a capital past the first word that no context has
    "missing_names",
    # the statement negates and its best window does not, or the other way round
    "negation_mismatch",
)

#: Sentences per window.
WINDOW_SENTENCES = 2


@dataclass(frozen=True)
class Passage:
    """One context prepared for measuring: its windows and the words and numbers it holds."""

    windows: tuple[str, ...]
    window_stems: tuple[frozenset[str], ...]
    window_words: tuple[tuple[str, ...], ...]
    window_negated: tuple[bool, ...]
    stems: frozenset[str]
    folded: frozenset[str]
    pairs: frozenset[tuple[str, str]]
    numbers: frozenset[float]

    @classmethod
    def of(cls, texts: Sequence[str]) -> Passage:
        windows: list[str] = []
        for text in texts:
            said = sentences(text) or ([text] if text.strip() else [])
            if len(said) == 1:
                windows.append(said[0])
            for k in range(len(said) - 1):
                windows.append(" ".join(said[k : k + WINDOW_SENTENCES]))
        tokens = [Tokens.of(w) for w in windows]
        stems = [frozenset(map(stem, t.content)) for t in tokens]
        whole = [Tokens.of(t) for t in texts]
        pairs = {
            (stem(a), stem(b))
            for t in whole
            for a, b in zip(t.content, t.content[1:], strict=False)
        }
        return cls(
            windows=tuple(windows),
            window_stems=tuple(stems),
            window_words=tuple(tuple(t.content) for t in tokens),
            window_negated=tuple(t.negated() for t in tokens),
            stems=frozenset().union(*stems) if stems else frozenset(),
            folded=frozenset(f for t in whole for f in t.folded),
            pairs=frozenset(pairs),
            numbers=frozenset(v for t in texts for n in numbers(t) for v in n.values),
        )


@dataclass(frozen=True)
class Evidence:
    """The measurements of one statement (`FEATURES` order) and its best window."""

    values: tuple[float, ...]
    window: str

    def as_array(self) -> Vector:
        return np.asarray(self.values, dtype=np.float32)


def _share(weights: Sequence[float], found: Sequence[float]) -> float:
    total = sum(weights)
    if not total:
        return 1.0
    return sum(w * f for w, f in zip(weights, found, strict=True)) / total


def measure(
    statements: Sequence[str], passage: Passage, embedder: MiniLMEmbedder
) -> list[Evidence]:
    """The evidence of each statement against ``passage`` (MiniLM called twice at most)."""
    if not statements:
        return []
    if not passage.windows:
        return [Evidence(_nothing(s), "") for s in statements]
    vectors = embedder.embed([*statements, *passage.windows])
    said, windows = vectors[: len(statements)], vectors[len(statements) :]
    cosines = said @ windows.T
    prepared = []
    soft_words: set[str] = set()
    for k, statement in enumerate(statements):
        tokens = Tokens.of(statement)
        content = tokens.content
        stems = [stem(w) for w in content]
        best = int(np.argmax(cosines[k]))
        missing = [
            w for w, s in zip(content, stems, strict=True) if s not in passage.window_stems[best]
        ]
        if missing:
            soft_words.update(missing)
            soft_words.update(passage.window_words[best])
        prepared.append((tokens, content, stems, best, missing))
    word_list = sorted(soft_words)
    word_index = {w: i for i, w in enumerate(word_list)}
    word_vectors = embedder.embed(word_list) if word_list else np.zeros((0, 384), np.float32)
    found: list[Evidence] = []
    for k, (tokens, content, stems, best, missing) in enumerate(prepared):
        weights = [weight(w) for w in content]
        in_window = [1.0 if s in passage.window_stems[best] else 0.0 for s in stems]
        anywhere = [1.0 if s in passage.stems else 0.0 for s in stems]
        soft = list(in_window)
        window_words = passage.window_words[best]
        if missing and window_words:
            rows = word_vectors[[word_index[w] for w in window_words]]
            for j, w in enumerate(content):
                if not in_window[j]:
                    soft[j] = max(0.0, float(np.max(rows @ word_vectors[word_index[w]])))
        heaviest = max(
            (wt for wt, hit in zip(weights, anywhere, strict=True) if not hit), default=0.0
        )
        adjacent = list(zip(stems, stems[1:], strict=False))
        pair_recall = sum(p in passage.pairs for p in adjacent) / len(adjacent) if adjacent else 1.0
        values = [v for n in numbers(tokens.text) for v in n.values]
        missing_numbers = sum(v not in passage.numbers for v in set(values))
        names = {
            f
            for j, (w, f) in enumerate(zip(tokens.written, tokens.folded, strict=True))
            if j and w[:1].isupper() and f not in passage.folded
        }
        found.append(
            Evidence(
                (
                    _share(weights, in_window),
                    _share(weights, anywhere),
                    _share(weights, soft),
                    heaviest / 7.0,
                    float(cosines[k, best]),
                    pair_recall,
                    1.0 if values else 0.0,
                    math.log1p(missing_numbers),
                    math.log1p(len(names)),
                    1.0 if tokens.negated() != passage.window_negated[best] else 0.0,
                ),
                passage.windows[best],
            )
        )
    return found


def _nothing(statement: str) -> tuple[float, ...]:
    """The evidence against no context at all: nothing said, everything missing."""
    values = numbers(statement)
    return (0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0 if values else 0.0, math.log1p(len(values)), 0.0, 0.0)
