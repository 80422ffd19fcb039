"""Pure text functions both the metrics and the judges use: sentences, numbers, evasion.

Sits below `monitor.metrics` and `monitor.judges` and imports neither (docs/design.md,
"Where things are").
"""
