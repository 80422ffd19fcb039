"""`rag-monitor demo`: the whole product on one machine; `DemoError`, how any part of it fails.

See docs/demo.md.
"""


class DemoError(Exception):
    """The demo cannot go on; the message says why and what to do."""
