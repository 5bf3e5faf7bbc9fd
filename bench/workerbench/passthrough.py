"""The passthrough: consume → produce with the worker's clients and batching, nothing in
between (a subprocess of worker_bench.py, `_passthrough`)."""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
from typing import Any

from aiokafka import ConsumerRebalanceListener

from worker.constants import H_KIND, H_PART, H_REQUEST_ID, H_SEQ
from workerbench.profile import ASSIGNED, H_BENCH_SEQ, SCRIPT

# -- the passthrough (a subprocess of this file) ------------------------------------------


class _Assigned(ConsumerRebalanceListener):  # type: ignore[misc]
    """The passthrough's share of the partitions on stderr, for `settle`."""

    async def on_partitions_revoked(self, revoked: Any) -> None:
        pass

    async def on_partitions_assigned(self, assigned: Any) -> None:
        # One write with its newline: the processes of a system share the log file.
        sys.stderr.write(f"{ASSIGNED} pid {os.getpid()}: {len(assigned)}\n")
        sys.stderr.flush()


async def _passthrough_loop(argv: list[str]) -> int:
    """Consume → produce with the worker's clients and batching, nothing in between."""
    from worker.adapters.broker.kafka import make_consumer, make_producer
    from worker.adapters.broker.kafka_sink import KafkaSink
    from worker.ports import OutRecord
    from worker.settings import add_flags, from_args

    parser = argparse.ArgumentParser(prog="worker_bench.py _passthrough")
    add_flags(parser, environ={})
    s = from_args(parser.parse_args(argv))
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    producer = make_producer(s)
    await producer.start()
    consumer = make_consumer(s)
    await consumer.start()
    consumer.subscribe([s.input_topic], listener=_Assigned())
    # Produced the way the worker produces: its own sink (worker/adapters/broker/kafka_sink.py).
    sink = KafkaSink(producer, s.output_topic, s.dlq_topic)
    kind = b"pass"
    try:
        while not stopping.is_set():
            batch = await consumer.getmany(timeout_ms=s.poll_timeout_ms, max_records=s.max_batch)
            if not batch:
                continue
            outs = []
            offsets = {}
            for tp, msgs in batch.items():
                for m in msgs:
                    seq = next((v for k, v in m.headers if k == H_BENCH_SEQ), b"-1")
                    # H_PART names the input record (partition:offset): the bench counts
                    # distinct copies with it (see Reader.copies).
                    where = f"{tp.partition}:{m.offset}".encode()
                    headers = [(H_REQUEST_ID, m.key), (H_SEQ, seq), (H_PART, where), (H_KIND, kind)]
                    outs.append(OutRecord(m.key.decode(), m.value, headers, "pass"))
                offsets[tp] = msgs[-1].offset + 1
            await sink.send(outs, [])
            await consumer.commit(offsets)
    finally:
        await consumer.stop()
        await producer.stop()
    return 0


def passthrough_main(argv: list[str]) -> int:
    """On the worker's event loop (`--event-loop`, uvloop by default when installed)."""
    from worker.cli import event_loop_factory
    from worker.settings import add_flags, from_args

    parser = argparse.ArgumentParser(prog="worker_bench.py _passthrough")
    add_flags(parser, environ={})
    s = from_args(parser.parse_args(argv))
    if s.processes > 1:
        return _passthrough_processes(argv, s.processes)
    with asyncio.Runner(loop_factory=event_loop_factory(s.event_loop)) as runner:
        return runner.run(_passthrough_loop(argv))


def _passthrough_processes(argv: list[str], n: int) -> int:
    """`--processes N`: N passthrough loops in one consumer group, as the worker's
    supervisor runs N workers (the like-for-like ceiling of a multi-process pod)."""
    me = [sys.executable, str(SCRIPT), "_passthrough"]
    children = [subprocess.Popen([*me, *argv, "--processes", "1"]) for _ in range(n)]

    def forward(sig: int, _frame: object) -> None:
        for c in children:
            if c.poll() is None:
                c.send_signal(sig)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    codes = [c.wait() for c in children]
    return next((c for c in codes if c != 0), 0)
