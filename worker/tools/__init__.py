"""The user-facing tools around the worker: `publish` (publisher.py, control_reader.py),
`tail`, `replay`, `demo` and `servers`."""
