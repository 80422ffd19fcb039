"""A context as the rule judge reads it, prepared once: its windows, words, denials, parts.

See docs/local-judge.md, "Text analysis".
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

from monitor.judges.local.lexical.clauses import Segment
from monitor.judges.local.lexical.vocabulary import Sentence, Vocabulary
from monitor.text.sentences import sentences


@dataclass
class Context:
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
    #: its sentences, with their vocabularies (for `segments_of`)
    sentences: list[str]
    sentence_vocabularies: list[Vocabulary]
    #: the chunks of a context of several (empty for a chunk)
    chunks: tuple[Context, ...] = ()
    #: the parts of its sentences that each state one fact (`Segment`), in order; made on
    #: first use (`segments_of`)
    segments: list[Segment] | None = None


class Contexts:
    """Contexts prepared for checks, each chunk once: the last ``size`` chunks are kept
    (chunks repeat across metrics and records). Safe to share between threads."""

    def __init__(self, window_sentences: int, size: int) -> None:
        #: neighbouring sentences a window spans at most
        self.window_sentences = window_sentences
        self.size = size
        self._chunks: OrderedDict[str, Context] = OrderedDict()
        self._lock = threading.Lock()

    def prepare(self, text: str) -> Context:
        """``text`` prepared for checks; chunks (lines) are prepared once and cached."""
        chunks = [self._chunk(line) for line in text.splitlines() if line.strip()]
        if len(chunks) == 1:
            return chunks[0]
        return Context(
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

    def _chunk(self, text: str) -> Context:
        with self._lock:
            cached = self._chunks.get(text)
            if cached is not None:
                self._chunks.move_to_end(text)
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
            for n in range(1, self.window_sentences + 1)
            for i in range(len(split) - n + 1)
        ]
        window_vocabularies = [
            vocabularies[a] if b == a + 1 else Vocabulary.union(vocabularies[a:b]) for a, b in spans
        ]
        whole = (0, len(split))  # a chunk of a few sentences is one of its windows
        prepared = Context(
            text=text,
            vocabulary=window_vocabularies[spans.index(whole)]
            if whole in spans
            else Vocabulary.union(vocabularies),
            windows=[" ".join(split[a:b]) for a, b in spans],
            window_vocabularies=window_vocabularies,
            window_negated=[any(negated[a:b]) for a, b in spans],
            window_content=[
                list(dict.fromkeys(chain.from_iterable(content[a:b]))) for a, b in spans
            ],
            window_denials=[window_denials(denials[a:b], vocabularies[a:b]) for a, b in spans],
            sentences=split,
            sentence_vocabularies=vocabularies,
        )
        with self._lock:
            self._chunks[text] = prepared
            if len(self._chunks) > self.size:
                self._chunks.popitem(last=False)
        return prepared


def window_denials(
    denials: Sequence[tuple[frozenset[str], frozenset[str]]],
    vocabularies: Sequence[Vocabulary],
) -> list[tuple[frozenset[str], Vocabulary]]:
    """The denying sentences of one window (see `Context.window_denials`)."""
    if not any(denied for denied, _ in denials):
        return []
    asserted = frozenset().union(*(a for _, a in denials))
    return [
        (denied - asserted, vocabulary)
        for (denied, _), vocabulary in zip(denials, vocabularies, strict=True)
        if denied - asserted
    ]


def segments_of(ctx: Context) -> list[Segment]:
    """The segments of ``ctx``, each chunk's made once, on first use (only the swap check
    and the reasons of missing names and numbers read them)."""
    if ctx.chunks:
        return [g for c in ctx.chunks for g in segments_of(c)]
    if ctx.segments is None:
        # deterministic: threads racing here compute the same list
        ctx.segments = [
            g
            for s, v in zip(ctx.sentences, ctx.sentence_vocabularies, strict=True)
            for g in Segment.split(s, v)
        ]
    return ctx.segments
