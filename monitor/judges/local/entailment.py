"""`SupportModel`: the trained cross-encoder behind every support decision of the learned judge.

See docs/model.md.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from monitor.judges.local.embedder import MiniLMEmbedder
from monitor.judges.local.embedder import ModelFileError as ModelFileError  # raised here too
from monitor.judges.local.windows import TOP, nearest, windows_of

MODEL_DIR = Path(__file__).with_name("model")
#: The probability at and above which a statement counts as supported.
THRESHOLD = 0.5
#: Word pieces of one (statement, window) pair, as in training.
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

    @property
    def supported(self) -> bool:
        return self.probability >= THRESHOLD


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class SupportModel:
    """The cross-encoder, loaded on first use; safe to call from many threads.

    ``embedder`` picks each statement's nearest windows; ``threads`` is
    onnxruntime's intra-op thread count per call (the local judge runs calls in
    its own worker threads, so 1 keeps every core busy without oversubscribing).
    The last ``cache_size`` pairs' logits are kept: metrics of one record read
    the same statement against the same window (faithfulness and context
    utility), and retrieved chunks repeat across records.
    """

    def __init__(
        self,
        embedder: MiniLMEmbedder,
        *,
        threads: int = 1,
        batch_size: int = 16,
        top: int = TOP,
        cache_size: int = 8192,
        model_dir: Path = MODEL_DIR,
        pinned: dict[str, str] | None = None,
    ) -> None:
        if threads < 1 or batch_size < 1 or top < 1:
            raise ValueError("threads, batch_size and top must be >= 1")
        self.embedder = embedder
        self.threads = threads
        self.batch_size = batch_size
        self.top = top
        self.cache_size = cache_size
        self._cache: OrderedDict[tuple[str, str], float] = OrderedDict()
        self._cache_lock = threading.Lock()
        self.model_dir = model_dir
        self.pinned = PINNED if pinned is None else pinned
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        #: pairs read by the model (cache misses), for tests and benchmarks
        self.pairs = 0

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                for name, digest in self.pinned.items():
                    path = self.model_dir / name
                    if not path.is_file():
                        raise ModelFileError(f"support model file missing: {path}")
                    if _sha256(path) != digest:
                        raise ModelFileError(f"{path} is not the pinned file (sha256 differs)")
                tokenizer = Tokenizer.from_file(str(self.model_dir / "tokenizer.json"))
                tokenizer.enable_truncation(MAX_TOKENS)
                tokenizer.enable_padding()
                options = ort.SessionOptions()
                options.intra_op_num_threads = self.threads
                options.inter_op_num_threads = 1
                self._session = ort.InferenceSession(
                    str(self.model_dir / "support.onnx"),
                    options,
                    providers=["CPUExecutionProvider"],
                )
                self._tokenizer = tokenizer
            return self._session, self._tokenizer

    def warm_up(self) -> None:
        """Load the model now (and run it once), not on the first record."""
        self.logits([("warm-up", "warm-up")])

    def logits(self, pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float32]:
        """The model's logit of support for each (statement, evidence) pair, in order."""
        out = np.zeros(len(pairs), dtype=np.float32)
        missing: dict[tuple[str, str], list[int]] = {}
        with self._cache_lock:
            for k, pair in enumerate(pairs):
                known = self._cache.get(pair)
                if known is None:
                    missing.setdefault(pair, []).append(k)
                else:
                    self._cache.move_to_end(pair)
                    out[k] = known
        if missing:
            todo = list(missing)
            found = self._run(todo)
            with self._cache_lock:
                for pair, z in zip(todo, found, strict=True):
                    out[missing[pair]] = z
                    if self.cache_size:
                        self._cache[pair] = float(z)
                while len(self._cache) > self.cache_size:
                    self._cache.popitem(last=False)
        return out

    def _run(self, pairs: Sequence[tuple[str, str]]) -> npt.NDArray[np.float32]:
        session, tokenizer = self._load()
        # similar lengths share a batch: less padding
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        out = np.zeros(len(pairs), dtype=np.float32)
        for k in range(0, len(order), self.batch_size):
            idx = order[k : k + self.batch_size]
            enc = tokenizer.encode_batch([pairs[i] for i in idx])
            feeds = {
                "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
            }
            out[idx] = session.run(["logits"], feeds)[0][:, 0]
        self.pairs += len(pairs)
        return out

    def support(self, statements: Sequence[str], contexts: Sequence[str]) -> list[Support]:
        """Each statement's support by ``contexts``: its best window's probability, and that window.

        A statement is read against its ``top`` nearest windows only (MiniLM cosine),
        so the cost per statement is bounded however long the contexts are. Without
        any evidence the probability is 0.
        """
        return self.read(statements, [contexts])[0]

    def support_each(
        self, statements: Sequence[str], contexts: Sequence[str]
    ) -> list[list[Support]]:
        """`support` by each context on its own (one list per context), in one model pass:
        the pairs of every context are batched together."""
        return self.read(statements, [[context] for context in contexts])

    def read(
        self, statements: Sequence[str], groups: Sequence[Sequence[str]]
    ) -> list[list[Support]]:
        """`support` against each group of contexts; one `logits` call for all of them."""
        return self.read_each([(statements, contexts) for contexts in groups])

    def read_each(self, jobs: Sequence[tuple[Sequence[str], Sequence[str]]]) -> list[list[Support]]:
        """For each (claims, contexts) job, each claim's support by those contexts; one
        `logits` call for every job.

        Each claim is read against its ``top`` nearest windows and against its two
        nearest joined (a claim that combines two chunks); the best of them wins.
        """
        plans: list[tuple[list[str], list[list[str]]]] = []
        pairs: list[tuple[str, str]] = []
        for statements, contexts in jobs:
            windows = windows_of(contexts) if statements else []
            chosen = nearest(self.embedder, statements, windows, self.top) if windows else []
            read = [[windows[i] for i in idx] + _joined(windows, idx) for idx in chosen]
            plans.append((windows, read))
            for statement, texts in zip(statements, read, strict=bool(windows)):  # [] if none
                pairs.extend((statement, w) for w in texts)
        z = self.logits(pairs) if pairs else np.zeros(0, dtype=np.float32)
        out: list[list[Support]] = []
        k = 0
        for (statements, _), (windows, read) in zip(jobs, plans, strict=True):
            if not windows:
                out.append([Support(0.0, "") for _ in statements])
                continue
            found = []
            for texts in read:
                best = int(np.argmax(z[k : k + len(texts)]))
                logit = float(z[k + best])
                p = float(1.0 / (1.0 + np.exp(-logit)))
                found.append(Support(round(p, 6), texts[best], logit))
                k += len(texts)
            out.append(found)
        return out


def _joined(windows: Sequence[str], idx: Sequence[int]) -> list[str]:
    """The two nearest windows (``idx`` nearest first) as one, unless one holds the other."""
    if len(idx) < 2:
        return []
    a, b = windows[idx[0]], windows[idx[1]]
    if a in b or b in a:
        return []
    return [f"{a} {b}"]
