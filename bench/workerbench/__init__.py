"""The parts of bench/worker_bench.py, grouped by what they hold."""
