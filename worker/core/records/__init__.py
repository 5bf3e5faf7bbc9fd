"""What each kind of record does to a request: request.py opens it (seq 0), stream.py
(chunk, end, abort), response.py (a whole response), echo.py, control.py (the early-stop
rule), engine_metrics.py (a generate output's metrics)."""
