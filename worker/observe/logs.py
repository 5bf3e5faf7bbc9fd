"""Logging: plain text for people, one JSON object per line for log pipelines."""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Sequence

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


class Redacting(logging.Formatter):
    """Another formatter's lines with every secret replaced by `***`: whatever a library
    puts in a message or an exception (a URL, a config it echoes at DEBUG), the values
    of the secret flags never reach the log. Secrets shorter than `MIN_SECRET` are left
    alone (they would mask ordinary words), so a real secret is longer."""

    MIN_SECRET = 4

    def __init__(self, inner: logging.Formatter, secrets: Sequence[str]) -> None:
        super().__init__()
        self.inner = inner
        # Longest first: a secret that contains another is masked whole.
        self.secrets = sorted({s for s in secrets if len(s) >= self.MIN_SECRET}, key=len)[::-1]

    def format(self, record: logging.LogRecord) -> str:
        line = self.inner.format(record)
        for secret in self.secrets:
            line = line.replace(secret, "***")
        return line


def configure(
    fmt: str = "text",
    level: str = "INFO",
    process: str | None = None,
    secrets: Sequence[str] = (),
) -> None:
    """`process`: the index of a worker process under `run --processes` (None: alone);
    `secrets`: values never to show (`settings.secret_values`)."""
    handler = logging.StreamHandler(sys.stderr)
    formatter: logging.Formatter
    if fmt == "json":
        formatter = JsonFormatter(process)
    else:
        name = "%(name)s" if process is None else f"%(name)s[{process}]"
        formatter = logging.Formatter(f"%(asctime)s %(levelname)s {name}: %(message)s")
    handler.setFormatter(Redacting(formatter, secrets) if secrets else formatter)
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # aiokafka logs every heartbeat hiccup during a rebalance as a warning.
    logging.getLogger("aiokafka").setLevel(max(logging.WARNING, root.level))
