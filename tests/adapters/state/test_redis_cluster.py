"""The state store on a real Redis Cluster (3 masters with a replica each, local processes
from the same redis-server): what the contract suites cannot show — fencing across nodes,
the redirections a live cluster answers with (MOVED, ASK, TRYAGAIN), scripts lost on a
node, a failover, credentials refused at start, waiting for replicas. The topology read at
start and the seed URLs are in test_redis_cluster_start.py."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import pytest
import redis.exceptions

from tests.adapters.state.redis_cluster_tools import run, run_worker, w
from tests.support import servers
from worker.adapters.state.redis_cluster import slot_of
from worker.adapters.state.redis_store import RedisStore
from worker.failures import ConfigError, Kind, classify
from worker.ports import Stored

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster() -> Iterator[servers.LocalRedisCluster]:
    try:
        c = servers.LocalRedisCluster(3, 1)
    except servers.ServerError as e:
        pytest.skip(str(e))
    with c:
        yield c


def on_other_master(
    cluster: servers.LocalRedisCluster, prefix: str, than: str, n: int = 1
) -> list[str]:
    """Request ids whose keys live on another master than the key `than`."""
    slots = cluster.slots()
    master = slots[slot_of(than)]
    out: list[str] = []
    i = 0
    while len(out) < n:
        rid = f"r{i}"
        if slots[slot_of(f"{prefix}{{{rid}}}")] is not master:
            out.append(rid)
        i += 1
    return out


def test_a_zombie_is_fenced_though_its_epoch_key_is_on_another_master(
    redis_cluster_url: str,
) -> None:
    """Each partition's epoch key and its requests' keys sit in different slots; the
    epoch a write carries is compared against the one stored in the request's own hash,
    so no cross-slot atomicity is needed: the older owner's write is refused."""
    prefix = f"t{uuid.uuid4().hex[:8]}:"
    scope = "g/topic/0"

    async def body(store: RedisStore) -> None:
        epoch_key = store.epoch_key(scope)
        assert store._cluster is not None
        await store.claim_epoch("warm-up")
        slots = {s: a for s, a in enumerate(store._cluster._slots)}
        rids = [f"req-{i}" for i in range(40)]
        apart = [r for r in rids if slots[slot_of(store.key(r))] != slots[slot_of(epoch_key)]]
        assert len(apart) > 10  # most of them live on another master than the epoch key
        zombie = await store.claim_epoch(scope)
        assert await store.save_many([w(r, 0, None, epoch=zombie) for r in apart]) == []
        owner = await store.claim_epoch(scope)  # the partition moved: a new owner
        assert owner > zombie
        got = await store.load_many(apart)
        assert await store.save_many([w(r, 1, 0, epoch=owner) for r in apart]) == []
        # The zombie, frozen with the state it had loaded, writes late: all refused,
        # whether its seq matches (it loaded seq 0 too) or not.
        late = [w(r, 1, 0, epoch=zombie, tag="-zombie") for r in apart]
        assert await store.save_many(late) == apart
        assert await store.load_many(apart) == {r: Stored(1, f"{r}@1".encode()) for r in apart}
        assert got == {r: Stored(0, f"{r}@0".encode()) for r in apart}

    run(redis_cluster_url, body, prefix)


def test_moved_slots_are_followed(cluster: servers.LocalRedisCluster) -> None:
    """A slot moved to another master after the store read the map: the store is
    answered MOVED, follows it within the same call, and refreshes its map."""
    prefix = "m:"
    rids = [f"r{i}" for i in range(200)]

    async def body(store: RedisStore) -> None:
        assert await store.save_many([w(r, 0, None) for r in rids]) == []
        assert store._cluster is not None
        slots = cluster.slots()
        masters = cluster.masters()
        key = store.key(rids[0])
        source = slots[slot_of(key)]
        target = next(m for m in masters if m is not source)
        # Every slot of the first 50 requests moves to `target`.
        moving = sorted(
            {slot_of(store.key(r)) for r in rids[:50]}
            - {s for s, m in slots.items() if m is target}
        )
        for s in moving:
            cluster.move_slots([s], slots[s], target)
        refreshes = store._cluster.refreshes
        assert await store.load_many(rids) == {r: Stored(0, f"{r}@0".encode()) for r in rids}
        assert store._cluster.redirects >= 1 and store._cluster.refreshes > refreshes
        assert await store.save_many([w(r, 1, 0) for r in rids]) == []
        assert await store.load_many(rids) == {r: Stored(1, f"{r}@1".encode()) for r in rids}
        for s in moving:
            assert cluster.slots()[s] is target

    run(cluster.url, body, prefix)


def test_a_slot_in_mid_migration_is_served_through_ask_and_tryagain(
    cluster: servers.LocalRedisCluster,
) -> None:
    """A slot MIGRATING with some of its keys already on the target: single-key calls for
    moved or new keys get ASK and are sent to the target behind ASKING; a call with keys
    on both sides gets TRYAGAIN and is split into single-key calls."""
    prefix = "a:"
    slot_keys: dict[int, list[str]] = {}
    i = 0
    while True:  # three requests of one slot
        rid = f"q{i}"
        slot_keys.setdefault(slot_of(f"{prefix}{{{rid}}}"), []).append(rid)
        i += 1
        same = next((v for v in slot_keys.values() if len(v) == 3), None)
        if same:
            break
    a, b, c = same
    slot = slot_of(f"{prefix}{{{a}}}")

    async def body(store: RedisStore) -> None:
        assert await store.save_many([w(a, 0, None), w(b, 0, None)]) == []
        source = cluster.slots()[slot]
        target = next(m for m in cluster.masters() if m is not source)
        src_id, dst_id = source.node_id(), target.node_id()
        target.call("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        source.call("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        source.call("MIGRATE", target.host, target.port, store.key(a), 0, 5000)
        assert store._cluster is not None
        redirects = store._cluster.redirects
        # a: moved (ASK), b: still on the source, c: new (ASK; created on the target).
        got = await store.load_many([a, b, c])
        assert got == {a: Stored(0, f"{a}@0".encode()), b: Stored(0, f"{b}@0".encode()), c: None}
        assert await store.save_many([w(a, 1, 0), w(b, 1, 0), w(c, 0, None)]) == []
        assert store._cluster.redirects > redirects
        with servers.RespConnection(target.host, target.port) as conn:
            for rid in (a, c):  # the importing node answers for them behind ASKING only
                conn.call("ASKING")
                assert conn.call("EXISTS", store.key(rid)) == 1
        # Finish the migration; the store follows the MOVED.
        cluster.move_slots([slot], source, target)
        got = await store.load_many([a, b, c])
        assert got == {
            a: Stored(1, f"{a}@1".encode()),
            b: Stored(1, f"{b}@1".encode()),
            c: Stored(0, f"{c}@0".encode()),
        }

    run(cluster.url, body, prefix)


def test_scripts_lost_on_a_node_are_loaded_again(redis_cluster_url: str) -> None:
    async def body(store: RedisStore) -> None:
        rids = [f"r{i}" for i in range(60)]
        assert await store.save_many([w(r, 0, None) for r in rids]) == []
        assert store._cluster is not None
        for host, port in store._cluster.masters:
            servers.redis_call(host, port, "SCRIPT", "FLUSH")
        masters = len(store._cluster.masters)
        before = store.round_trips
        # Loads are plain HMGETs: no script needed.
        assert await store.load_many(rids) == {r: Stored(0, f"{r}@0".encode()) for r in rids}
        assert store.round_trips - before == masters
        # NOSCRIPT from every master, then the scripts and the calls again: 2 per master.
        before = store.round_trips
        assert await store.save_many([w(r, 1, 0) for r in rids]) == []
        assert store.round_trips - before == 2 * masters
        before = store.round_trips
        assert await store.save_many([w(r, 2, 1) for r in rids]) == []
        assert store.round_trips - before == masters
        assert await store.load_many(rids) == {r: Stored(2, f"{r}@2".encode()) for r in rids}

    run(redis_cluster_url, body)


def test_a_killed_master_fails_over_to_its_replica(cluster: servers.LocalRedisCluster) -> None:
    """A master SIGKILLed: calls for its slots fail (connection refused, then CLUSTERDOWN)
    until its replica is promoted; then the store finds the new master on its own, with
    every acknowledged write there (the replica had them: nothing was in flight)."""
    rids = [f"r{i}" for i in range(100)]

    async def body(store: RedisStore) -> None:
        assert await store.save_many([w(r, 0, None) for r in rids]) == []
        victim = cluster.masters()[0]
        (replica,) = cluster.replicas_of(victim)
        # Let the replica catch up, as it does within a millisecond here.
        await asyncio.sleep(0.2)
        victim.kill()
        with pytest.raises((redis.exceptions.ConnectionError, redis.exceptions.ClusterDownError)):
            await store.load_many(rids)
        await asyncio.to_thread(cluster.wait_promoted, replica)
        got: dict[str, Stored | None] = {}
        for _ in range(100):
            try:
                got = await store.load_many(rids)
                break
            except (redis.exceptions.ConnectionError, redis.exceptions.ClusterDownError):
                await asyncio.sleep(0.1)
        assert got == {r: Stored(0, f"{r}@0".encode()) for r in rids}
        assert await store.save_many([w(r, 1, 0) for r in rids]) == []
        assert (replica.host, replica.port) in store._cluster.masters  # type: ignore[union-attr]

    run(cluster.url, body)


def test_credentials_in_the_url_apply_to_every_node() -> None:
    """A cluster whose nodes require a password: the one in the seed URL opens every
    master; without it the store fails with an authentication error, which the worker
    treats as a configuration error (exit 2, no retrying)."""
    try:
        c = servers.LocalRedisCluster(2, 1, password="s3cr@t")
    except servers.ServerError as e:
        pytest.skip(str(e))
    with c:
        assert c.url.startswith("redis://:s3cr%40t@")
        rids = [f"r{i}" for i in range(50)]

        async def body(store: RedisStore) -> None:
            assert await store.save_many([w(r, 0, None) for r in rids]) == []
            assert await store.load_many(rids) == {r: Stored(0, f"{r}@0".encode()) for r in rids}
            assert store._cluster is not None and len(store._cluster.masters) == 2
            assert "s3cr" not in repr(store)

        run(c.url, body)
        bare = "redis://" + c.url.split("@", 1)[1]

        async def refused(store: RedisStore) -> None:
            with pytest.raises(redis.exceptions.RedisError) as caught:
                await store.load_many(rids)
            assert classify(caught.value) is Kind.CONFIG, repr(caught.value)

        run(bare, refused)

        # At start (what `derender-worker run` does first): a ConfigError whose message
        # names the fix and the nodes, never a password, for no password or a wrong one.
        wrong = "redis://:n0tThat@" + c.url.split("@", 1)[1]
        for url in (bare, wrong):

            async def at_start(store: RedisStore) -> None:
                with pytest.raises(ConfigError) as caught:
                    await store.start()
                message = str(caught.value)
                assert "refused the credentials" in message and "--redis-url" in message
                assert c.nodes[0].addr in message
                assert "s3cr" not in message and "n0tThat" not in message
                assert classify(caught.value) is Kind.CONFIG

            run(url, at_start)

        # The worker itself: exit 2 at once, one line saying why, no password anywhere.
        done = run_worker(wrong, "--outage-limit-s", "60", timeout_s=60)
        assert done.returncode == 2, done.stderr
        (line,) = [x for x in done.stderr.splitlines() if "cannot run" in x]
        assert "refused the credentials" in line and "--redis-url" in line, line
        assert "n0tThat" not in done.stderr and "s3cr" not in done.stderr


def test_saves_can_wait_for_the_replicas(redis_cluster_url: str, redis_url: str) -> None:
    """`wait_replicas`: each master's save pipeline ends with WAIT, in the same round trip.
    Too few replicas in time: NotReplicated (a transient error: the batch is retried, and
    the same writes are accepted again as already applied)."""
    from worker.adapters.state.redis_cluster import NotReplicated

    rids = [f"r{i}" for i in range(60)]
    prefix = f"t{uuid.uuid4().hex[:8]}:"

    async def main() -> None:
        one = RedisStore(redis_cluster_url, key_prefix=prefix, mode="cluster", wait_replicas=1)
        two = RedisStore(
            redis_cluster_url, key_prefix=prefix, mode="cluster", wait_replicas=2,
            wait_timeout_s=0.2,
        )  # fmt: skip
        alone = RedisStore(redis_url, key_prefix=prefix, wait_replicas=1, wait_timeout_s=0.2)
        try:
            await one.claim_epoch("warm-up")
            await one.load_many(rids)
            before = one.round_trips
            assert await one.save_many([w(r, 0, None) for r in rids]) == []
            assert one.round_trips - before == 3  # WAIT rides in each master's pipeline
            writes = [w(r, 1, 0) for r in rids]
            with pytest.raises(NotReplicated) as caught:
                await two.save_many(writes)  # one replica each: never two
            assert classify(caught.value) is Kind.TRANSIENT
            assert "1 of 2 replicas" in str(caught.value)
            # Applied on the masters all the same; the retry is accepted.
            assert await one.load_many(rids) == {r: Stored(1, f"{r}@1".encode()) for r in rids}
            assert await one.save_many(writes) == []
            with pytest.raises(NotReplicated, match="0 of 1 replicas"):
                await alone.save_many([w("a", 0, None)])
        finally:
            for store in (one, two, alone):
                await store.close()

    asyncio.run(main())


def test_each_task_reads_its_own_calls_round_trips(redis_cluster_url: str) -> None:
    """Lanes share one store and run at once: `last_round_trips` is per task (what the
    batch loop reports for its own load or save), not the store's running total."""

    async def body(store: RedisStore) -> None:
        await store.claim_epoch("warm-up")
        assert store.last_round_trips == 2  # CLUSTER SLOTS first, then the INCR
        await store.claim_epoch("warm-up")
        assert store.last_round_trips == 1
        many = [f"m{i}" for i in range(300)]  # every master
        one = ["solo"]  # one master

        async def lane(rids: list[str]) -> tuple[int, int]:
            await store.load_many(rids)
            loaded = store.last_round_trips
            await asyncio.sleep(0)
            await store.save_many([w(r, 0, None) for r in rids])
            return loaded, store.last_round_trips

        for _ in range(3):
            got = await asyncio.gather(lane(many), lane(one), lane(many), lane(one))
            assert got[1] == got[3] == (1, 1)
            assert got[0][0] == got[2][0] == 3
            assert await store.save_many([]) == [] and store.last_round_trips == 0
            many = [f"{r}x" for r in many]
            one = [f"{r}x" for r in one]

    run(redis_cluster_url, body)
