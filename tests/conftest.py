"""The shared fixtures, registered once for the whole suite (`tests/fixtures/`)."""

pytest_plugins = ["tests.fixtures.judge", "tests.fixtures.kafka", "tests.fixtures.postgres"]
