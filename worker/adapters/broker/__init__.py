"""Kafka, as the worker speaks to it: client factories (kafka.py), the source and the
sink (kafka_source.py, kafka_sink.py), exactly-once's producers (kafka_txn.py), the
group's lag as KEDA reads it (kafka_lag.py) and stdlib-only probes (kafka_probe.py)."""
