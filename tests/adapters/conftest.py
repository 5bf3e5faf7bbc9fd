"""The server fixtures of tests/integration/conftest.py, for the adapter suites here
(conftest fixtures only apply below their own folder). Servers are shared per session."""

from tests.integration.conftest import (  # noqa: F401
    kafka_bootstrap,
    new_topic,
    redis_url,
    restartable_redis,
)
