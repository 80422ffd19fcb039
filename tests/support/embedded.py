"""The demo's embedded broker and Postgres (`monitor.demo`), as the tests and benches reach
them: outside tests/demo/ (which tests the demo itself), the one module that imports them
(tests/test_layers.py holds it), so a change to the demo's servers shows here first."""

from __future__ import annotations

from monitor.demo.broker import KINDS, PACKAGES, Broker, BrokerError, broker_command
from monitor.demo.postgres import Binaries, EmbeddedPostgres, PostgresUnavailable
from monitor.demo.servers import free_port

__all__ = [
    "KINDS",
    "PACKAGES",
    "Binaries",
    "Broker",
    "BrokerError",
    "EmbeddedPostgres",
    "PostgresUnavailable",
    "broker_command",
    "free_port",
]
