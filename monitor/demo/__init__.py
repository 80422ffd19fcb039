"""`rag-monitor demo`: the whole product on one machine, and `DemoError`, how any part of it fails.

The parts, in the order a run meets them:

- `traffic`: the labelled traffic set (``traffic.jsonl``), as records or as OTLP traces;
- `broker`, `postgres`: the embedded Kafka-protocol broker and Postgres (the ``demo``
  extra), also the tests' real servers; `spans`: interactions as OpenInference traces;
- `run`: the orchestration (`Demo`), with `steps` (a step under the stop event and a
  deadline) and `progress` (the live status line);
- `statistics`: `Tally` and the rates, intervals and confusion matrices of the report;
- `golden`: the backlog's second half: annotated, reviewed, calibrated, run offline;
- `report`: `DemoReport`, filled from the exporter's registry, and its text.
"""


class DemoError(Exception):
    """The demo cannot go on; the message says why and what to do."""
