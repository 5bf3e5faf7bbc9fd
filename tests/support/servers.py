"""The local servers for tests: the same module the `demo` command uses.

Kept as an import path for the test fixtures; the code lives in worker/adapters/local/embedded.py
and local_cluster.py.
"""

from worker.adapters.local.embedded import (
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
from worker.adapters.local.local_cluster import (
    ClusterNode,
    LocalRedisCluster,
    RespConnection,
    RespError,
    redis_call,
)

__all__ = [
    "LOCALHOST",
    "ClusterNode",
    "LocalRedisCluster",
    "LocalServer",
    "RedisServer",
    "RespConnection",
    "RespError",
    "ServerError",
    "TansuBroker",
    "create_topics",
    "docker_engine_available",
    "free_port",
    "redis_call",
    "run_in_thread",
]
