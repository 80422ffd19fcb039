"""Pure text functions that both the metrics and the judges use: no model, no I/O.

- `sentences`: how a text divides into sentences, a sentence into clauses, and words;
- `numerals`: the numbers a text writes (amounts, percentages, years, dates, counts),
  compared by value;
- `evasive`: whether an answer only declines ("I don't know", "please ask HR").

This package sits below `monitor.metrics` and `monitor.judges` and imports neither.
The local judge's own word lists, thesaurus and clause analysis build on it in
`monitor.judges.local.lexical`.
"""
