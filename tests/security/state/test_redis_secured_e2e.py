"""`derender-worker run` (and `check`) on a secured Redis, end to end: requests through the
real broker, their states saved in Redis by one batch and loaded by the next, over TLS as
an ACL user allowed only the worker's commands on its own keys — with a client
certificate (the server requires one), without (the server makes it optional), and on a
Redis Cluster with TLS on the bus and for replication. Then a permission is revoked while
the worker runs (`ACL SETUSER`): it stops within seconds, exit 2, with one line naming the
permission, not after the outage limit. No password in the worker's whole output."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator

import pytest
from tokenizers import Tokenizer

from tests.integration.harness import (
    ROOT,
    WorkerProcess,
    done_count,
    make_generations,
    publish,
    read_all,
    verify,
)
from tests.security.certs import Pki, make_pki
from tests.security.state.redis_fixtures import (
    SecureRedis,
    cluster_url,
    secure_cluster,
    worker_user,
)
from worker.adapters.local.embedded import ServerError, free_port
from worker.adapters.local.local_cluster import RespConnection
from worker.adapters.state.redis_access import needed_commands

pytestmark = pytest.mark.integration

PASSWORD = "Pw-e2e-7c1d-s3cret"
# The outage limit: a refusal retried as an outage would take this long.
OUTAGE_LIMIT = ("--outage-limit-s", "60")
# How soon a revoked permission must stop the worker once a record needs Redis.
STOPS_WITHIN_S = 15.0


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def prefix() -> str:
    return f"tsec{uuid.uuid4().hex[:6]}:"


def _server(pki: Pki, auth_clients: str, prefix: str) -> Iterator[SecureRedis]:
    try:
        server = SecureRedis(
            pki, auth_clients=auth_clients, users=[worker_user("worker", PASSWORD, prefix)]
        )
    except ServerError as e:
        pytest.skip(str(e))
    with server:
        yield server


@pytest.fixture
def mtls(pki: Pki, prefix: str) -> Iterator[SecureRedis]:
    """Client certificates required."""
    yield from _server(pki, "yes", prefix)


@pytest.fixture
def tls(pki: Pki, prefix: str) -> Iterator[SecureRedis]:
    """Client certificates optional."""
    yield from _server(pki, "optional", prefix)


def _keys(conn: RespConnection, prefix: str) -> int:
    cursor, n = b"0", 0
    while True:
        cursor, keys = conn.call("SCAN", cursor, "MATCH", f"{prefix}{{*", "COUNT", 1000)
        n += len(keys)
        if cursor == b"0":
            return n


def _until(cond: Callable[[], bool], timeout_s: float, what: str, worker: WorkerProcess) -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        assert worker.alive, f"the worker exited while waiting for {what}:\n{worker.log_tail()}"
        assert time.monotonic() < deadline, f"{what}: not within {timeout_s}s\n{worker.log_tail()}"
        time.sleep(0.1)


def through(
    tok: Tokenizer,
    bootstrap: str,
    topics: dict[str, str],
    worker: WorkerProcess,
    stored: Callable[[], int],
    seed: int,
) -> None:
    """Requests in two halves: the first records of each (their states saved: `stored`
    counts the keys), then the rest (each batch loads the state the first left). Every
    request's text comes out exact."""
    gens = make_generations(tok, 6, seed=seed, max_chunk=3)
    first = [r for g in gens for r in g.records[:2]]
    rest = [r for g in gens for r in g.records[2:]]
    asyncio.run(publish(bootstrap, topics["input"], first))
    _until(lambda: stored() == len(gens), 60, "the first halves' states in Redis", worker)
    asyncio.run(publish(bootstrap, topics["input"], rest))
    outputs = asyncio.run(
        read_all(bootstrap, topics["output"], lambda o: done_count(o) >= len(gens), 60)
    )
    assert done_count(outputs) == len(gens), worker.log_tail()
    verdict = verify(outputs, gens)
    assert verdict.requests == len(gens), verdict


def stops_on(
    tok: Tokenizer, bootstrap: str, topics: dict[str, str], worker: WorkerProcess, seed: int
) -> str:
    """One more request after a permission was revoked: the worker's exit (2, within
    seconds) and its one error line."""
    (gen,) = make_generations(tok, 1, seed=seed, prefix="after")
    asyncio.run(publish(bootstrap, topics["input"], gen.records))
    sent = time.monotonic()
    assert worker.proc is not None
    code = worker.proc.wait(timeout=STOPS_WITHIN_S + 30)
    took = time.monotonic() - sent
    assert code == 2, worker.log_tail()
    assert took < STOPS_WITHIN_S, f"{took:.1f}s\n{worker.log_tail()}"
    log = worker.log_text()
    assert PASSWORD not in log
    (line,) = [x.split(": ", 1)[1] for x in log.splitlines() if " ERROR derender.worker: " in x]
    return line


BATCH = "cannot run: processing a batch: RedisRefused: "


def test_rediss_with_a_client_certificate_and_a_revoked_command(
    mtls: SecureRedis,
    prefix: str,
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    """The server requires client certificates; the worker gives one. `check --ready`
    answers 0 while it runs. Then EVALSHA is taken from its user."""
    metrics = free_port()
    worker = worker_factory(
        "--state-prefix", prefix, *OUTAGE_LIMIT,
        redis=mtls.worker_url("worker", PASSWORD),
        metrics_port=metrics,
    )  # fmt: skip
    with mtls.admin() as admin:
        through(deepseek, kafka_bootstrap, topics, worker, lambda: _keys(admin, prefix), 2801)
        check = [sys.executable, "-m", "worker", "check", "--metrics-port", str(metrics)]
        ready = subprocess.run([*check, "--ready"], cwd=ROOT, capture_output=True, timeout=30)
        assert ready.returncode == 0, ready.stderr
        admin.call("ACL", "SETUSER", "worker", "-evalsha")
        line = stops_on(deepseek, kafka_bootstrap, topics, worker, 2802)
    grant = " ".join(f"+{c}" for c in needed_commands("standalone", 0))
    assert line == (
        f"{BATCH}Redis at 127.0.0.1:{mtls.port}: user 'worker' may not run EVALSHA "
        "(NoPermissionError: this user has no permissions to run the 'evalsha' command): "
        f"allow it the commands the worker sends: ACL SETUSER worker ~{prefix}* {grant}"
    )


def test_rediss_without_a_client_certificate_and_revoked_keys(
    tls: SecureRedis,
    prefix: str,
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    """Client certificates optional: the worker gives none (only the CA it trusts). Then
    the user's key pattern is moved off the worker's prefix."""
    url = tls.worker_url("worker", PASSWORD, client_cert=False)
    worker = worker_factory("--state-prefix", prefix, *OUTAGE_LIMIT, redis=url)
    with tls.admin() as admin:
        through(deepseek, kafka_bootstrap, topics, worker, lambda: _keys(admin, prefix), 2803)
        admin.call("ACL", "SETUSER", "worker", "resetkeys", "~other:*")
        line = stops_on(deepseek, kafka_bootstrap, topics, worker, 2804)
    assert line == (
        f"{BATCH}Redis at 127.0.0.1:{tls.port}: user 'worker' may not use the keys under "
        f"--state-prefix '{prefix}' (NoPermissionError: this user has no permissions to "
        f"access one of the keys used as arguments): allow them: ACL SETUSER worker ~{prefix}*"
    )


def test_a_redis_cluster_on_tls_with_an_acl_user(
    pki: Pki,
    prefix: str,
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    """Two masters with a replica each, TLS on the cluster bus and for replication; the
    worker's user may run the cluster commands it needs too (CLUSTER SLOTS, ASKING)."""
    try:
        cluster = secure_cluster(pki, [worker_user("worker", PASSWORD, prefix, "cluster")], 2, 1)
    except ServerError as e:
        pytest.skip(str(e))
    with cluster:
        url = cluster_url(cluster, pki, "worker", PASSWORD)
        worker = worker_factory(
            "--state-prefix", prefix, "--redis-mode", "cluster", *OUTAGE_LIMIT, redis=url
        )
        masters = cluster.nodes[: cluster.masters_count]

        def stored() -> int:
            total = 0
            for node in masters:
                with node.connect() as conn:
                    total += _keys(conn, prefix)
            return total

        through(deepseek, kafka_bootstrap, topics, worker, stored, 2805)
        assert worker.stop() == 0, worker.log_tail()
        assert PASSWORD not in worker.log_text()
        # Every master holds some of the states: the worker spoke TLS to each. (The request
        # ids are fixed by the seed, so which master holds which is too.)
        for node in masters:
            with node.connect() as conn:
                assert _keys(conn, prefix) > 0, node.addr
