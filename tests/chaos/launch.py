"""`python -m tests.chaos.launch run …`: the worker's own CLI with fault points.

A kill or a stop sent from outside lands wherever the worker happens to be; these land
exactly where a test needs them, so the suites do not depend on timing:

- `kill_before_save: N`   SIGKILL itself on the N-th state save, after that batch's outputs
                          were produced and acknowledged (a crash after produce, before save);
- `kill_before_commit: N` SIGKILL itself on the N-th offset commit, after that batch's states
                          were saved (a crash after save, before commit);
- `kill_before_txn_commit: N` SIGKILL itself on the N-th transaction commit (exactly-once),
                          after that batch's outputs were produced in the transaction and
                          its states saved: the transaction dies open and is aborted;
- `stall_txn_send: N`     the N-th transactional record batch is never acknowledged, and the
                          abort of its producer's transaction never returns: what a broker
                          restart did to aiokafka, silently, for minutes;
- `delay_commit_s: S`      every offset commit waits S seconds before it goes out (a slow
                          group coordinator): the commit in the background is still in
                          flight when the lane moves on, or when a stop arrives;
- `stop_before_save: P`   SIGSTOP itself once, on the first save writing a request whose id
                          starts with P: a zombie frozen mid-batch, with no Redis or Kafka call
                          in flight. It goes on with that very save after SIGCONT.

The points are given as JSON in `$DERENDER_CHAOS`. Nothing else about the worker changes:
the hooks wrap `RedisStore.save_many`, `AIOKafkaConsumer.commit` and
`AIOKafkaProducer.commit_transaction` / `send_batch` / `abort_transaction` (on
`--kafka-client confluent`, the same seams of its adapter) and call the originals.
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
    import asyncio

    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    from worker.adapters.state.redis_store import RedisStore

    counts = {"save": 0, "commit": 0, "txn_commit": 0, "txn_send": 0}
    stalled: set[int] = set()  # the producers (by id) whose abort never returns
    stopped: list[bool] = []

    save_many: Callable[..., Awaitable[list[str]]] = RedisStore.save_many
    commit: Callable[..., Awaitable[None]] = AIOKafkaConsumer.commit
    commit_transaction: Callable[..., Awaitable[None]] = AIOKafkaProducer.commit_transaction
    send_batch: Callable[..., Awaitable[Any]] = AIOKafkaProducer.send_batch
    abort_transaction: Callable[..., Awaitable[None]] = AIOKafkaProducer.abort_transaction

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
        if delay := points.get("delay_commit_s"):
            await asyncio.sleep(delay)
        await commit(self, *args, **kwargs)

    async def chaotic_commit_transaction(self: AIOKafkaProducer) -> None:
        counts["txn_commit"] += 1
        if points.get("kill_before_txn_commit") == counts["txn_commit"]:
            _announce(f"killed before transaction commit {counts['txn_commit']}")
            os.kill(os.getpid(), signal.SIGKILL)
        await commit_transaction(self)

    async def chaotic_send_batch(self: AIOKafkaProducer, *args: Any, **kwargs: Any) -> Any:
        if self._txn_manager is not None:
            counts["txn_send"] += 1
            if points.get("stall_txn_send") == counts["txn_send"]:
                _announce(f"stalled transactional send {counts['txn_send']}")
                stalled.add(id(self))
                return asyncio.get_running_loop().create_future()  # never acknowledged
        return await send_batch(self, *args, **kwargs)

    async def chaotic_abort_transaction(self: AIOKafkaProducer) -> None:
        if id(self) in stalled:
            _announce("stalled transaction abort")
            await asyncio.Event().wait()
        await abort_transaction(self)

    AIOKafkaProducer.commit_transaction = chaotic_commit_transaction  # type: ignore[method-assign]
    AIOKafkaProducer.send_batch = chaotic_send_batch  # type: ignore[method-assign]
    AIOKafkaProducer.abort_transaction = chaotic_abort_transaction  # type: ignore[method-assign]
    RedisStore.save_many = chaotic_save_many  # type: ignore[method-assign]
    AIOKafkaConsumer.commit = chaotic_commit  # type: ignore[method-assign]
    _install_confluent(points, counts, stalled)


def _install_confluent(points: dict[str, Any], counts: dict[str, int], stalled: set[int]) -> None:
    """The same points on `--kafka-client confluent`, at its adapter's seams: the offset
    commit, a partition's transaction commit, a transactional send and its abort."""
    import asyncio

    from worker.adapters.broker.confluent.source import ConfluentSource
    from worker.adapters.broker.confluent.txn import ConfluentTransactions

    commit_ends = ConfluentSource.commit_ends
    commit_one = ConfluentTransactions._commit_one
    txn_send = ConfluentTransactions.send
    abort = ConfluentTransactions._abort

    async def chaotic_commit_ends(self: ConfluentSource, ends: Any) -> None:
        counts["commit"] += 1
        if points.get("kill_before_commit") == counts["commit"]:
            _announce(f"killed before commit {counts['commit']}")
            os.kill(os.getpid(), signal.SIGKILL)
        if delay := points.get("delay_commit_s"):
            await asyncio.sleep(delay)
        await commit_ends(self, ends)

    async def chaotic_commit_one(self: ConfluentTransactions, producer: Any, *a: Any) -> None:
        counts["txn_commit"] += 1
        if points.get("kill_before_txn_commit") == counts["txn_commit"]:
            _announce(f"killed before transaction commit {counts['txn_commit']}")
            os.kill(os.getpid(), signal.SIGKILL)
        await commit_one(self, producer, *a)

    async def chaotic_txn_send(self: ConfluentTransactions, outputs: Any, dls: Any) -> None:
        counts["txn_send"] += 1
        if points.get("stall_txn_send") == counts["txn_send"]:
            _announce(f"stalled transactional send {counts['txn_send']}")
            parts = {r.source_partition for r in [*outputs, *dls]}
            stalled.update(id(self._sink(p).producer) for p in parts)
            await asyncio.Event().wait()  # never acknowledged
        await txn_send(self, outputs, dls)

    async def chaotic_abort(self: ConfluentTransactions, tp: Any, producer: Any) -> None:
        if id(producer) in stalled:
            _announce("stalled transaction abort")
            await asyncio.Event().wait()
        await abort(self, tp, producer)

    ConfluentSource.commit_ends = chaotic_commit_ends  # type: ignore[method-assign]
    ConfluentTransactions._commit_one = chaotic_commit_one  # type: ignore[method-assign]
    ConfluentTransactions.send = chaotic_txn_send  # type: ignore[method-assign]
    ConfluentTransactions._abort = chaotic_abort  # type: ignore[method-assign]


def _dump_tasks(signum: int, frame: Any) -> None:
    """SIGUSR1: every asyncio task's stack to the log (a test that times out asks for it)."""
    import asyncio
    import sys

    try:
        tasks = asyncio.all_tasks(asyncio.get_running_loop())
    except RuntimeError:
        return
    for task in tasks:
        # (Task.print_stack shows a suspended coroutine's outermost frame only: walk the
        # chain of awaits to where it waits.)
        print(f"--- {task.get_name()}", file=sys.stderr)
        coro: Any = task.get_coro()
        while coro is not None:
            frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
            if frame is not None:
                print(
                    f"    {frame.f_code.co_filename}:{frame.f_lineno} {frame.f_code.co_name}",
                    file=sys.stderr,
                )
            coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    sys.stderr.flush()


def main() -> int:
    signal.signal(signal.SIGUSR1, _dump_tasks)
    install(json.loads(os.environ.get(ENV) or "{}"))
    from worker.cli import main as cli_main

    return cli_main()


if __name__ == "__main__":
    raise SystemExit(main())
