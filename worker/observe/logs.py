"""Logging: plain text for people, one JSON object per line for log pipelines."""

from __future__ import annotations

import json
import logging
import sys
import time

from worker.constants import ENV_PREFIX

# Set by `run --processes N` in each worker process's environment (worker/run/processes.py):
# the process's index, which its log lines carry.
PROCESS_INDEX_ENV = ENV_PREFIX + "PROCESS_INDEX"


class JsonFormatter(logging.Formatter):
    def __init__(self, process: str | None = None) -> None:
        super().__init__()
        self.process = int(process) if process is not None else None

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, object] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        if self.process is not None:
            doc["process"] = self.process
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, ensure_ascii=False)


def configure(fmt: str = "text", level: str = "INFO", process: str | None = None) -> None:
    """`process`: the index of a worker process under `run --processes` (None: alone)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter(process))
    else:
        name = "%(name)s" if process is None else f"%(name)s[{process}]"
        handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s {name}: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiokafka logs every heartbeat hiccup during a rebalance as a warning.
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, root.level))
