"""A worker starting on a real Redis Cluster: the topology read at start with every node a seed
(one seed given, and it dies; failing seeds asked last), a cluster unreachable at start
retried until the outage limit, and how seed URLs are read. The store on a running cluster is
test_redis_cluster.py."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import time

import pytest
import redis.exceptions

from tests.adapters.state.redis_cluster_tools import (
    ROOT,
    run_worker,
    w,
    wait_all_named,
    worker_argv,
    worker_env,
)
from tests.support import servers
from worker.adapters.local.embedded import free_port
from worker.adapters.state.redis_cluster import parse_seeds
from worker.adapters.state.redis_store import RedisStore
from worker.failures import Kind, classify
from worker.ports import Stored

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("seed_role", ["master", "replica"])
def test_one_seed_that_dies_after_the_start_is_not_needed(
    restartable_redis_cluster: servers.LocalRedisCluster, seed_role: str
) -> None:
    """The store is given ONE seed node. `start()` reads the topology, and every node it
    names (masters and replicas) becomes a seed. The seed is then SIGKILLed: a master
    (its replica is promoted) or a replica (not needed at all). Loads and saves go on
    through the other nodes. A store that was not started learns the topology at its
    first call, from its one dead seed: it cannot find the cluster."""
    cluster = restartable_redis_cluster
    master = cluster.masters()[0]
    (replica,) = cluster.replicas_of(master)
    seed = master if seed_role == "master" else replica
    url = f"redis://{seed.addr}"
    rids = [f"r{i}" for i in range(100)]  # on every master
    # The cluster is formed once every node is up, but a replica shows in CLUSTER SLOTS
    # only once the gossip has it there: wait for the seed to name all six.
    wait_all_named(seed, len(cluster.nodes))

    async def main() -> None:
        store = RedisStore(url, key_prefix="one:", mode="cluster")
        lazy = RedisStore(url, key_prefix="one:", mode="cluster")
        try:
            assert store._cluster is not None
            assert not store._cluster.started
            await store.start()
            assert store._cluster.started and store._cluster.seeds == [(seed.host, seed.port)]
            every = {(n.host, n.port) for n in cluster.nodes}
            assert set(store._cluster.nodes) == every and len(store._cluster.masters) == 3
            assert await store.save_many([w(r, 0, None) for r in rids]) == []
            await asyncio.sleep(0.2)  # the replicas catch up (within a millisecond here)

            seed.kill()
            if seed is master:
                # Calls for the dead master's slots fail until its replica is promoted
                # (the worker backs off and retries the batch meanwhile).
                await asyncio.to_thread(cluster.wait_promoted, replica)
            got: dict[str, Stored | None] = {}
            failures = 0
            for _ in range(100):
                try:
                    got = await store.load_many(rids)
                    break
                except (redis.exceptions.ConnectionError, redis.exceptions.ClusterDownError):
                    failures += 1
                    await asyncio.sleep(0.1)
            assert got == {r: Stored(0, f"{r}@0".encode()) for r in rids}
            assert await store.save_many([w(r, 1, 0) for r in rids]) == []
            assert await store.load_many(rids) == {r: Stored(1, f"{r}@1".encode()) for r in rids}
            if seed is replica:
                assert failures == 0  # a replica is never asked for data
            else:
                assert (replica.host, replica.port) in store._cluster.masters
                assert (seed.host, seed.port) not in store._cluster.masters
                # The dead node is asked last from now on.
                assert store._cluster.nodes[-1] == (seed.host, seed.port)

            # Without the start: the first call knows only the dead seed.
            with pytest.raises(redis.exceptions.ConnectionError) as caught:
                await lazy.load_many(rids)
            assert classify(caught.value) is Kind.TRANSIENT
        finally:
            await store.close()
            await lazy.close()

    asyncio.run(main())


def test_an_unreachable_cluster_at_start_is_retried_then_an_outage() -> None:
    """No node answers at start: a transient error for the store (the worker retries it
    as it retries the broker at start), and past --outage-limit-s the worker exits 1;
    SIGTERM meanwhile stops it, exit 0."""
    url = f"redis://127.0.0.1:{free_port()},127.0.0.1:{free_port()}"

    async def main() -> None:
        store = RedisStore(url, mode="cluster", connect_timeout_s=1.0)
        try:
            with pytest.raises(redis.exceptions.ConnectionError) as caught:
                await store.start()
            assert classify(caught.value) is Kind.TRANSIENT
        finally:
            await store.close()

    asyncio.run(main())
    done = run_worker(url, "--outage-limit-s", "1", timeout_s=60)
    assert done.returncode == 1, done.stderr
    assert "starting the state store failed, retrying" in done.stderr
    assert "giving up: starting the state store kept failing" in done.stderr

    # SIGTERM while it retries (Kubernetes scaling in a worker that never started): it
    # stops within a backoff, exit 0.
    proc = subprocess.Popen(
        worker_argv(url, "--outage-limit-s", "600"),
        cwd=ROOT,
        env=worker_env(),
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if "starting the state store failed, retrying" in line:
                break
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
        assert time.monotonic() - sent < 10
        assert "stopped after 0 records" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def test_every_node_named_is_a_seed_and_failing_ones_are_asked_last() -> None:
    """No server: a CLUSTER SLOTS reply's masters AND replicas are learnt, kept across
    later replies that no longer name them, and asked in order: masters, the other
    known nodes, the URL's seeds, with the nodes whose last attempt failed last."""
    from worker.adapters.state.redis_cluster import ClusterClient

    client = ClusterClient("redis://s1:7000", socket_timeout_s=1, connect_timeout_s=1, retry=None)
    a, b, ra, rb = ("a", 1), ("b", 2), ("ra", 3), ("rb", 4)

    def entry(lo: int, hi: int, *nodes: tuple[str, int]) -> list[object]:
        return [lo, hi, *([h.encode(), p, b"id"] for h, p in nodes)]

    client._apply_slots([entry(0, 8191, a, ra), entry(8192, 16383, b, rb, ("?", 5))], ("s1", 7000))
    assert client.masters == [a, b]
    assert client.nodes == [a, b, ra, rb, ("s1", 7000)]  # ("?": an unknown endpoint)
    # A failover: ra now serves a's slots, and a is gone from the replies.
    client._apply_slots([entry(0, 8191, ra), entry(8192, 16383, b, rb)], b)
    assert client.nodes == [b, ra, a, rb, ("s1", 7000)]
    client._failing.update({b, a})
    assert client.nodes == [ra, rb, ("s1", 7000), b, a]


def test_seed_urls() -> None:
    options, seeds = parse_seeds("redis://u:p%40ss@h1:7000,h2:7001,redis://h3:7002/0")
    assert seeds == [("h1", 7000), ("h2", 7001), ("h3", 7002)]
    assert options["username"] == "u" and options["password"] == "p@ss"
    options, seeds = parse_seeds("rediss://:pw@[::1]:7000?ssl_cert_reqs=none")
    assert seeds == [("::1", 7000)] and options["password"] == "pw"
    assert options["connection_class"].__name__ == "SSLConnection"
    assert options["ssl_cert_reqs"] == "none"
    assert parse_seeds("h1")[1] == [("h1", 6379)]
    with pytest.raises(ValueError, match="database 0"):
        parse_seeds("redis://h1:7000/2")
    with pytest.raises(ValueError):
        parse_seeds(" , ")
