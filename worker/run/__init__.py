"""`derender-worker run`: the shell around the one loop: the lifecycle (runner.py), the
partitions across rebalances (assignment.py), what was done (accounts.py), SIGTERM from
the first instant (stop_signal.py) and start-up steps a stop cuts short (stoppable.py),
and `--processes` (processes.py, cpus.py, parent_death.py)."""
