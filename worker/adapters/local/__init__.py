"""Local servers for development, the demo and the tests: tansu and redis-server
(embedded.py), a Redis Cluster from one redis-server (local_cluster.py), Apache Kafka as a
local process (kafka_server.py; kafka_jars.py: its jars via mvn)."""
