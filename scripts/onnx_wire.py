"""ONNX protobuf read and written without the ``onnx`` package: what the int8 rewrite needs.

Build side only (``scripts/build_embedder_graph.py``). The model is protobuf; the
few messages `scripts.minilm_int8` touches (ModelProto, GraphProto, NodeProto,
TensorProto, AttributeProto) are read field by field
(`fields`, each keeping its encoding so it is re-emitted unchanged) and new
nodes and initializers written (`node_field`, `tensor_field`). Field numbers
are those of onnx.proto.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

Array = npt.NDArray[Any]

# ONNX enums (onnx.proto)
FLOAT, UINT8, INT8, INT32, INT64 = 1, 2, 3, 6, 7
ATTR_INT, ATTR_INTS = 2, 7
VARINT, I64, LEN, I32 = 0, 1, 2, 5


@dataclass(frozen=True)
class Field:
    number: int
    wire: int
    value: bytes | int  # bytes for length-delimited fields, int otherwise
    raw: bytes  # the field's full encoding (tag included), re-emitted unchanged


def read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def fields(buf: bytes) -> Iterator[Field]:
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = read_varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: bytes | int
        if wire == VARINT:
            value, pos = read_varint(buf, pos)
        elif wire == LEN:
            size, pos = read_varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire == I64:
            value, pos = struct.unpack_from("<Q", buf, pos)[0], pos + 8
        elif wire == I32:
            value, pos = struct.unpack_from("<I", buf, pos)[0], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield Field(number, wire, value, buf[start:pos])


def varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # int64 two's complement, as protobuf encodes negative ints
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def int_field(number: int, n: int) -> bytes:
    return varint(number << 3 | VARINT) + varint(n)


def len_field(number: int, data: bytes | str) -> bytes:
    raw = data.encode() if isinstance(data, str) else data
    return varint(number << 3 | LEN) + varint(len(raw)) + raw


def node_field(
    op: str,
    inputs: Sequence[str],
    outputs: Sequence[str],
    *,
    domain: str = "",
    ints: dict[str, int] | None = None,
    int_lists: dict[str, Sequence[int]] | None = None,
) -> bytes:
    """A NodeProto (``domain`` ``com.microsoft`` for contrib ops)."""
    body = b"".join(len_field(1, x) for x in inputs)
    body += b"".join(len_field(2, x) for x in outputs)
    body += len_field(3, f"int8/{outputs[0]}") + len_field(4, op)
    if domain:
        body += len_field(7, domain)
    for name, value in (ints or {}).items():
        attribute = len_field(1, name) + int_field(3, value)
        body += len_field(5, attribute + int_field(20, ATTR_INT))
    for name, values in (int_lists or {}).items():
        attribute = len_field(1, name) + b"".join(int_field(8, v) for v in values)
        body += len_field(5, attribute + int_field(20, ATTR_INTS))
    return len_field(1, body)  # GraphProto.node


def tensor_field(name: str, array: Array) -> bytes:
    """A TensorProto with raw little-endian data, as a GraphProto.initializer field."""
    kinds = {
        np.dtype(np.float32): FLOAT,
        np.dtype(np.uint8): UINT8,
        np.dtype(np.int8): INT8,
        np.dtype(np.int64): INT64,
    }
    body = b"".join(int_field(1, d) for d in array.shape)
    body += int_field(2, kinds[array.dtype]) + len_field(8, name)
    little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
    body += len_field(9, little.tobytes())
    return len_field(5, body)


@dataclass(frozen=True)
class Node:
    op: str
    inputs: list[str]
    outputs: list[str]


def parse_node(body: bytes) -> Node:
    op, inputs, outputs = "", [], []
    for f in fields(body):
        if f.number == 1 and isinstance(f.value, bytes):
            inputs.append(f.value.decode())
        elif f.number == 2 and isinstance(f.value, bytes):
            outputs.append(f.value.decode())
        elif f.number == 4 and isinstance(f.value, bytes):
            op = f.value.decode()
    return Node(op, inputs, outputs)


def parse_tensor(body: bytes) -> tuple[str, Array] | None:
    """(name, array) of an initializer stored as raw data; None for other layouts."""
    name, dims, kind, raw = "", [], 0, None
    for f in fields(body):
        if f.number == 1:
            if isinstance(f.value, int):
                dims.append(f.value)
            else:  # packed
                pos = 0
                while pos < len(f.value):
                    d, pos = read_varint(f.value, pos)
                    dims.append(d)
        elif f.number == 2 and isinstance(f.value, int):
            kind = f.value
        elif f.number == 8 and isinstance(f.value, bytes):
            name = f.value.decode()
        elif f.number == 9 and isinstance(f.value, bytes):
            raw = f.value
    dtypes: dict[int, np.dtype[Any]] = {FLOAT: np.dtype("<f4"), INT8: np.dtype(np.int8)}
    if raw is None or kind not in dtypes:
        return None
    return name, np.frombuffer(raw, dtype=dtypes[kind]).reshape(dims)


def graph_names(graph_fields: Sequence[Field], number: int) -> list[str]:
    """The names of a graph's inputs (``number`` 11) or outputs (12)."""
    names = []
    for f in graph_fields:
        if f.number == number and isinstance(f.value, bytes):
            name = next((g.value for g in fields(f.value) if g.number == 1), b"")
            assert isinstance(name, bytes)
            names.append(name.decode())
    return names


def node_of(entry: bytes) -> Node:
    """The `Node` of a ``GraphProto.node`` field as `node_field` writes it."""
    body = next(f.value for f in fields(entry))
    assert isinstance(body, bytes)
    return parse_node(body)
