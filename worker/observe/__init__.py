"""What the worker shows of itself: metrics and probes (metrics.py, http_server.py), logs
(logs.py), trace context and spans (propagation.py, tracing.py)."""
