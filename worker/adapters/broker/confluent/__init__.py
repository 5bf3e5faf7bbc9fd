"""The worker on confluent-kafka (librdkafka) with KIP-848's consumer group protocol
(`--kafka-client confluent`): clients.py (configuration and bounded blocking calls),
fetch.py (the thread that owns the consumer), source.py, sink.py, txn.py (exactly-once),
worker.py (the runner's side of it)."""
