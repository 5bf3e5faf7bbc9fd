"""The one loop every driver runs (`run`, `serve`, `replay`, the tests): one batch's
steps (loop.py), the pure routing of its records (pipeline.py) and the commit protocol
(checkpoint.py)."""
