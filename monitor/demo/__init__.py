"""`rag-monitor demo`: the whole product on one machine; `DemoError`, how any part of it fails.

See docs/demo.md.
"""


class DemoError(Exception):
    """The demo cannot go on; the message says why and what to do."""


class DemoInputError(DemoError):
    """The demo's input (``--traffic``) cannot be used: a usage error (exit code 2), met
    before anything starts."""
