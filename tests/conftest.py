"""The shared fixtures, registered once for the whole suite (`tests/fixtures/`)."""

import pytest

from monitor.logging import configure_logging

pytest_plugins = ["tests.fixtures.judge", "tests.fixtures.kafka", "tests.fixtures.postgres"]


def pytest_configure(config: pytest.Config) -> None:
    # as the command line does before any command: a structlog logger first used while
    # nothing is configured would keep structlog's default (stdout) for the session
    configure_logging("info")
