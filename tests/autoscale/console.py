"""The harness's progress lines, timed from its start."""

from __future__ import annotations

import time

T0 = time.time()


def say(line: str) -> None:
    print(f"[{time.time() - T0:7.1f}s] {line}", flush=True)
