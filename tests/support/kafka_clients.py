"""The worker's Kafka clients, as a fixture: a test that uses `kafka_client` runs once
per client, every worker it starts (a child process) reading `DERENDER_KAFKA_CLIENT`."""

from __future__ import annotations

import pytest

from worker.settings import KAFKA_CLIENTS


@pytest.fixture(params=KAFKA_CLIENTS)
def kafka_client(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    client: str = request.param
    monkeypatch.setenv("DERENDER_KAFKA_CLIENT", client)
    return client
