"""Every wrong or missing piece of a secured Redis stops `derender-worker run` at start:
exit 2 within seconds (the outage limit is a minute), one log line saying what to fix, no
password anywhere in the worker's output.

The servers are Debian's redis-server 7 on a TLS port only, with ACL users and the default
user off (tests/security/state/redis_fixtures.py); the broker is an address nobody listens on,
since the state store starts before Kafka. Every case's worker is started at once (the
`exits` fixture), each test then reads its own: a worker spends seconds importing, the
refusal itself takes milliseconds."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from redis.asyncio.connection import ConnectionPool
from redis.exceptions import ConnectionError as RedisConnectionError

from tests.security.certs import Pki, make_pki
from tests.security.state.redis_fixtures import (
    SecureRedis,
    cluster_url,
    finish,
    secure_cluster,
    start_worker,
    tiny_registry,
    worker_user,
)
from worker.adapters.local.embedded import ServerError
from worker.adapters.local.local_cluster import LocalRedisCluster
from worker.adapters.state.redis_access import needed_commands, tls_verdict
from worker.adapters.state.redis_layout import CAS_SCRIPT, CAS_SHA

pytestmark = pytest.mark.integration

PREFIX = "tsec:"
PASSWORD = "Pw-9f3e-s3cret"
WRONG = "Pw-not-this-one"
# A TLS key's passphrase (redis-py's `ssl_password`; OpenSSL ignores it for a key without
# one): a secret in the URL's query, which the settings line must not show either.
KEY_PASSPHRASE = "Kp-0b5e-s3cret"
# A refusal is seen at the store's first round trip: far below this, and far below the
# outage limit (60 s) a retried error would take.
FAST_S = 5.0
ALL = needed_commands("standalone", 0)
GRANT = "ACL SETUSER {user} ~tsec:* " + " ".join(f"+{c}" for c in ALL)


def _without(command: str) -> list[str]:
    return [c for c in ALL if c != command]


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def secured(pki: Pki) -> Iterator[SecureRedis]:
    """Client certificates required; `worker` may do what the worker needs, each other
    user lacks one thing."""
    users = [
        worker_user("worker", PASSWORD, PREFIX),
        worker_user("elsewhere", PASSWORD, PREFIX, keys="other:*"),
        worker_user("noevalsha", PASSWORD, PREFIX, commands=_without("evalsha")),
        worker_user("noscriptload", PASSWORD, PREFIX, commands=_without("script|load")),
        worker_user("nohset", PASSWORD, PREFIX, commands=_without("hset")),
    ]
    try:
        server = SecureRedis(pki, auth_clients="yes", users=users)
    except ServerError as e:
        pytest.skip(str(e))
    with server:
        yield server


@pytest.fixture(scope="module")
def untrusted(pki: Pki) -> Iterator[SecureRedis]:
    with SecureRedis(pki, server=pki.untrusted_server) as server:
        yield server


@pytest.fixture(scope="module")
def wrong_host(pki: Pki) -> Iterator[SecureRedis]:
    with SecureRedis(pki, server=pki.wrong_host_server) as server:
        yield server


@pytest.fixture(scope="module")
def cluster(pki: Pki) -> Iterator[LocalRedisCluster]:
    """A Redis Cluster on TLS (the cluster bus too) with ACL users, the default user off."""
    try:
        c = secure_cluster(pki, [worker_user("worker", PASSWORD, PREFIX, "cluster")], 2, 0)
    except ServerError as e:
        pytest.skip(str(e))
    with c:
        yield c


Workers = dict[str, subprocess.Popen[str]]


@dataclass
class Case:
    url: str
    extra: tuple[str, ...] = ()
    prefix: str = PREFIX


@pytest.fixture(scope="module")
def exits(
    pki: Pki,
    secured: SecureRedis,
    untrusted: SecureRedis,
    wrong_host: SecureRedis,
    cluster: LocalRedisCluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Workers]:
    """Every case's worker, started at once (each test waits for its own)."""
    missing = tmp_path_factory.mktemp("tls") / "ca.pem"
    on_cluster = ("--redis-mode", "cluster")
    cases = {
        "wrong password": Case(
            secured.worker_url("worker", WRONG) + f"&ssl_password={KEY_PASSPHRASE}"
        ),
        "no credentials": Case(secured.worker_url(None, None)),
        "keys": Case(secured.worker_url("elsewhere", PASSWORD)),
        "evalsha": Case(secured.worker_url("noevalsha", PASSWORD)),
        "script|load": Case(secured.worker_url("noscriptload", PASSWORD)),
        "hset": Case(secured.worker_url("nohset", PASSWORD)),
        "no client certificate": Case(secured.worker_url("worker", PASSWORD, client_cert=False)),
        "untrusted": Case(untrusted.worker_url("worker", PASSWORD)),
        "wrong host": Case(wrong_host.worker_url("worker", PASSWORD)),
        "missing file": Case(f"rediss://worker:{PASSWORD}@127.0.0.1:6379/0?ssl_ca_certs={missing}"),
        "cluster password": Case(cluster_url(cluster, pki, "worker", WRONG), on_cluster),
        "cluster keys": Case(cluster_url(cluster, pki, "worker", PASSWORD), on_cluster, "other:"),
    }
    models = ("--models", str(tiny_registry(tmp_path_factory.mktemp("models"))))
    procs = {name: start_worker(c.url, c.prefix, *c.extra, *models) for name, c in cases.items()}
    yield procs
    for proc in procs.values():  # (a test not run leaves its worker: end it, close its pipe)
        if proc.poll() is None:
            proc.kill()
        if proc.stdout is not None and not proc.stdout.closed:
            proc.communicate()


def refused(exits: Workers, case: str) -> str:
    """The worker's one error line, once it is known to have exited 2, fast, and without
    printing a password."""
    done = finish(exits[case])
    assert done.code == 2, done.output
    assert done.seconds < FAST_S, done.output
    assert PASSWORD not in done.output and WRONG not in done.output
    assert KEY_PASSPHRASE not in done.output
    (line,) = done.errors
    return line


START = "cannot run: starting the state store: RedisRefused: "


@pytest.mark.parametrize(
    "seen",
    [
        ConnectionResetError(104, "Connection reset by peer"),
        # The alert read and the transport closed before the first command went out (a
        # loaded machine): redis-py's words, the TLS reason lost.
        RedisConnectionError("Connection closed by the server before write"),
    ],
)
def test_a_closed_tls_connection_is_asked_why(secured: SecureRedis, seen: Exception) -> None:
    """However the first command's connection ended, a listening connection hears the
    server's reason: a client certificate is required (not an outage to retry)."""
    url = secured.worker_url("worker", PASSWORD, client_cert=False)

    async def verdict() -> BaseException | None:
        pool = ConnectionPool.from_url(url)
        try:
            return await tls_verdict(seen, pool)
        finally:
            await pool.disconnect()

    got = asyncio.run(verdict())
    assert isinstance(got, ssl.SSLError), got
    assert got.reason == "TLSV13_ALERT_CERTIFICATE_REQUIRED"


def test_a_connection_error_that_is_no_close_is_not_asked(secured: SecureRedis) -> None:
    url = secured.worker_url("worker", PASSWORD, client_cert=False)
    seen = RedisConnectionError("Error 111 connecting to 127.0.0.1:1. Connection refused.")
    assert asyncio.run(tls_verdict(seen, ConnectionPool.from_url(url))) is None


def test_a_wrong_password_is_named(exits: Workers, secured: SecureRedis) -> None:
    assert refused(exits, "wrong password") == (
        f"{START}Redis at 127.0.0.1:{secured.port} refused the credentials of user 'worker' "
        "(AuthenticationError: invalid username-password pair or user is disabled.): put the "
        "right user and password in --redis-url (DERENDER_REDIS_URL)"
    )


def test_no_credentials_where_the_default_user_is_off(exits: Workers, secured: SecureRedis) -> None:
    assert refused(exits, "no credentials") == (
        f"{START}Redis at 127.0.0.1:{secured.port} refused the credentials: none given "
        "(AuthenticationError: HELLO must be called with the client already authenticated, "
        "otherwise the HELLO AUTH <user> <pass> option can be used to authenticate the client "
        "and select the RESP protocol version at the same time): put the user and password "
        "in --redis-url (DERENDER_REDIS_URL): rediss://USER:PASSWORD@host:port/0"
    )


def test_keys_outside_the_users_patterns(exits: Workers, secured: SecureRedis) -> None:
    assert refused(exits, "keys") == (
        f"{START}Redis at 127.0.0.1:{secured.port}: user 'elsewhere' may not use the keys "
        "under --state-prefix 'tsec:' (NoPermissionError: this user has no permissions to "
        "access one of the keys used as arguments): allow them: ACL SETUSER elsewhere ~tsec:*"
    )


@pytest.mark.parametrize(
    ("user", "command"), [("noevalsha", "evalsha"), ("noscriptload", "script|load")]
)
def test_a_command_the_user_may_not_run(
    exits: Workers, secured: SecureRedis, user: str, command: str
) -> None:
    assert refused(exits, command) == (
        f"{START}Redis at 127.0.0.1:{secured.port}: user {user!r} may not run "
        f"{command.upper()} (NoPermissionError: this user has no permissions to run the "
        f"'{command}' command): allow it the commands the worker sends: " + GRANT.format(user=user)
    )


def test_a_command_the_scripts_call_that_the_user_may_not_run(
    exits: Workers, secured: SecureRedis
) -> None:
    # (The probe's write creates its key: the script's plain HSET, on this line of it.)
    hset = "    redis.call('HSET', key, 'seq', seq, 'epoch', epoch_s, 'state', blob)"
    at = CAS_SCRIPT.splitlines().index(hset) + 1
    assert refused(exits, "hset") == (
        f"{START}Redis at 127.0.0.1:{secured.port}: user 'nohset' may not run a command of "
        "the worker's Lua scripts (ResponseError: The user executing the script can't run "
        f"this command or subcommand script: {CAS_SHA}, on @user_script:{at}.): allow them: "
        "ACL SETUSER nohset +hmget +hset +pexpire +del +hdel"
    )


def test_a_client_certificate_required_and_not_given(exits: Workers, secured: SecureRedis) -> None:
    assert refused(exits, "no client certificate") == (
        f"{START}Redis at 127.0.0.1:{secured.port} requires a client certificate "
        "(TLSV13_ALERT_CERTIFICATE_REQUIRED): give one in --redis-url: "
        "rediss://…?ssl_certfile=/path/client.pem&ssl_keyfile=/path/key.pem"
    )


def test_an_untrusted_server_certificate(exits: Workers, untrusted: SecureRedis) -> None:
    assert refused(exits, "untrusted") == (
        f"{START}Redis at 127.0.0.1:{untrusted.port}: the server's TLS certificate is not "
        "trusted (unable to get local issuer certificate): give the CA that signed it in "
        "--redis-url: rediss://…?ssl_ca_certs=/path/ca.pem"
    )


def test_a_server_certificate_for_another_host(exits: Workers, wrong_host: SecureRedis) -> None:
    assert refused(exits, "wrong host") == (
        f"{START}Redis at 127.0.0.1:{wrong_host.port}: the server's TLS certificate is not "
        "valid for that host (IP address mismatch, certificate is not valid for "
        "'127.0.0.1'.): connect by a name the certificate lists (the host in --redis-url), "
        "or give the server a certificate for this one"
    )


def test_a_tls_file_that_does_not_exist(exits: Workers) -> None:
    """Checked before anything connects (the server named is never asked)."""
    done = finish(exits["missing file"])
    assert done.code == 2, done.output
    assert PASSWORD not in done.output
    last = done.output.strip().splitlines()[-1]
    assert last.startswith("derender-worker run: --redis-url: ssl_ca_certs=/"), done.output
    assert last.endswith("/ca.pem: no such file"), done.output


def test_a_wrong_password_on_a_cluster(exits: Workers, cluster: LocalRedisCluster) -> None:
    seeds = ",".join(n.addr for n in cluster.nodes)
    assert refused(exits, "cluster password") == (
        f"{START}Redis Cluster at {seeds} refused the credentials of user 'worker' "
        "(AuthenticationError: invalid username-password pair or user is disabled.): "
        "put the right user and password in --redis-url (DERENDER_REDIS_URL)"
    )


def test_keys_outside_the_users_patterns_on_a_cluster(
    exits: Workers, cluster: LocalRedisCluster
) -> None:
    seeds = ",".join(n.addr for n in cluster.nodes)
    assert refused(exits, "cluster keys") == (
        f"{START}Redis Cluster at {seeds}: user 'worker' may not use the keys under "
        "--state-prefix 'other:' (NoPermissionError: this user has no permissions to "
        "access one of the keys used as arguments): allow them: ACL SETUSER worker ~other:*"
    )
