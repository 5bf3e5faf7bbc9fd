"""create_topics on a broker that does not yet name its controller (just restarted): it
refreshes the metadata until one is named, within its bound (a seam test: the admin
client's cluster view is the one thing faked)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from worker.adapters.local.embedded import ServerError, _await_controller


class Cluster:
    def __init__(self, named_after: int | None) -> None:
        self.updates = 0
        self.named_after = named_after
        self.controller: object | None = None


def admin_of(cluster: Cluster) -> SimpleNamespace:
    async def force_metadata_update() -> None:
        cluster.updates += 1
        if cluster.named_after is not None and cluster.updates >= cluster.named_after:
            cluster.controller = SimpleNamespace(nodeId=1)

    return SimpleNamespace(
        _client=SimpleNamespace(cluster=cluster, force_metadata_update=force_metadata_update)
    )


def test_it_waits_until_the_broker_names_its_controller() -> None:
    cluster = Cluster(named_after=3)
    asyncio.run(_await_controller(admin_of(cluster), timeout_s=5))
    assert cluster.controller is not None and cluster.updates == 3


def test_a_controller_already_known_costs_no_round_trip() -> None:
    cluster = Cluster(named_after=None)
    cluster.controller = SimpleNamespace(nodeId=1)
    asyncio.run(_await_controller(admin_of(cluster), timeout_s=5))
    assert cluster.updates == 0


def test_a_broker_that_never_names_one_is_an_error_within_the_bound() -> None:
    cluster = Cluster(named_after=None)
    with pytest.raises(ServerError, match=r"no controller within 0\.2 s"):
        asyncio.run(_await_controller(admin_of(cluster), timeout_s=0.2))
    assert cluster.updates >= 1
