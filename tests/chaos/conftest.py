"""The server and worker fixtures of tests/integration/conftest.py, for the chaos suites
(conftest fixtures only apply below their own folder). Servers are shared per session."""

from tests.integration.conftest import (  # noqa: F401
    kafka_bootstrap,
    new_topic,
    redis_url,
    restartable_redis,
    topics,
    worker_factory,
)
