"""`check_bootstrapped`: a consumer that knows no broker is an outage, not a silent hang.

aiokafka's bootstrap accepts a MetadataResponse listing no brokers (a KRaft broker just
resumed from a freeze answered so in `.ci/run`'s chaos suite); its group coordinator then
died on "Did we not perform bootstrap?" and the rebuilt worker never joined its group.
"""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.errors import KafkaConnectionError

from worker.adapters.broker.kafka import check_bootstrapped


def test_a_consumer_that_knows_no_broker_fails_the_connect() -> None:
    async def scenario() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers="127.0.0.1:9")  # (never started)
        try:
            with pytest.raises(KafkaConnectionError, match="lists no brokers"):
                check_bootstrapped(consumer)
        finally:
            await consumer.stop()

    asyncio.run(scenario())


@pytest.mark.integration
def test_a_started_consumer_knows_the_broker(kafka_bootstrap: str) -> None:
    async def scenario() -> None:
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap, group_id="g-bootstrapped")
        await consumer.start()
        try:
            check_bootstrapped(consumer)  # (raises if the metadata had no broker)
        finally:
            await consumer.stop()

    asyncio.run(scenario())
