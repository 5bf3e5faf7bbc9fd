"""A local Redis Cluster from one `redis-server` binary: masters, a replica each, formed
with ADDSLOTS / MEET / REPLICATE by a tiny RESP client (standard library only: no
redis-cli, no Docker).

Used by `derender-worker servers --redis-cluster N`, the cluster tests and the benches;
the single servers it builds on are in embedded.py.
"""

from __future__ import annotations

import random
import socket
import ssl
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Self
from urllib.parse import quote

from worker.adapters.local.embedded import (
    LOCALHOST,
    LOG_TAIL_LINES,
    START_TIMEOUT_S,
    STOP_TIMEOUT_S,
    RedisServer,
    ServerError,
    free_port,
    redis_server_binary,
)

CLUSTER_SLOTS = 16384
# How long a master may be unreachable before its replica takes over. Redis's default is
# 15 s; locally 2 s gives a quick failover and still rides out a busy machine's stalls.
CLUSTER_NODE_TIMEOUT_MS = 2000


# A cluster node also listens on its port + 10000 (the cluster bus), so its port must
# leave room for that.
CLUSTER_BUS_OFFSET = 10000
MAX_CLUSTER_PORT = 65535 - CLUSTER_BUS_OFFSET


def free_cluster_port(host: str = LOCALHOST) -> int:
    """A free port whose cluster-bus port (+10000) is free too."""
    for _ in range(200):
        port = free_port(host)
        if port > MAX_CLUSTER_PORT:
            # Ephemeral ports are mostly above it: try one in range, at random.
            port = random.randint(20000, MAX_CLUSTER_PORT)
        if _bindable(host, port) and _bindable(host, port + CLUSTER_BUS_OFFSET):
            return port
    raise ServerError("no free port pair (port, port + 10000) for a cluster node")


def _bindable(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
        return True


class RespError(Exception):
    """An error reply (`-ERR …`) to a command sent by `redis_call`."""


class RespConnection:
    """A minimal RESP client over one socket, standard library only: enough to form,
    inspect and reshard a local cluster (not used by the worker). `tls`: over TLS (a
    server started with `--tls-port`); `user`: AUTH as that ACL user."""

    def __init__(
        self,
        host: str,
        port: int,
        timeout_s: float = 10.0,
        password: str | None = None,
        *,
        user: str | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        sock = socket.create_connection((host, port), timeout=timeout_s)
        try:
            self.sock = sock if tls is None else tls.wrap_socket(sock, server_hostname=host)
        except BaseException:
            sock.close()
            raise
        self.file = self.sock.makefile("rb")
        if password is not None:
            self.call("AUTH", *((user,) if user else ()), password)

    def call(self, *args: object) -> Any:
        out = [f"*{len(args)}\r\n".encode()]
        for a in args:
            b = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(b), b))
        self.sock.sendall(b"".join(out))
        return self._read()

    def _read(self) -> Any:
        line = self.file.readline()
        if not line:
            raise ConnectionError("the server closed the connection")
        kind, rest = line[:1], line[1:-2]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RespError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.file.read(n + 2)
            return data[:-2]
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._read() for _ in range(n)]
        raise ConnectionError(f"unexpected reply {line!r}")

    def close(self) -> None:
        self.file.close()
        self.sock.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def redis_call(
    host: str, port: int, *args: object, timeout_s: float = 10.0, password: str | None = None
) -> Any:
    """One command on a fresh connection (RespError on an error reply)."""
    with RespConnection(host, port, timeout_s, password) as conn:
        return conn.call(*args)


def _info(conn: RespConnection, section: str) -> dict[str, str]:
    text = conn.call("INFO", section).decode()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


class ClusterNode(RedisServer):
    """One redis-server with `cluster-enabled yes`; its cluster state (`nodes.conf`) lives
    in its work dir, so a restart on the same port rejoins as the same node. `appendfsync`
    set (always, everysec) also keeps its keys in an append-only file there."""

    name = "redis-node"

    def __init__(
        self,
        binary: Path | None = None,
        port: int | None = None,
        host: str = LOCALHOST,
        node_timeout_ms: int = CLUSTER_NODE_TIMEOUT_MS,
        appendfsync: str | None = None,
        password: str | None = None,
    ) -> None:
        super().__init__(binary, port if port is not None else free_cluster_port(host), host)
        self._port_chosen = port is None
        self.node_timeout_ms = node_timeout_ms
        self.appendfsync = appendfsync
        self.password = password

    def _new_port(self) -> int:
        return free_cluster_port(self.host)

    def argv(self) -> list[str]:
        argv = super().argv()
        if self.appendfsync is not None:
            argv[argv.index("--appendonly") + 1] = "yes"
            argv += ["--appendfsync", self.appendfsync]
        if self.password is not None:
            # Clients and the replicas (to their masters) both authenticate.
            argv += ["--requirepass", self.password, "--masterauth", self.password]
        return [
            *argv,
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            str(self.workdir / "nodes.conf"),
            "--cluster-node-timeout",
            str(self.node_timeout_ms),
            # A replica takes over however long it was cut off from its master (a test
            # kills and restarts nodes in quick succession).
            "--cluster-replica-validity-factor",
            "0",
        ]

    @property
    def addr(self) -> str:
        return f"{self.host}:{self.port}"

    def connect(self) -> RespConnection:
        return RespConnection(self.host, self.port, password=self.password)

    def call(self, *args: object) -> Any:
        return redis_call(self.host, self.port, *args, password=self.password)

    def node_id(self) -> str:
        return str(self.call("CLUSTER", "MYID").decode())

    def role(self) -> str:
        with self.connect() as conn:
            return _info(conn, "replication")["role"]

    def ready(self) -> bool:
        if self.password is None:
            return super().ready()
        # INFO needs the password first: a node that answers AUTH is up.
        try:
            return self.pid is not None and self.call("PING") == "PONG"
        except (OSError, RespError):
            return False


class LocalRedisCluster:
    """A real Redis Cluster on 127.0.0.1 from the same redis-server binary: `masters`
    masters with `replicas` replicas each, every slot assigned (the masters share them
    evenly), formed with CLUSTER ADDSLOTS / MEET / REPLICATE — what `redis-cli --cluster
    create` does, without needing redis-cli. Nodes are `nodes` (masters first, then each
    master's replicas); `url` is the seed list `redis://host:p1,host:p2,…` of the nodes.

    The same interface as a LocalServer for `derender-worker servers` and the fixtures
    (start, stop, close, running, pid, log_path, log_tail, stop_with_parent), and the
    operations the chaos tests need: which node serves a slot, a failover awaited, slots
    moved between masters while clients run."""

    name = "redis-cluster"

    def __init__(
        self,
        masters: int = 3,
        replicas: int = 1,
        *,
        binary: Path | None = None,
        host: str = LOCALHOST,
        node_timeout_ms: int = CLUSTER_NODE_TIMEOUT_MS,
        appendfsync: str | None = None,
        base_port: int | None = None,
        password: str | None = None,
        node_factory: Callable[..., ClusterNode] | None = None,
    ) -> None:
        """`node_factory`: makes each node from ClusterNode's arguments (binary, port,
        host, node_timeout_ms, appendfsync, password), e.g. a ClusterNode speaking TLS."""
        if masters < 1 or replicas < 0:
            raise ValueError("a cluster needs at least one master")
        self.host = host
        self.masters_count = masters
        self.replicas_count = replicas
        binary = binary or redis_server_binary()
        count = masters * (1 + replicas)
        # On consecutive ports from `base_port`, else on free ones.
        ports = [None if base_port is None else base_port + i for i in range(count)]
        self.password = password
        make = node_factory or ClusterNode
        self.nodes = [
            make(binary, port, host, node_timeout_ms, appendfsync, password) for port in ports
        ]
        self.stop_with_parent = False
        self._formed = False

    # -- the LocalServer interface ----------------------------------------------------
    @property
    def url(self) -> str:
        auth = "" if self.password is None else f":{quote(self.password, safe='')}@"
        return f"redis://{auth}" + ",".join(n.addr for n in self.nodes)

    @property
    def running(self) -> bool:
        return all(n.running for n in self.nodes)

    @property
    def pid(self) -> int | None:
        return self.nodes[0].pid

    @property
    def log_path(self) -> Path:
        return self.nodes[0].log_path

    @property
    def port(self) -> int:
        return self.nodes[0].port

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        return "\n".join(
            f"--- {n.addr} ({'running' if n.running else 'stopped'}):\n{n.log_tail(lines)}"
            for n in self.nodes
        )

    def start(self, timeout_s: float = START_TIMEOUT_S) -> Self:
        for node in self.nodes:
            node.stop_with_parent = self.stop_with_parent
            if not node.running:
                node.start(timeout_s)
        if not self._formed:
            self._form(timeout_s)
            self._formed = True
        self.wait_ok(timeout_s)
        return self

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        for node in self.nodes:
            node.stop(timeout_s)

    def close(self) -> None:
        for node in self.nodes:
            node.close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<LocalRedisCluster {self.url} ({self.masters_count} masters)>"

    # -- forming the cluster ----------------------------------------------------------
    def _form(self, timeout_s: float) -> None:
        masters = self.nodes[: self.masters_count]
        per = CLUSTER_SLOTS // self.masters_count
        for i, node in enumerate(masters):
            start = i * per
            end = CLUSTER_SLOTS - 1 if i == self.masters_count - 1 else start + per - 1
            # Distinct config epochs, as redis-cli gives them (no collision to resolve).
            node.call("CLUSTER", "SET-CONFIG-EPOCH", i + 1)
            node.call("CLUSTER", "ADDSLOTS", *range(start, end + 1))
        first = self.nodes[0]
        for node in self.nodes[1:]:
            node.call("CLUSTER", "MEET", first.host, first.port)
        ids = [n.node_id() for n in self.nodes]
        self._wait(lambda: all(self._knows(n, ids) for n in self.nodes), timeout_s, "MEET")
        for r in range(self.replicas_count):
            for m in range(self.masters_count):
                replica = self.nodes[self.masters_count * (1 + r) + m]
                replica.call("CLUSTER", "REPLICATE", ids[m])

    @staticmethod
    def _knows(node: ClusterNode, ids: list[str]) -> bool:
        text = node.call("CLUSTER", "NODES").decode()
        known = {
            line.split()[0]
            for line in text.splitlines()
            if line and "handshake" not in line.split()[2]
        }
        return set(ids) <= known

    @staticmethod
    def _wait(cond: Callable[[], bool], timeout_s: float, what: str) -> None:
        deadline = time.monotonic() + timeout_s
        last: BaseException | None = None
        while time.monotonic() < deadline:
            try:
                if cond():
                    return
            except (OSError, RespError) as e:
                last = e
            time.sleep(0.05)
        raise ServerError(f"the local Redis Cluster: timed out waiting for {what} ({last!r})")

    def state_ok(self, node: ClusterNode) -> bool:
        with node.connect() as conn:
            info = conn.call("CLUSTER", "INFO").decode()
            return "cluster_state:ok" in info and f"cluster_slots_ok:{CLUSTER_SLOTS}" in info

    def wait_ok(self, timeout_s: float = START_TIMEOUT_S) -> None:
        """Until every running node sees all slots served and every master has its
        replicas attached and in sync."""

        def ok() -> bool:
            running = [n for n in self.nodes if n.running]
            if not all(self.state_ok(n) for n in running):
                return False
            for node in running:
                with node.connect() as conn:
                    info = _info(conn, "replication")
                if info["role"] == "slave" and info.get("master_link_status") != "up":
                    return False
                if info["role"] == "slave" and info.get("master_sync_in_progress") != "0":
                    return False
            return True

        self._wait(ok, timeout_s, "cluster_state:ok")

    # -- what the chaos tests do -------------------------------------------------------
    def node_at(self, addr: tuple[str, int] | str) -> ClusterNode:
        if isinstance(addr, tuple):
            addr = f"{addr[0]}:{addr[1]}"
        return next(n for n in self.nodes if n.addr == addr)

    def masters(self) -> list[ClusterNode]:
        """The running nodes that are masters now (a failover changes which)."""
        return [n for n in self.nodes if n.running and n.role() == "master"]

    def slots(self) -> dict[int, ClusterNode]:
        """slot → the master serving it, as a running node sees the map."""
        node = next(n for n in self.nodes if n.running)
        out: dict[int, ClusterNode] = {}
        for entry in node.call("CLUSTER", "SLOTS"):
            master = self.node_at(f"{entry[2][0].decode()}:{entry[2][1]}")
            for slot in range(int(entry[0]), int(entry[1]) + 1):
                out[slot] = master
        return out

    def replicas_of(self, master: ClusterNode) -> list[ClusterNode]:
        out = []
        for n in self.nodes:
            if n is master or not n.running:
                continue
            with n.connect() as conn:
                info = _info(conn, "replication")
            if info["role"] == "slave" and f"{info['master_host']}:{info['master_port']}" == (
                master.addr
            ):
                out.append(n)
        return out

    def wait_promoted(self, node: ClusterNode, timeout_s: float = 30.0) -> None:
        self._wait(lambda: node.role() == "master", timeout_s, f"{node.addr} to be promoted")
        self._wait(
            lambda: all(self.state_ok(n) for n in self.nodes if n.running),
            timeout_s,
            "cluster_state:ok after the failover",
        )

    def move_slots(
        self,
        slots: Iterable[int],
        source: ClusterNode,
        target: ClusterNode,
        keys_per_migrate: int = 50,
        pause_s: float = 0.0,
    ) -> int:
        """Live resharding, as `redis-cli --cluster reshard` does it, slot by slot:
        IMPORTING on the target, MIGRATING on the source, MIGRATE the slot's keys in
        batches, then SETSLOT NODE on both and on every other master. Clients meanwhile
        get ASK for keys already moved and MOVED once a slot is done. Returns the number
        of keys moved."""
        moved = 0
        src_id, dst_id = source.node_id(), target.node_id()
        with source.connect() as src, target.connect() as dst:
            others = [n for n in self.masters() if n not in (source, target)]
            for slot in slots:
                dst.call("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
                src.call("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
                while True:
                    keys = src.call("CLUSTER", "GETKEYSINSLOT", slot, keys_per_migrate)
                    if not keys:
                        break
                    auth = () if self.password is None else ("AUTH", self.password)
                    src.call(
                        "MIGRATE", target.host, target.port, "", 0, 5000, "REPLACE", *auth,
                        "KEYS", *keys,
                    )  # fmt: skip
                    moved += len(keys)
                    if pause_s:
                        time.sleep(pause_s)
                dst.call("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
                src.call("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
                for other in others:
                    other.call("CLUSTER", "SETSLOT", slot, "NODE", dst_id)
        return moved
