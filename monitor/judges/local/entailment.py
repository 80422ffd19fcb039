"""`SupportModel`: the trained cross-encoder behind every support decision of the learned judge.

See docs/model.md.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from monitor.judges.local.embedder import MiniLMEmbedder, read_pinned
from monitor.judges.local.embedder import ModelFileError as ModelFileError  # raised here too
from monitor.judges.local.windows import TOP, nearest, picks, windows_of
from monitor.lru import LRU

MODEL_DIR = Path(__file__).with_name("model")
#: The probability at and above which a claim counts as supported.
THRESHOLD = 0.5
#: Word pieces of one (claim, window) pair, as in training. The one length the model
#: reads: `SupportModel` sets it on the tokenizer, over the 128 (and the padding) that the
#: shipped ``model/tokenizer.json`` was saved with, which are pinned bytes and never used
#: (tests/judges/local/test_judge.py checks that the model reads past 128).
MAX_TOKENS = 160
#: The shipped files and their sha256 (``model/SHA256SUMS`` must agree).
PINNED = {
    "support.onnx": "bbf10157bdca81449acdd62ed1699041d4984434c996e94a54c25db92b303e45",
    "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
}


@dataclass(frozen=True)
class Support:
    """How well the model finds one claim supported, and by which window."""

    #: the probability that ``window`` supports the claim, in [0, 1]
    probability: float
    #: the evidence window read as the best one ("" when there was no evidence)
    window: str
    #: the model's logit for that window (-inf without evidence)
    logit: float = float("-inf")


@dataclass(eq=False)
class SupportModel:
    """The cross-encoder, loaded on first use; safe to call from many threads.

    ``embedder`` picks each claim's nearest windows; ``threads`` is
    onnxruntime's intra-op thread count per call (the local judge runs calls in
    its own worker threads, so 1 keeps every core busy without oversubscribing).
    The last ``cache_size`` pairs' logits are kept: metrics of one record read
    the same claim against the same window (faithfulness and context
    utility), and retrieved chunks repeat across records.

    Each pair is read in a forward pass of its own, unpadded: the graph quantises its
    activations with one scale per pass (``DynamicQuantizeLinear``), so a pair read
    beside others, or padded to a longer one, gets another logit. Alone, a pair's
    logit depends on its own word pieces only, whatever records are scored at the
    same time and whatever the cache already holds (and it costs less: no padding,
    docs/benchmarks.md).
    """

    embedder: MiniLMEmbedder
    _: KW_ONLY
    threads: int = 1
    top: int = TOP
    cache_size: int = 8192
    #: `support` reads each claim's best window by words before any is embedded
    words_first: bool = True
    model_dir: Path = MODEL_DIR
    #: the model files read from ``model_dir``, each with its sha256
    pinned: dict[str, str] = field(default_factory=lambda: dict(PINNED))
    #: pairs read by the model (cache misses), for tests and benchmarks
    pairs: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.threads < 1 or self.top < 1:
            raise ValueError("threads and top must be >= 1")
        self._cache: LRU[tuple[str, str], float] = LRU(self.cache_size)
        self._cache_lock = threading.Lock()
        #: pairs being read by some thread now, and their logits once read
        self._reading: dict[tuple[str, str], Future[float]] = {}
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                files = {
                    name: read_pinned(self.model_dir / name, digest)
                    for name, digest in self.pinned.items()
                }
                tokenizer = Tokenizer.from_str(files["tokenizer.json"].decode("utf-8"))
                tokenizer.enable_truncation(MAX_TOKENS)
                tokenizer.no_padding()
                options = ort.SessionOptions()
                options.intra_op_num_threads = self.threads
                options.inter_op_num_threads = 1
                self._session = ort.InferenceSession(
                    files["support.onnx"],
                    options,
                    providers=["CPUExecutionProvider"],
                )
                self._tokenizer = tokenizer
            return self._session, self._tokenizer

    def warm_up(self) -> None:
        """Load the model now (and run it once), not on the first record."""
        self.logits([("warm-up", "warm-up")])

    def logits(self, pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float32]:
        """The model's logit of support for each (claim, evidence) pair, in order.

        A pair another thread is reading at the same time is waited for, not read twice
        (faithfulness and context utility read the same pairs of a record at once).
        """
        out = np.zeros(len(pairs), dtype=np.float32)
        missing: dict[tuple[str, str], list[int]] = {}
        waiting: dict[tuple[str, str], Future[float]] = {}
        with self._cache_lock:
            for k, pair in enumerate(pairs):
                known = self._cache.get(pair)
                if known is not None:
                    out[k] = known
                elif pair in missing:
                    missing[pair].append(k)
                elif pair in self._reading:
                    waiting[pair] = self._reading[pair]
                else:
                    missing[pair] = [k]
                    self._reading[pair] = Future()
        if missing:
            todo = list(missing)
            try:
                found = self._run(todo)
            except BaseException as exc:
                with self._cache_lock:
                    for pair in todo:
                        self._reading.pop(pair).set_exception(exc)
                raise
            with self._cache_lock:
                for pair, z in zip(todo, found, strict=True):
                    out[missing[pair]] = z
                    self._reading.pop(pair).set_result(float(z))
                    self._cache.put(pair, float(z))
        for k, pair in enumerate(pairs):
            if pair in waiting:
                out[k] = waiting[pair].result()
        return out

    def _run(self, pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float32]:
        """Each pair's logit, each pair in a pass of its own (see the class)."""
        session, tokenizer = self._load()
        out = np.zeros(len(pairs), dtype=np.float32)
        for k, enc in enumerate(tokenizer.encode_batch(list(pairs))):
            feeds = {
                "input_ids": np.array([enc.ids], dtype=np.int64),
                "attention_mask": np.array([enc.attention_mask], dtype=np.int64),
                "token_type_ids": np.array([enc.type_ids], dtype=np.int64),
            }
            out[k] = session.run(["logits"], feeds)[0][0, 0]
        self.pairs += len(pairs)
        return out

    def support(self, claims: Sequence[str], contexts: Sequence[str]) -> list[Support]:
        """Each claim's support by ``contexts``: its best window's probability, and that window.

        A claim is read first against the window that shares the most of its words
        (`windows.picks`), which settles it when it surely supports it (`sure`): no vector is
        embedded for it. Any other claim is read, when that window does not surely support
        it, against its nearest window that is not it (MiniLM cosine, among the windows the
        record's unsettled claims shortlist): ``top`` windows alone in all. Then against its
        two nearest joined when no window alone supports it (a claim that combines two
        chunks), so the cost per claim is bounded however long the contexts are. Without
        any evidence the probability is 0.
        """
        return [_best(found) for found in self._read(claims, contexts, lazy=True)]

    def support_by_context(
        self, claims: Sequence[str], contexts: Sequence[str]
    ) -> list[list[Support]]:
        """`support`, split by the context each read window came from (one list per
        context; a joined window counts for both of its contexts only when no window alone
        is read as supporting the claim and the joined one is). Every claim's ``top``
        nearest windows among the whole record's shortlist are read here (no window is
        read first by its words). A context none of whose windows is among a claim's
        nearest supports it with probability 0."""
        found = [_needed(read) for read in self._read(claims, contexts)]
        return [
            [_best([w for w in read if k in w.origins]) for read in found]
            for k in range(len(contexts))
        ]

    def candidates(self, claims: Sequence[str], contexts: Sequence[str]) -> list[Candidates]:
        """What `support` reads each claim against (`Candidates`), in the order it reads
        them: the training code's transfer check reads the same windows with the model it
        trains. Which claims the first window settles is this model's reading (its logits
        for those pairs are read here, and cached)."""
        return self._plan(claims, list(_origins(contexts)), lazy=True)[0]

    def first(self, claims: Sequence[str], contexts: Sequence[str]) -> list[str]:
        """The window `support` reads each claim against first: the one that shares the most
        of its words (`windows.picks`); "" for a claim that shares none, and for every claim
        when the contexts have at most ``top`` windows (all are then read, none embedded) or
        `words_first` is off."""
        return self._first(claims, list(_origins(contexts)))

    def _first(self, claims: Sequence[str], windows: Sequence[str]) -> list[str]:
        if not self.words_first or len(windows) <= self.top:
            return ["" for _ in claims]
        return [windows[p[0]] if p else "" for p in picks(claims, windows, 1)]

    def _plan(
        self, claims: Sequence[str], windows: Sequence[str], *, lazy: bool
    ) -> tuple[list[Candidates], dict[tuple[str, str], float]]:
        """Each claim's `Candidates` among ``windows``, and the logits read to plan them.

        ``lazy`` (with `words_first`, and more than ``top`` windows): each claim's best
        window by words is read first; a claim it surely supports is read against it alone,
        the others against it and then their nearest windows that are not it, ``top`` in
        all (ranked among the shortlist of the claims not settled: only their vectors and
        those windows' are embedded). Otherwise every claim's ``top`` nearest among the
        whole record's shortlist."""
        if not claims or not windows:
            return [Candidates((), ()) for _ in claims], {}
        first = self._first(claims, windows) if lazy else ["" for _ in claims]
        asked = [(c, w) for c, w in zip(claims, first, strict=True) if w]
        read = dict(zip(asked, map(float, self.logits(asked)), strict=True)) if asked else {}
        settled = [bool(w) and sure(read[c, w]) for c, w in zip(claims, first, strict=True)]
        rest = [c for c, done in zip(claims, settled, strict=True) if not done]
        chosen = iter(nearest(self.embedder, rest, windows, self.top) if rest else [])
        plan = []
        for n, done in enumerate(settled):
            if done:
                plan.append(Candidates((first[n],), ()))
                continue
            idx = next(chosen)
            near = [windows[i] for i in idx]
            # at most ``top`` windows alone: the first, then the nearest that are not it
            order = tuple(dict.fromkeys([first[n], *near] if first[n] else near))[: self.top]
            plan.append(Candidates(order, tuple(_joined(windows, idx)), tuple(near[:2])))
        return plan, read

    def _read(
        self, claims: Sequence[str], contexts: Sequence[str], *, lazy: bool = False
    ) -> list[list[_Window]]:
        """Each claim's read windows with their logits: its `Candidates` (``lazy``: in
        order, up to the first that surely supports it, `sure`; else all of them), then,
        for the claims no window alone supports (`reads_joined`), the two nearest joined (a
        claim that combines two chunks). One `logits` call per round."""
        if not claims:
            return []
        origins = _origins(contexts)
        plan, known = self._plan(claims, list(origins), lazy=lazy)
        out: list[list[_Window]] = [[] for _ in claims]
        longest = max(len(c.windows) for c in plan)
        # lazy: the k-th windows of the claims none of whose read windows is sure; else all
        rounds = [slice(k, k + 1) for k in range(longest)] if lazy else [slice(0, longest)]
        for part in rounds:
            todo = [
                (n, w)
                for n, c in enumerate(plan)
                if not (lazy and any(sure(w.logit) for w in out[n]))
                for w in c.windows[part]
            ]
            ask = [(claims[n], w) for n, w in todo if (claims[n], w) not in known]
            if ask:
                known.update(zip(ask, map(float, self.logits(ask)), strict=True))
            for n, w in todo:
                out[n].append(_Window(w, frozenset(origins[w]), known[claims[n], w]))
        joins = [
            (n, text, frozenset(set().union(*(origins[w] for w in c.parts))))
            for n, c in enumerate(plan)
            if out[n] and reads_joined([w.logit for w in out[n]])
            for text in c.joined
        ]
        if joins:
            z = self.logits([(claims[n], text) for n, text, _ in joins])
            for (n, text, where), logit in zip(joins, z, strict=True):
                out[n].append(_Window(text, where, float(logit), joined=True))
        return out


@dataclass(frozen=True)
class Candidates:
    """The windows `SupportModel` reads one claim against, in the order it reads them, up
    to the first that surely supports the claim (`sure`): `support`'s are its best window
    by words, then (unless that one settles it) its nearest windows that are not it
    (MiniLM cosine, nearest first), ``top`` in all; `support_by_context`'s its ``top``
    nearest. And its two nearest joined as one (none when one holds the other or there is
    one), read only when no window alone supports the claim (`reads_joined`). Its support
    is its best read window's."""

    windows: tuple[str, ...]
    joined: tuple[str, ...]
    #: the windows ``joined`` is made of
    parts: tuple[str, ...] = ()


#: The logit at and above which a window surely supports a claim (model probability 0.95):
#: `SupportModel.support` reads none of the claim's later windows (its best window by words
#: read first settles it with no vector embedded). A higher
#: logit from another window would move the claim's combined probability by less than the
#: dev sets' figures can show (docs/benchmarks.md, "Local judge: cost on real RAG records").
SURE = 3.0


def sure(logit: float) -> bool:
    """A window's ``logit`` says the claim is supported beyond doubt (`SURE`)."""
    return logit >= SURE


def reads_joined(logits: Sequence[float]) -> bool:
    """No window alone supports the claim (the best of its windows' ``logits`` is below
    0, p < `THRESHOLD`): its two nearest windows joined are read too."""
    return max(logits) < 0


@dataclass(frozen=True)
class _Window:
    """A window read for a claim: its text, the contexts it came from, its logit."""

    text: str
    origins: frozenset[int]
    logit: float
    #: two windows read as one
    joined: bool = False


def _needed(read: Sequence[_Window]) -> list[_Window]:
    """``read`` without its joined window unless the join alone supports the claim."""
    alone = [w for w in read if not w.joined]
    joined = [w for w in read if w.joined]
    if joined and max(w.logit for w in joined) >= 0 > max((w.logit for w in alone), default=-1):
        return list(read)
    return alone


def _best(read: Sequence[_Window]) -> Support:
    if not read:
        return Support(0.0, "")
    best = max(read, key=lambda w: w.logit)
    p = float(1.0 / (1.0 + np.exp(-best.logit)))
    return Support(round(p, 6), best.text, best.logit)


def _joined(windows: Sequence[str], idx: Sequence[int]) -> list[str]:
    """The two nearest windows (``idx`` nearest first) as one, unless one holds the other."""
    if len(idx) < 2:
        return []
    a, b = windows[idx[0]], windows[idx[1]]
    if a in b or b in a:
        return []
    return [f"{a} {b}"]


def _origins(contexts: Sequence[str]) -> dict[str, set[int]]:
    """The windows of ``contexts`` (in order, without repeats) and the contexts each came from."""
    origins: dict[str, set[int]] = {}
    for k, context in enumerate(contexts):
        for window in windows_of([context]):
            origins.setdefault(window, set()).add(k)
    return origins
