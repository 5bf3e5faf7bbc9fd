"""Secured redis-servers for the tests: TLS only (`--port 0 --tls-port N`), client
certificates required or optional, ACL users with the default user disabled; and a Redis
Cluster of such nodes (`--tls-cluster yes --tls-replication yes`, replicas authenticating
as the admin user).

Certificates come from tests/security/certs.py (made in the test). Users are written to a
config file in the server's work dir, not its command line, so no password shows in `ps`.
Every server has an `admin` user with every permission: the fixtures use it to check the
server is up, form the cluster and change the worker's ACL while it runs.

- `SecureRedis(pki, auth_clients=..., server=..., users=...)`: one redis-server (a
  `RedisServer`: start, stop, close, context manager); `worker_url(user, password, ...)` is the
  `rediss://` URL a worker gives, `admin()` a RESP connection as admin.
- `secure_cluster(pki, users, masters, replicas)`: a `LocalRedisCluster` of
  `SecureClusterNode`s; `cluster_url(cluster, pki, user, password)` its seed list.
- `worker_user(name, password, prefix, mode)`: the ACL rule of a user allowed exactly
  what the worker needs (redis_access.needed_commands) on the keys under its prefix.
"""

from __future__ import annotations

import datetime as dt
import math
import os
import ssl
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from tests.security.certs import Pair, Pki
from worker.adapters.local.embedded import LOCALHOST, RedisServer, free_port
from worker.adapters.local.local_cluster import ClusterNode, LocalRedisCluster, RespConnection
from worker.adapters.state.redis_access import key_pattern, needed_commands

ADMIN = "admin"
ADMIN_PASSWORD = "adm1n-Pw"


def worker_user(
    name: str,
    password: str,
    prefix: str,
    mode: str = "standalone",
    *,
    commands: Iterable[str] | None = None,
    keys: str | None = None,
) -> str:
    """An ACL rule (`user` config line, without the word): `name` may run `commands` (by
    default what the worker sends in `mode`) on the keys `keys` (by default its prefix's)."""
    allowed = needed_commands(mode, 0) if commands is None else list(commands)
    pattern = key_pattern(prefix) if keys is None else keys
    plus = " ".join(f"+{c}" for c in allowed)
    return f"{name} on >{password} resetkeys ~{pattern} resetchannels -@all {plus}"


def admin_context(pki: Pki) -> ssl.SSLContext:
    """The admin's TLS: trusts both test CAs (the untrusted server must still be checked
    for readiness), no host name check, the client certificate for servers that want one."""
    ctx = ssl.create_default_context(cafile=str(pki.ca))
    ctx.load_verify_locations(cafile=str(pki.other_ca))
    ctx.check_hostname = False
    ctx.load_cert_chain(pki.client.cert, pki.client.key)
    return ctx


def _tls_lines(pki: Pki, server: Pair, auth_clients: str, users: Iterable[str]) -> str:
    lines = [
        f"tls-cert-file {server.cert}",
        f"tls-key-file {server.key}",
        f"tls-ca-cert-file {pki.ca}",
        f"tls-auth-clients {auth_clients}",
        # What a node presents when it connects out (replication, the cluster bus): a
        # certificate for client authentication.
        f"tls-client-cert-file {pki.client.cert}",
        f"tls-client-key-file {pki.client.key}",
        "user default off",
        f"user {ADMIN} on >{ADMIN_PASSWORD} ~* &* +@all",
        *(f"user {rule}" for rule in users),
    ]
    return "\n".join(lines) + "\n"


def _tls_argv(argv: list[str], conf: Path, port: int) -> list[str]:
    """redis-server's argv with the config file first and TLS instead of plain TCP."""
    argv = list(argv)
    argv[argv.index("--port") + 1] = "0"
    return [argv[0], str(conf), *argv[1:], "--tls-port", str(port)]


def _url(
    scheme_host: str, pki: Pki, user: str | None, password: str | None, client_cert: bool, db: str
) -> str:
    auth = ""
    if password is not None:
        auth = f"{quote(user or '', safe='')}:{quote(password, safe='')}@"
    query = f"ssl_ca_certs={pki.ca}"
    if client_cert:
        query += f"&ssl_certfile={pki.client.cert}&ssl_keyfile={pki.client.key}"
    return f"rediss://{auth}{scheme_host}{db}?{query}"


class SecureRedis(RedisServer):
    """redis-server on a TLS port only, ACL users, the default user off."""

    name = "redis-tls"

    def __init__(
        self,
        pki: Pki,
        *,
        auth_clients: str = "yes",
        server: Pair | None = None,
        users: Iterable[str] = (),
    ) -> None:
        super().__init__()
        self.pki = pki
        self.conf = self.workdir / "secure.conf"
        self.conf.write_text(_tls_lines(pki, server or pki.server, auth_clients, users))
        self.conf.chmod(0o600)

    def argv(self) -> list[str]:
        return _tls_argv(super().argv(), self.conf, self.port)

    def admin(self, timeout_s: float = 5.0) -> RespConnection:
        return RespConnection(
            self.host,
            self.port,
            timeout_s,
            ADMIN_PASSWORD,
            user=ADMIN,
            tls=admin_context(self.pki),
        )

    def ready(self) -> bool:
        try:
            with self.admin(0.5) as conn:
                info = conn.call("INFO", "server").decode()
        except Exception:  # (refused, TLS not up yet, LOADING: not ready)
            return False
        return f"process_id:{self.pid}" in info

    def worker_url(
        self, user: str | None, password: str | None, *, client_cert: bool = True
    ) -> str:
        return _url(f"{self.host}:{self.port}", self.pki, user, password, client_cert, "/0")


class SecureClusterNode(ClusterNode):
    """A cluster node on a TLS port only, TLS on the cluster bus and for replication,
    ACL users; replicas authenticate to their masters as the admin."""

    name = "redis-tls-node"

    def __init__(self, pki: Pki, users: Iterable[str], *args: Any) -> None:
        super().__init__(*args)
        self.pki = pki
        self.conf = self.workdir / "secure.conf"
        lines = _tls_lines(pki, pki.server, "yes", users)
        lines += f"masteruser {ADMIN}\nmasterauth {ADMIN_PASSWORD}\n"
        self.conf.write_text(lines)
        self.conf.chmod(0o600)

    def argv(self) -> list[str]:
        argv = _tls_argv(super().argv(), self.conf, self.port)
        return [*argv, "--tls-cluster", "yes", "--tls-replication", "yes"]

    def connect(self) -> RespConnection:
        return RespConnection(
            self.host, self.port, 5.0, ADMIN_PASSWORD, user=ADMIN, tls=admin_context(self.pki)
        )

    def call(self, *args: object) -> Any:
        with self.connect() as conn:
            return conn.call(*args)

    def ready(self) -> bool:
        if self.pid is None:
            return False
        try:
            return bool(self.call("PING") == "PONG")
        except Exception:  # (as SecureRedis.ready)
            return False


def secure_cluster(
    pki: Pki, users: Iterable[str], masters: int = 2, replicas: int = 1
) -> LocalRedisCluster:
    rules = list(users)
    return LocalRedisCluster(
        masters,
        replicas,
        host=LOCALHOST,
        node_factory=lambda *args: SecureClusterNode(pki, rules, *args),
    )


def cluster_url(
    cluster: LocalRedisCluster, pki: Pki, user: str | None, password: str | None
) -> str:
    seeds = ",".join(n.addr for n in cluster.nodes[: cluster.masters_count])
    return _url(seeds, pki, user, password, True, "")


# -- the worker run to its end, against a broker nobody listens on ---------------------
ROOT = Path(__file__).resolve().parents[3]


@dataclass
class Exit:
    code: int
    output: str  # stdout and stderr, whole
    errors: list[str]  # the log lines at ERROR, from "cannot run:" on
    seconds: float  # from the settings line (start-up done) to the exit's error line


def _stamp(line: str) -> float:
    when = dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f")
    return when.timestamp()


def tiny_registry(out: Path) -> Path:
    """A model registry of a two-token tokenizer: for workers that stop before any record,
    it starts a third faster than the default DeepSeek V4 entry."""
    from tokenizers import Tokenizer, models

    out.mkdir(parents=True, exist_ok=True)
    Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]")).save(
        str(out / "tokenizer.json")
    )
    registry = out / "models.toml"
    registry.write_text(f'[models.tiny]\ntokenizer = "{out / "tokenizer.json"}"\n')
    return registry


def start_worker(redis_url: str, prefix: str, *extra: str) -> subprocess.Popen[str]:
    """`derender-worker run` on `redis_url` (`finish` waits for its end). The state store
    starts before Kafka, so a broker nobody listens on shows what the store's start does
    on its own; the outage limit is far above what a refusal may take."""
    argv = [
        sys.executable, "-m", "worker", "run",
        "--redis-url", redis_url,
        "--state-prefix", prefix,
        "--bootstrap-servers", f"127.0.0.1:{free_port()}",
        "--metrics-port", "0",
        "--outage-limit-s", "60",
        *extra,
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if not k.startswith("DERENDER_")}
    return subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finish(proc: subprocess.Popen[str], timeout_s: float = 90) -> Exit:
    """The worker's exit: its code, whole output, error lines, and how long after its
    start-up (the settings line) the error came."""
    try:
        output, _ = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        output, _ = proc.communicate()
        raise AssertionError(f"the worker did not exit within {timeout_s} s:\n{output}") from None
    lines = output.splitlines()
    errors = [x.split(": ", 1)[1] for x in lines if " ERROR derender.worker: " in x]
    started = [_stamp(x) for x in lines if " derender.worker: settings: " in x]
    ended = [_stamp(x) for x in lines if " ERROR derender.worker: cannot run: " in x]
    seconds = ended[0] - started[0] if started and ended else math.inf
    return Exit(proc.returncode, output, errors, seconds)
