"""The ACL docs/operate/security.md gives is exactly what the store needs, in every mode:
a user with just `needed_commands(mode, wait)` on its prefix runs the store (start, epoch
claim, save, load) over TLS; one command less is refused at start, named. And the pure parts of
redis_access: key patterns, URL options, who a message names."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.security.certs import Pki, make_pki
from tests.security.state.redis_fixtures import SecureRedis, worker_user
from worker.adapters.local.embedded import ServerError
from worker.adapters.state.redis_access import (
    SCRIPT_COMMANDS,
    RedisRefused,
    access,
    check_url,
    key_pattern,
    needed_commands,
    probe_commands,
    refusal,
)
from worker.adapters.state.redis_cluster import NotReplicated, slot_of
from worker.adapters.state.redis_store import RedisStore
from worker.failures import Kind, classify
from worker.ports import StateWrite, Stored

PASSWORD = "Pw-acc-51f0"
PREFIX = "tacc:"


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def server(pki: Pki) -> Iterator[SecureRedis]:
    every = needed_commands("standalone", 1)
    users = [
        worker_user("standalone", PASSWORD, PREFIX, "standalone"),
        worker_user("proxy", PASSWORD, PREFIX, "proxy"),
        worker_user("waits", PASSWORD, PREFIX, commands=every),
        worker_user("nowait", PASSWORD, PREFIX, commands=[c for c in every if c != "wait"]),
        worker_user("noincr", PASSWORD, PREFIX, commands=[c for c in every if c != "incr"]),
    ]
    try:
        s = SecureRedis(pki, users=users)
    except ServerError as e:
        pytest.skip(str(e))
    with s:
        yield s


def _write(rid: str) -> StateWrite:
    return StateWrite(rid, 0, f"{rid}@0".encode(), False, None, 1)


async def _use(store: RedisStore) -> None:
    try:
        await store.start()
        epoch = await store.claim_epoch("topic/0")
        rids = [f"r{i}" for i in range(20)]
        assert await store.save_many([_write(r) for r in rids]) == []
        loaded = await store.load_many(rids)
        assert loaded == {r: Stored(0, f"{r}@0".encode()) for r in rids}, epoch
    finally:
        await store.close()


@pytest.mark.integration
@pytest.mark.parametrize("mode", ["standalone", "proxy"])
def test_the_commands_named_are_enough(server: SecureRedis, mode: str) -> None:
    url = server.worker_url(mode, PASSWORD)
    asyncio.run(_use(RedisStore(url, key_prefix=f"{PREFIX}{mode}:", mode=mode)))


@pytest.mark.integration
def test_waiting_for_replicas_needs_wait_and_nothing_more(server: SecureRedis) -> None:
    async def body() -> None:
        url = server.worker_url("waits", PASSWORD)
        store = RedisStore(url, key_prefix=PREFIX, wait_replicas=1, wait_timeout_s=0.05)
        try:
            await store.start()
            # Allowed, and no replica here to acknowledge: transient, not refused.
            with pytest.raises(NotReplicated):
                await store.save_many([_write("w")])
        finally:
            await store.close()
        store = RedisStore(
            server.worker_url("nowait", PASSWORD), key_prefix=PREFIX, wait_replicas=1
        )
        try:
            with pytest.raises(RedisRefused, match=r"user 'nowait' may not run WAIT \("):
                await store.start()
        finally:
            await store.close()

    asyncio.run(body())


@pytest.mark.integration
def test_the_epoch_claim_needs_incr(server: SecureRedis) -> None:
    async def body() -> None:
        store = RedisStore(server.worker_url("noincr", PASSWORD), key_prefix=PREFIX)
        try:
            with pytest.raises(RedisRefused, match=r"user 'noincr' may not run INCR \(") as e:
                await store.start()
            assert classify(e.value) is Kind.CONFIG
        finally:
            await store.close()

    asyncio.run(body())


def test_key_patterns_escape_the_prefixs_glob_characters() -> None:
    assert key_pattern("derender:") == "derender:*"
    assert key_pattern("a*b?[c]\\:") == "a\\*b\\?\\[c\\]\\\\:*"


def test_url_options_are_checked_before_connecting() -> None:
    check_url("rediss://u:p@h:1/0?ssl_cert_reqs=required&ssl_check_hostname=true")
    with pytest.raises(ValueError, match=r"unknown option 'ssl_ca_cert' \(redis-py's TLS"):
        check_url("rediss://u:p@h:1/0?ssl_ca_cert=/x.pem")
    with pytest.raises(ValueError, match=r"ssl_keyfile=/no/such\.key: no such file"):
        check_url("rediss://u:p@h1:1,h2:2?ssl_keyfile=/no/such.key")


def test_who_a_message_names() -> None:
    a = access("rediss://worker:pw@h1:7000,h2:7001?ssl_ca_certs=/ca", "p:", "cluster", 0)
    assert (a.where, a.user) == ("Redis Cluster at h1:7000,h2:7001", "worker")
    assert access("redis://:pw@h", "p:", "standalone", 0).user == "default"
    assert access("redis://h:1/0", "p:", "proxy", 0).user is None
    assert access("redis://h:1/0", "p:", "proxy", 0).where == "Redis at h:1"


def test_outages_are_not_refusals() -> None:
    from redis.exceptions import ConnectionError, ResponseError, TimeoutError

    a = access("redis://h:1/0", "p:", "standalone", 0)
    for exc in (ConnectionError("reset"), TimeoutError("slow"), ResponseError("LOADING")):
        assert refusal(exc, a) is None


def test_the_probe_touches_one_slot_and_every_command_of_its_mode() -> None:
    for mode, wait in (("standalone", 0), ("proxy", 0), ("cluster", 1)):
        commands = probe_commands(PREFIX, mode, wait)
        keys = [c[3] for c in commands if c[0] == "EVALSHA"]
        keys += [c[1] for c in commands if c[0] in ("INCR", "PEXPIRE", "HMGET")]
        keys += list(next(c for c in commands if c[0] == "DEL")[1:])
        assert len({slot_of(k) for k in keys}) == 1 and all(k.startswith(PREFIX) for k in keys)
        sent = {str(c[0]).lower() for c in commands} | {"script|load"}
        # (The scripts' own commands run inside them; CLUSTER SLOTS is the cluster's start.)
        wanted = set(needed_commands(mode, wait)) - set(SCRIPT_COMMANDS) - {"cluster|slots"}
        wanted |= {"hmget"} if mode != "standalone" else set()
        assert sent >= wanted, wanted - sent
