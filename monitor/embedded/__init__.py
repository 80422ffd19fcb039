"""Embedded stand-ins the demo runs on (and the tests reuse): broker, Postgres, trace spans."""
