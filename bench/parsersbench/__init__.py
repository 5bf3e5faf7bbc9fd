"""The parts of bench/parsers_bench.py, grouped by what they hold."""
