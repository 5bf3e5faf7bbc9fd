"""The producers' batches are kept under the written topics' `max.message.bytes`.

A record batch over a topic's limit is refused whole; the sinks then send its records
again one by one, after any later batch of the same partition that was delivered in the
meantime, so the other requests in it would get their outputs out of order. With the
batches kept under the limit, a refused batch is one record too large by itself.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import uuid
from collections.abc import Callable

import pytest
from aiokafka.admin import AIOKafkaAdminClient
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from worker.adapters.broker.kafka import check_access, within_limit
from worker.settings import Settings, add_flags, from_args


def _settings(*argv: str) -> Settings:
    parser = argparse.ArgumentParser()
    add_flags(parser, environ={})
    return from_args(parser.parse_args(list(argv)))


def test_batches_over_the_limit_are_cut_to_it_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    s = _settings("--batch-bytes", "262144")
    with caplog.at_level(logging.WARNING, "derender.worker"):
        cut = within_limit(s, 12000)
    assert cut.batch_bytes == 12000
    assert cut.max_output_bytes == s.max_output_bytes  # (only the batches change)
    assert "--batch-bytes 262144 is over the max.message.bytes of the topics written" in (
        caplog.text
    )


@pytest.mark.parametrize("limit", [None, 262144, 1048588])
def test_batches_within_the_limit_or_an_unknown_one_stay_as_set(
    limit: int | None, caplog: pytest.LogCaptureFixture
) -> None:
    s = _settings("--batch-bytes", "262144")
    with caplog.at_level(logging.WARNING, "derender.worker"):
        assert within_limit(s, limit) is s
    assert caplog.text == ""


@pytest.mark.integration
def test_the_access_check_reads_the_smallest_limit_of_the_topics_written(
    kafka_bootstrap: str, new_topic: Callable[..., str]
) -> None:
    inp, out, dlq = new_topic(prefix="in"), new_topic(prefix="out"), new_topic(prefix="dlq")

    def settings() -> Settings:
        return _settings(
            "--bootstrap-servers", kafka_bootstrap,
            "--input-topic", inp, "--output-topic", out, "--dlq-topic", dlq,
            "--group-id", f"g-{uuid.uuid4().hex[:8]}",
        )  # fmt: skip

    async def limit_topic(topic: str, limit: int) -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            resource = ConfigResource(
                ConfigResourceType.TOPIC, topic, {"max.message.bytes": str(limit)}
            )
            await admin.alter_configs([resource])
        finally:
            await admin.close()

    # Kafka's default for a topic (the broker's message.max.bytes).
    assert asyncio.run(check_access(settings())) == 1048588
    asyncio.run(limit_topic(dlq, 50000))
    asyncio.run(limit_topic(out, 12000))
    asyncio.run(limit_topic(inp, 3000))  # (the input topic is read, not written)
    assert asyncio.run(check_access(settings())) == 12000
