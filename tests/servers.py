"""The local servers for tests: the same module the `demo` command uses.

Kept as an import path for the test fixtures; the code lives in worker/adapters/embedded.py.
"""

from worker.adapters.embedded import (
    LOCALHOST,
    LocalServer,
    RedisServer,
    ServerError,
    TansuBroker,
    create_topics,
    docker_engine_available,
    free_port,
    run_in_thread,
)

__all__ = [
    "LOCALHOST",
    "LocalServer",
    "RedisServer",
    "ServerError",
    "TansuBroker",
    "create_topics",
    "docker_engine_available",
    "free_port",
    "run_in_thread",
]
