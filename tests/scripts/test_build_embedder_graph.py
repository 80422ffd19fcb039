"""The embedder's shipped graph: the int8 rewrite (`scripts.minilm_int8`) and its build
(``scripts/build_embedder_graph.py``)."""

from __future__ import annotations

import fnmatch
import hashlib
import tomllib
from pathlib import Path

import pytest

from monitor.judges.local.embedder import GRAPH_PATH, GRAPH_SHA256
from scripts import build_embedder_graph
from scripts.minilm_int8 import OUTLIERS, int8_graph, model_matches
from scripts.onnx_wire import fields, len_field, parse_node
from tests.support import ROOT


@pytest.fixture(scope="module")
def source() -> bytes:
    return build_embedder_graph.source_model()


def test_the_shipped_graph_is_pinned_and_the_script_rebuilds_it_byte_for_byte(
    source: bytes,
) -> None:
    """Fails after a change to the rewrite until ``python3 -m scripts.build_embedder_graph``
    runs."""
    shipped = GRAPH_PATH.read_bytes()
    assert hashlib.sha256(shipped).hexdigest() == GRAPH_SHA256
    assert model_matches(source) and not model_matches(b"another model")
    assert int8_graph(source) == shipped  # deterministic, and what ships
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    patterns = pyproject["tool"]["setuptools"]["package-data"]["monitor"]
    relative = GRAPH_PATH.relative_to(ROOT / "monitor").as_posix()
    assert any(fnmatch.fnmatch(relative, p) for p in patterns)  # in the wheel


def test_check_and_pin(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stale = tmp_path / "embedder-int8.onnx"
    stale.write_bytes(b"an older graph")
    assert build_embedder_graph.main(["--check", str(stale)]) == 1
    assert build_embedder_graph.main(["--check", str(GRAPH_PATH)]) == 0
    assert "up to date" in capsys.readouterr().out
    module = tmp_path / "embedder.py"
    module.write_text('X = 1\nGRAPH_SHA256 = "00ff"\n', encoding="utf-8")
    build_embedder_graph.pin("ab" * 32, module)
    assert module.read_text(encoding="utf-8") == f'X = 1\nGRAPH_SHA256 = "{"ab" * 32}"\n'
    module.write_text("X = 1\n", encoding="utf-8")
    with pytest.raises(SystemExit, match="no single GRAPH_SHA256"):
        build_embedder_graph.pin("ab" * 32, module)


def test_int8_graph_rewrites_every_weight_product_and_lists_real_outliers() -> None:
    import onnxruntime as ort

    nodes = _graph_nodes(GRAPH_PATH.read_bytes())
    ops = [op for op, _ in nodes]
    assert ops.count("MatMulIntegerToFloat") == 36
    assert "Cast" in ops  # the quantisation casts; the weights' dequantise casts are gone
    # each layer's GELU and self-attention as one node, nothing of the old blocks left
    assert ops.count("BiasGelu") == ops.count("MultiHeadAttention") == 6
    assert not {"Erf", "Softmax", "Transpose", "Where"} & set(ops)
    weights = {inputs[1] for op, inputs in nodes if op == "MatMulIntegerToFloat"}
    assert set(OUTLIERS) <= weights
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(GRAPH_PATH), options, providers=["CPUExecutionProvider"])
    assert [o.name for o in session.get_outputs()] == ["last_hidden_state"]


def test_int8_graph_needs_int8_weights() -> None:
    node = len_field(1, len_field(1, "x") + len_field(2, "y") + len_field(4, "Relu"))
    with pytest.raises(ValueError, match="no int8-weight MatMul"):
        int8_graph(len_field(7, node))


def _graph_nodes(model: bytes) -> list[tuple[str, list[str]]]:
    graph = next(f.value for f in fields(model) if f.number == 7)
    assert isinstance(graph, bytes)
    out = []
    for f in fields(graph):
        if f.number == 1 and isinstance(f.value, bytes):
            node = parse_node(f.value)
            out.append((node.op, node.inputs))
    return out
