"""Where request states live: Redis (redis_store.py; redis_layout.py: the hash and its
Lua scripts; redis_cluster.py: a Redis Cluster spoken to directly) and memory
(memory_store.py, the same rules)."""
