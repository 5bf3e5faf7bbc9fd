"""The parts of bench/core_bench.py, grouped by what they hold."""
