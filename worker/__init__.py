"""derender-worker: LLM token streams in, OpenAI-shaped responses out.

The public Python API (docs/integrate/python-api.md), importable from `worker`:

- `Publisher`, `sse_records`: the engine side, ChunkRecords onto the input topic;
- `OutputReader`, `Output`: the gateway's and the archiver's side, the output topic read
  with each output once, in order, and a request's end marked;
- `ChunkRecord`, `ControlRecord`: the input record and the early-stop record, as types;
- `__version__`.

Each name is imported on first use (PEP 562), so `import worker` (and every
`import worker.core...`) loads no Kafka or Redis client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__all__ = [
    "ChunkRecord",
    "ControlRecord",
    "Output",
    "OutputReader",
    "Publisher",
    "__version__",
    "sse_records",
]

# name -> the module that defines it
_HOMES = {
    "ChunkRecord": "worker.wire.inbound",
    "ControlRecord": "worker.wire.control",
    "Output": "worker.wire.output",
    "OutputReader": "worker.tools.output_reader",
    "Publisher": "worker.tools.publisher",
    "sse_records": "worker.tools.publisher",
}

if TYPE_CHECKING:
    from worker.tools.output_reader import OutputReader
    from worker.tools.publisher import Publisher, sse_records
    from worker.wire.control import ControlRecord
    from worker.wire.inbound import ChunkRecord
    from worker.wire.output import Output

    __version__: str


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return _version()
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'worker' has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # (found directly from now on)
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


def _version() -> str:
    """The installed distribution's version (pyproject.toml holds the one copy)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("derender-worker")
    except PackageNotFoundError:  # (run from a source tree that was never installed)
        return "0+unknown"
