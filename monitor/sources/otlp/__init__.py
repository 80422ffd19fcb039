"""OpenTelemetry traces → interactions, with no Kafka inside.

`spans` decodes a span message, `buffer` holds a trace's spans until it is due, and
`assembly` turns one trace into the record schema of an interaction. The source the
pipeline reads OTLP input through is `monitor.sources.traces.TraceSource`.
"""
