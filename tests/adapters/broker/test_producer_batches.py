"""The producer's record batches are as large as `--batch-bytes` (aiokafka's own default,
16 KiB, cut a batch's outputs into ~10 record batches sent one produce request after
another)."""

from __future__ import annotations

import argparse
import asyncio

import pytest

from worker.adapters.broker.kafka import make_producer, make_transactional_producer
from worker.settings import add_flags, from_args


def _fit(argv: list[str], transactional: bool) -> int:
    """How many 1,000-byte records one record batch of the worker's producer takes."""
    parser = argparse.ArgumentParser()
    add_flags(parser, environ={})
    s = from_args(parser.parse_args(argv))

    async def fill() -> int:
        producer = make_transactional_producer(s, "t") if transactional else make_producer(s)
        try:
            batch = producer.create_batch()
            n = 0
            while batch.append(key=b"k", value=b"x" * 1000, timestamp=None) is not None:
                n += 1
            return n
        finally:
            await producer.stop()

    return asyncio.run(fill())


@pytest.mark.parametrize("transactional", [False, True])
def test_a_record_batch_holds_batch_bytes(transactional: bool) -> None:
    default = _fit([], transactional)
    small = _fit(["--batch-bytes", "16384"], transactional)
    assert 250 <= default <= 262 and 15 <= small <= 16, (default, small)
