"""Embedded stand-ins for the demo and the tests: judge server, broker, Postgres."""
