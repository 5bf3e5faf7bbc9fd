"""What the state store needs from Redis, checked at start, and Redis's refusals told as
what to fix.

A secured Redis refuses in ways no retry can cure: a wrong password (WRONGPASS), a user
whose ACL lacks a command or the keys under the prefix (NOPERM), a server certificate the
worker does not trust or that names another host, a client certificate the server wants
and did not get. Left to the batch loop they were transient errors (a TLS refusal is a
connection error), retried until the outage limit, or a bare redis-py message. Here each
becomes `RedisRefused`, a configuration error (exit 2) whose one line says what to change:

- `check_url`: the URL's query options (redis-py reads the TLS files from there) name
  options redis-py knows and files that exist, before anything connects;
- `probe_commands`: every command the store sends, sent once at start on throw-away keys
  under the prefix (deleted at once, and with a 1 s TTL should the delete not run), so a
  missing permission stops the worker before its first batch, not at its first record;
- `refusal`: an error raised by any call (at start, or later: a permission revoked while
  the worker runs) as RedisRefused, or None when it is not a refusal (a connection lost,
  a timeout: those stay transient);
- `tls_verdict`: at start, a connection reset on TLS told apart from an outage. A server
  that wants a client certificate and got none sends its alert after the handshake (TLS
  1.3) and closes; the client has already sent its first command, which the server never
  reads, so the kernel may answer with a reset that overtakes the alert (a quarter of
  the time here), or, on a loaded machine, the alert closes the connection before the
  first command goes out and its reason is lost. A second connection that only listens
  gets the alert every time.

Messages name the server, the user and the prefix, never a password (redis-py's error
texts carry none; the URL is never quoted).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import os
import re
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

from redis.asyncio.connection import ConnectionPool, SSLConnection
from redis.exceptions import (
    AuthenticationError,
    AuthorizationError,
    NoPermissionError,
    RedisError,
    ResponseError,
)
from redis.exceptions import ConnectionError as RedisConnectionError

from worker.adapters.state.redis_layout import CAS_SHA, LOAD_SHA
from worker.constants import epoch_key, state_key
from worker.failures import ConfigError

# The commands the worker's Lua scripts call (redis_layout): Redis checks each against the
# user's ACL, as if the client had sent it.
SCRIPT_COMMANDS = ("hmget", "hset", "pexpire", "del", "hdel")
# The probe's keys live this long if its own DEL does not run (a connection lost).
PROBE_TTL_MS = 1000
# TLS options redis-py reads from a URL's query that name a file.
_FILE_OPTIONS = ("ssl_ca_certs", "ssl_certfile", "ssl_keyfile", "ssl_ca_path")
# OpenSSL's verify codes for a certificate that does not name the host connected to.
_NAME_MISMATCH = (62, 64)  # X509_V_ERR_HOSTNAME_MISMATCH, X509_V_ERR_IP_ADDRESS_MISMATCH
# TLS alerts a server sends when it wants a client certificate and got none, or refuses
# the one it got.
_CLIENT_CERT_REQUIRED = ("TLSV13_ALERT_CERTIFICATE_REQUIRED", "SSLV3_ALERT_HANDSHAKE_FAILURE")
_CLIENT_CERT_REFUSED = (
    "TLSV1_ALERT_UNKNOWN_CA",
    "SSLV3_ALERT_BAD_CERTIFICATE",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN",
    "TLSV1_ALERT_DECRYPT_ERROR",
)
# How long `tls_verdict` listens: an alert comes at once, silence means accepted.
VERDICT_WAIT_S = 1.0
_RUN_COMMAND = re.compile(r"permissions to run the '([^']+)' command")


class RedisRefused(ConfigError, RedisError):
    """Redis refused the worker's credentials, ACL or TLS: a configuration error (exit 2).
    Also a RedisError, so the batch loop handles it as it handles Redis's own (the batch
    is rewound, `failures.classify` then stops the worker)."""


def needed_commands(mode: str, wait_replicas: int) -> list[str]:
    """The commands (ACL names) the store sends in `mode`, its scripts' included."""
    commands = ["evalsha", "script|load", "incr", *SCRIPT_COMMANDS]
    if mode == "cluster":
        commands += ["cluster|slots", "asking"]
    if wait_replicas:
        commands.append("wait")
    return commands


def key_pattern(prefix: str) -> str:
    """The ACL key pattern of every key under `prefix` (its glob characters escaped)."""
    return re.sub(r"([*?\[\]\\])", r"\\\1", prefix) + "*"


@dataclass(frozen=True)
class Access:
    """Who the store is to Redis: what its messages name."""

    where: str  # "Redis at host:port" or "Redis Cluster at host:port,host:port"
    user: str | None  # None: the URL gives no credentials
    prefix: str
    mode: str
    wait_replicas: int

    @property
    def acl_user(self) -> str:
        return self.user or "default"

    def grant(self) -> str:
        commands = " ".join(f"+{c}" for c in needed_commands(self.mode, self.wait_replicas))
        return f"ACL SETUSER {self.acl_user} ~{key_pattern(self.prefix)} {commands}"


def access(url: str, prefix: str, mode: str, wait_replicas: int) -> Access:
    items = [item.strip() for item in url.split(",") if item.strip()]
    first = items[0] if "://" in items[0] else f"redis://{items[0]}"
    parts = urlsplit(first)
    user = unquote(parts.username) if parts.username else None
    if user is None and parts.password:
        user = "default"
    nodes = []
    for item in items:
        p = urlsplit(item if "://" in item else f"redis://{item}")
        nodes.append(f"{p.hostname}:{p.port or 6379}")
    where = ("Redis Cluster at " if mode == "cluster" else "Redis at ") + ",".join(nodes)
    return Access(where, user, prefix, mode, wait_replicas)


def check_url(url: str) -> None:
    """ValueError (exit 2) for a query option redis-py does not know (it would fail every
    connection with a TypeError) or a TLS file that does not exist."""
    known = _known_options()
    query = "&".join(item.partition("?")[2] for item in url.split(","))
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name not in known:
            tls = ", ".join(sorted(k for k in known if k.startswith("ssl_")))
            raise ValueError(
                f"--redis-url: unknown option {name!r} (redis-py's TLS options: {tls})"
            )
        if name in _FILE_OPTIONS and not os.path.exists(value):
            raise ValueError(f"--redis-url: {name}={value}: no such file")


def _known_options() -> set[str]:
    names: set[str] = set()
    for cls in (*SSLConnection.__mro__, ConnectionPool):
        init = cls.__dict__.get("__init__")
        if init is None or not inspect.isfunction(init):
            continue
        for name, p in inspect.signature(init).parameters.items():
            if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL) and name != "self":
                names.add(name)
    return names


def probe_commands(prefix: str, mode: str, wait_replicas: int) -> list[tuple[Any, ...]]:
    """Every command the store sends (after SCRIPT LOAD of both scripts), on two fresh
    keys of one hash slot under `prefix`, then deleted. The CAS write creates its key, so
    HSET and PEXPIRE run inside the script too."""
    tag = f"derender-probe-{uuid.uuid4().hex[:12]}"
    key, epoch = state_key(prefix, tag), epoch_key(prefix, f"{{{tag}}}")
    commands: list[tuple[Any, ...]] = [
        ("EVALSHA", LOAD_SHA, 1, key, "", ""),
        ("EVALSHA", CAS_SHA, 1, key, "", 0, 0, b"", PROBE_TTL_MS, "", "", b""),
        ("INCR", epoch),
        ("PEXPIRE", epoch, PROBE_TTL_MS),
    ]
    if mode == "cluster":
        commands.append(("ASKING",))
    if mode != "standalone":
        commands.append(("HMGET", key, "seq"))
    if wait_replicas:
        commands.append(("WAIT", 0, 1))
    commands.append(("DEL", key, epoch))
    return commands


def first_error(replies: list[Any]) -> None:
    for reply in replies:
        if isinstance(reply, Exception):
            raise reply


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        seen.add(id(at))
        yield at
        at = at.__cause__ or at.__context__


def _said(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}".rstrip(": ")


def refusal(exc: BaseException, a: Access) -> RedisRefused | None:
    """`exc` as a RedisRefused whose message says what to fix, or None when it is not a
    refusal of the credentials, the ACL or TLS."""
    if isinstance(exc, RedisRefused):
        return exc
    said = _said(exc)
    user = a.acl_user
    if isinstance(exc, AuthenticationError):
        if a.user is None:
            return RedisRefused(
                f"{a.where} refused the credentials: none given ({said}): put the user and "
                "password in --redis-url (DERENDER_REDIS_URL): rediss://USER:PASSWORD@host:port/0"
            )
        return RedisRefused(
            f"{a.where} refused the credentials of user {user!r} ({said}): put the right "
            "user and password in --redis-url (DERENDER_REDIS_URL)"
        )
    if isinstance(exc, NoPermissionError | AuthorizationError | ResponseError):
        text = str(exc)
        run = _RUN_COMMAND.search(text)
        if run is not None:
            command = run.group(1).upper()
            return RedisRefused(
                f"{a.where}: user {user!r} may not run {command} ({said}): allow it the "
                f"commands the worker sends: {a.grant()}"
            )
        if "script can't run this command" in text or "executing the script can't run" in text:
            scripted = " ".join(f"+{c}" for c in SCRIPT_COMMANDS)
            return RedisRefused(
                f"{a.where}: user {user!r} may not run a command of the worker's Lua "
                f"scripts ({said}): allow them: ACL SETUSER {user} {scripted}"
            )
        if "access one of the keys" in text or "access at least one of the keys" in text:
            return RedisRefused(
                f"{a.where}: user {user!r} may not use the keys under --state-prefix "
                f"{a.prefix!r} ({said}): allow them: ACL SETUSER {user} ~{key_pattern(a.prefix)}"
            )
        if isinstance(exc, NoPermissionError | AuthorizationError):
            return RedisRefused(f"{a.where}: user {user!r} was refused ({said}): {a.grant()}")
        return None
    for e in _chain(exc):
        if isinstance(e, ssl.SSLCertVerificationError):
            if e.verify_code in _NAME_MISMATCH:
                return RedisRefused(
                    f"{a.where}: the server's TLS certificate is not valid for that host "
                    f"({e.verify_message}): connect by a name the certificate lists (the host "
                    "in --redis-url), or give the server a certificate for this one"
                )
            return RedisRefused(
                f"{a.where}: the server's TLS certificate is not trusted ({e.verify_message})"
                ": give the CA that signed it in --redis-url: rediss://…?ssl_ca_certs=/path/ca.pem"
            )
        if isinstance(e, ssl.SSLError):
            reason = e.reason or ""
            if reason in _CLIENT_CERT_REQUIRED:
                return RedisRefused(
                    f"{a.where} requires a client certificate ({reason}): give one in "
                    "--redis-url: rediss://…?ssl_certfile=/path/client.pem&ssl_keyfile=/path/key.pem"
                )
            if reason in _CLIENT_CERT_REFUSED:
                return RedisRefused(
                    f"{a.where} refused the worker's client certificate ({reason}): give one "
                    "signed by a CA the server trusts (its tls-ca-cert-file) as ssl_certfile and "
                    "ssl_keyfile in --redis-url"
                )
    return None


def _closed_by_server(e: BaseException) -> bool:
    """A reset, or redis-py finding the connection already closed when it came to write
    (the alert was read and the transport closed before the first command went out)."""
    return isinstance(e, ConnectionResetError) or (
        isinstance(e, RedisConnectionError) and "closed by the server" in str(e)
    )


async def tls_verdict(exc: BaseException, pool: ConnectionPool) -> BaseException | None:
    """When `exc` is a TLS connection reset or closed by the server: the error a
    connection that sends nothing gets from the same server (its TLS alert), or None (no
    TLS, no reset, or the server stays silent: an outage after all)."""
    if not any(_closed_by_server(e) for e in _chain(exc)):
        return None
    conn = pool.make_connection()  # type: ignore[no-untyped-call]
    context = getattr(conn, "ssl_context", None)
    if context is None:
        return None
    try:
        async with asyncio.timeout(2 * VERDICT_WAIT_S):
            reader, writer = await asyncio.open_connection(conn.host, conn.port, ssl=context.get())
    except (OSError, TimeoutError) as e:
        return e if isinstance(e, ssl.SSLError) else None
    try:
        async with asyncio.timeout(VERDICT_WAIT_S):
            await reader.read(1)
    except ssl.SSLError as e:
        return e
    except (OSError, TimeoutError):
        pass
    finally:
        writer.close()
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(VERDICT_WAIT_S):
                await writer.wait_closed()
    return None
