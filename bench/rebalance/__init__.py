"""bench/rebalance_bench.py's parts: the worker fleet, the output timeline, the measures."""
