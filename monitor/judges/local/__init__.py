"""The zero-token local judges: the rule judge, the learned judge and their MiniLM embedder.

See docs/local-judge.md. NOTICE: ``vocab.txt`` is bert-base-uncased's WordPiece vocabulary
(Google Research, Apache License 2.0), vendored unchanged (sha256
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3).
"""
