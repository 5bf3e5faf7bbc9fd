"""One worker's capacity, measured on a backlog."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

from tests.autoscale.checks.reader import Reader
from tests.autoscale.config import PARTITIONS, ROOT, VENV_BIN
from tests.autoscale.load.publisher import Publisher
from tests.autoscale.load.workload import workload
from worker.adapters.local.embedded import create_topics, free_port
from worker.constants import DONE


def measure_capacity(
    bootstrap: str,
    redis_url: str,
    tok: Any,
    workdir: Path,
    records: int,
    client_flags: tuple[str, ...] = (),
) -> float:
    """One worker's records/s on a backlog: everything published first, then one worker
    consumes it; from its first output to the last [DONE]."""
    folder = workdir / "capacity"
    folder.mkdir(parents=True)
    tag = uuid.uuid4().hex[:6]
    tin, tout, tdlq = f"cap-in-{tag}", f"cap-out-{tag}", f"cap-dlq-{tag}"
    asyncio.run(create_topics(bootstrap, [tin, tout], PARTITIONS))
    asyncio.run(create_topics(bootstrap, [tdlq], 1))
    recs = workload(tok, "cap", records // 31, 60, 7, 1000)
    pub = Publisher(bootstrap, tin)
    pub.burst(recs)
    pub.close()
    reader = Reader(bootstrap, tout)
    port = free_port()
    with open(folder / "worker.log", "ab") as f:
        proc = subprocess.Popen(
            [
                str(VENV_BIN / "derender-worker"), "run", "--bootstrap-servers", bootstrap,
                "--redis-url", redis_url, "--input-topic", tin, "--output-topic", tout,
                "--dlq-topic", tdlq, "--group-id", f"cap-{tag}", "--state-prefix", f"cap-{tag}:",
                "--metrics-port", str(port), "--metrics-host", "127.0.0.1",
                *client_flags,
            ],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=f,
        )  # fmt: skip
    want = {r.rid for r in recs}
    deadline = time.time() + 180
    try:
        while not want <= reader.dones and time.time() < deadline:
            time.sleep(0.2)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(30)
        reader.close()
    if not want <= reader.dones:
        raise SystemExit("capacity: the single worker did not finish its backlog in 180 s")
    first = min(o.at for o in reader.outs)
    last = max(o.at for o in reader.outs if o.value == DONE)
    return len(recs) / (last - first)
