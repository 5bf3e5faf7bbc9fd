"""`python -m tests.chaos.launch run …`: the worker's own CLI with fault points.

A kill or a stop sent from outside lands wherever the worker happens to be; these land
exactly where a test needs them, so the suites do not depend on timing:

- `kill_before_save: N`   SIGKILL itself on the N-th state save, after that batch's outputs
                          were produced and acknowledged (a crash after produce, before save);
- `kill_before_commit: N` SIGKILL itself on the N-th offset commit, after that batch's states
                          were saved (a crash after save, before commit);
- `stop_before_save: P`   SIGSTOP itself once, on the first save writing a request whose id
                          starts with P: a zombie frozen mid-batch, with no Redis or Kafka call
                          in flight. It goes on with that very save after SIGCONT.

The points are given as JSON in `$DERENDER_CHAOS`. Nothing else about the worker changes:
the hooks wrap `RedisStore.save_many` and `AIOKafkaConsumer.commit` and call the originals.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Awaitable, Callable
from typing import Any

ENV = "DERENDER_CHAOS"


def _announce(what: str) -> None:
    # Straight to the log file: the process may not get to flush anything after this.
    os.write(2, f"chaos: {what}\n".encode())


def install(points: dict[str, Any]) -> None:
    from aiokafka import AIOKafkaConsumer

    from worker.adapters.redis_store import RedisStore

    counts = {"save": 0, "commit": 0}
    stopped: list[bool] = []

    save_many: Callable[..., Awaitable[list[str]]] = RedisStore.save_many
    commit: Callable[..., Awaitable[None]] = AIOKafkaConsumer.commit

    async def chaotic_save_many(self: RedisStore, writes: list[Any]) -> list[str]:
        counts["save"] += 1
        if points.get("kill_before_save") == counts["save"]:
            _announce(f"killed before save {counts['save']}")
            os.kill(os.getpid(), signal.SIGKILL)
        prefix = points.get("stop_before_save")
        if prefix and not stopped and any(w.request_id.startswith(prefix) for w in writes):
            stopped.append(True)
            _announce(f"stopped before save {counts['save']}")
            os.kill(os.getpid(), signal.SIGSTOP)
            _announce("continued")
        return await save_many(self, writes)

    async def chaotic_commit(self: AIOKafkaConsumer, *args: Any, **kwargs: Any) -> None:
        counts["commit"] += 1
        if points.get("kill_before_commit") == counts["commit"]:
            _announce(f"killed before commit {counts['commit']}")
            os.kill(os.getpid(), signal.SIGKILL)
        await commit(self, *args, **kwargs)

    RedisStore.save_many = chaotic_save_many  # type: ignore[method-assign]
    AIOKafkaConsumer.commit = chaotic_commit  # type: ignore[method-assign]


def main() -> int:
    install(json.loads(os.environ.get(ENV) or "{}"))
    from worker.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    raise SystemExit(main())
