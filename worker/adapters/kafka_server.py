"""Apache Kafka itself as a local process: a single-node KRaft cluster, one JVM that is both
the broker and the controller, for tests that need what tansu lacks (transactions,
idempotent producers, topic configs such as `max.message.bytes`, records that outlive a
restart).

Where it comes from: Maven Central, the one place with Kafka's jars that this project's
machines reach (the release tarball's host is not). `resolve()` writes a small pom.xml that
depends on `org.apache.kafka:kafka_2.13` and lets `mvn` copy the runtime classpath into a
cache outside the repository:

    $DERENDER_KAFKA_HOME/<version>/          (default ~/.cache/derender-kafka/<version>/)
        pom.xml  mvn.log  libs/*.jar  resolved  cds-<jvm>.jsa

The first resolution downloads 45 jars (45 MB, plus Maven's own plugins into ~/.m2, 65 MB
in all) in about 40 s, and records a class-data-sharing archive of a started broker (50 MB,
15-30 s), which cuts each later JVM start by a third to a half; afterwards `resolve()`
returns at once.

`ApacheKafka` runs `java -cp libs/* kafka.Kafka server.properties` on free ports, in the
style of `embedded.TansuBroker`: its log goes to a file in its own temporary directory, and
a failed start quotes the log's tail. Only the standard library is imported here.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from worker.adapters.embedded import LOCALHOST, LocalServer, ServerError, free_port

DEFAULT_VERSION = "4.4.0"
# Kafka 4.x logs through SLF4J 1.7, and its published POMs bring log4j-api and -core but
# no SLF4J binding: without one SLF4J falls back to its no-op logger and the broker's log
# stays empty. So the pom adds log4j-slf4j-impl, the log4j binding for SLF4J 1.x
# (log4j-slf4j2-impl would not bind to slf4j-api 1.7). The BOM holds log4j-api, -core and
# the binding to one version: the one Kafka 4.4.0 depends on.
LOG4J_VERSION = "2.25.5"
# Pinned: without a version Maven 3.8 falls back to its built-in maven-dependency-plugin
# 2.8 (2013).
DEPENDENCY_PLUGIN = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1"

ENV_KAFKA_HOME = "DERENDER_KAFKA_HOME"  # the cache root; one folder per Kafka version below
DEFAULT_CACHE = Path("~/.cache/derender-kafka")
MARKER = "resolved"  # written last: its presence means libs/ is complete
# Generous: the first run downloads Maven plugins too, on whatever network CI has.
RESOLVE_TIMEOUT_S = 1800.0
# How often `resolve` reports while mvn downloads.
PROGRESS_EVERY_S = 5.0
LOG_TAIL_LINES = 30

# A cold JVM (class loading, JIT) is most of a start. On an idle 2-core machine: about 3 s
# with the options below and the class-data archive, 4.5 s without the archive, 9 s with
# the JVM's defaults; formatting a new data dir adds about 1 s. A loaded machine doubles
# all of these.
KAFKA_START_TIMEOUT_S = 60.0
# A SIGTERM'd broker shuts down in about a second; a stuck one is SIGKILLed after this.
KAFKA_STOP_TIMEOUT_S = 20.0
FORMAT_TIMEOUT_S = 60.0
ARCHIVE_DUMP_TIMEOUT_S = 180.0
NODE_ID = 1
# JVM options for a test broker on a 2-core machine:
# - a small heap, so a few brokers and the workers fit beside each other;
# - the serial collector: no GC threads competing for the two cores;
# - C1 only (TieredStopAtLevel=1): C2's compilations during startup took as much CPU as
#   the broker itself, and test traffic never needs C2's peak speed (pass your own
#   options, e.g. without this one, for throughput benchmarks);
# - an OutOfMemoryError ends the process, so a test fails instead of hanging on a broker
#   that no longer answers.
FAST_START_JVM_OPTIONS: tuple[str, ...] = (
    "-Xms64m",
    "-Xmx512m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
)
# What Kafka logs when another process took a port between `free_port` and its bind.
BIND_FAILURE = "Address already in use"
KAFKA_MAIN = "kafka.Kafka"
STORAGE_TOOL_MAIN = "kafka.tools.StorageTool"

# Kafka's own console format, at INFO, minus the config dumps: every component logs its
# full configuration at start (2,000 of a start's 2,300 lines), which would push what
# matters out of a start error's log tail.
LOG4J2_PROPERTIES = """\
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
logger.config.name = org.apache.kafka.common.config.AbstractConfig
logger.config.level = WARN
"""

POM_TEMPLATE = """\
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by worker/adapters/kafka_server.py: the runtime classpath of an Apache Kafka
     broker, copied into libs/ by `mvn dependency:copy-dependencies`. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.derender</groupId>
  <artifactId>apache-kafka-runtime</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>org.apache.logging.log4j</groupId>
        <artifactId>log4j-bom</artifactId>
        <version>{log4j_version}</version>
        <type>pom</type>
        <scope>import</scope>
      </dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <!-- The broker and controller (kafka.Kafka) and the storage formatter
         (kafka.tools.StorageTool); its runtime dependencies bring kafka-server, -raft,
         -metadata, -storage and the coordinators. -->
    <dependency>
      <groupId>org.apache.kafka</groupId>
      <artifactId>kafka_2.13</artifactId>
      <version>{version}</version>
    </dependency>
    <dependency>
      <groupId>org.apache.logging.log4j</groupId>
      <artifactId>log4j-slf4j-impl</artifactId>
    </dependency>
  </dependencies>
</project>
"""

Progress = Callable[[str], object]


class MissingToolError(ServerError):
    """`java` or `mvn` is not installed."""


# Resolution ----------------------------------------------------------------------------


def cache_root() -> Path:
    chosen = os.environ.get(ENV_KAFKA_HOME)
    # Absolute: the JVMs run in their own working directories.
    return (Path(chosen) if chosen else DEFAULT_CACHE).expanduser().absolute()


def kafka_home(version: str = DEFAULT_VERSION) -> Path:
    return cache_root() / version


def java_binary() -> Path:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").is_file():
        return Path(java_home) / "bin" / "java"
    on_path = shutil.which("java")
    if on_path:
        return Path(on_path)
    raise MissingToolError(
        "no java: Apache Kafka 4.x needs a JDK 17 or newer (apt-get install "
        "openjdk-17-jre-headless), on PATH or in $JAVA_HOME"
    )


def mvn_binary() -> Path:
    on_path = shutil.which("mvn")
    if on_path:
        return Path(on_path)
    raise MissingToolError(
        "no mvn: Apache Kafka's jars are resolved from Maven Central with Maven "
        "(apt-get install maven)"
    )


def classpath(home: Path) -> str:
    # Explicit and sorted rather than `libs/*`: the class-data archive is only used when
    # the classpath is the one it was recorded with, in the same order.
    return os.pathsep.join(str(p) for p in sorted((home / "libs").glob("*.jar")))


def class_archive_path(home: Path, java: Path) -> Path:
    """Where the class-data-sharing archive for this Kafka and this JVM lives. An archive
    only works with the JVM build that wrote it, so its name carries the JVM binary's
    identity: a JDK upgrade makes `resolve` record a new one."""
    real = java.resolve()
    st = real.stat()
    key = hashlib.sha256(f"{real}:{st.st_size}:{st.st_mtime_ns}".encode()).hexdigest()[:12]
    return home / f"cds-{key}.jsa"


def resolve(version: str = DEFAULT_VERSION, progress: Progress = print) -> Path:
    """The cache folder of Apache Kafka `version`, with its jars in `libs/`; resolves them
    from Maven Central with mvn the first time (a minute or more), at once afterwards.
    Safe to call from several processes at once: one resolves, the others wait."""
    home = kafka_home(version)
    java = java_binary()
    if (home / MARKER).is_file() and _archive_decided(class_archive_path(home, java)):
        return home
    home.mkdir(parents=True, exist_ok=True)
    with _file_lock(home / ".lock", progress, f"Kafka {version} in {home}"):
        if not (home / MARKER).is_file():
            _resolve_jars(home, version, progress)
        archive = class_archive_path(home, java)
        if not _archive_decided(archive):
            _record_class_archive(home, version, archive, progress)
    return home


def _archive_decided(archive: Path) -> bool:
    """Recorded, or tried and failed with this JVM (not tried again: each try costs a
    broker start)."""
    return archive.is_file() or archive.with_suffix(".failed").is_file()


@contextmanager
def _file_lock(path: Path, progress: Progress, what: str) -> Iterator[None]:
    with path.open("a") as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            progress(f"waiting for another process that is resolving {what}")
            fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _resolve_jars(home: Path, version: str, progress: Progress) -> None:
    mvn = mvn_binary()
    pom = home / "pom.xml"
    pom.write_text(POM_TEMPLATE.format(version=version, log4j_version=LOG4J_VERSION))
    # Copied into a side folder and renamed when complete: an interrupted run never
    # leaves a libs/ that looks usable.
    partial = home / "libs.partial"
    shutil.rmtree(partial, ignore_errors=True)
    log_path = home / "mvn.log"
    argv = [
        str(mvn),
        "-B",  # batch mode: no prompts, no colours, one line per download
        "-Dstyle.color=never",
        "-f",
        str(pom),
        f"{DEPENDENCY_PLUGIN}:copy-dependencies",
        f"-DoutputDirectory={partial}",
        "-Dmdep.includeScope=runtime",
    ]
    progress(
        f"resolving Apache Kafka {version} from Maven Central with mvn into {home} "
        f"(the first time takes a minute or more; log: {log_path})"
    )
    started = time.monotonic()
    code = _run_mvn(argv, log_path, version, started, progress)
    if code != 0:
        raise ServerError(
            f"mvn could not resolve org.apache.kafka:kafka_2.13:{version} (exit code {code}); "
            f"{log_path} ends with:\n{_tail(log_path)}"
        )
    if not (partial / f"kafka_2.13-{version}.jar").is_file():
        raise ServerError(
            f"mvn finished but {partial} has no kafka_2.13-{version}.jar; "
            f"{log_path} ends with:\n{_tail(log_path)}"
        )
    libs = home / "libs"
    shutil.rmtree(libs, ignore_errors=True)
    partial.rename(libs)
    jars = sorted(p.name for p in libs.glob("*.jar"))
    (home / MARKER).write_text("\n".join(jars) + "\n")
    size_mb = sum(p.stat().st_size for p in libs.glob("*.jar")) / 1e6
    progress(
        f"resolved Apache Kafka {version}: {len(jars)} jars, {size_mb:.0f} MB in "
        f"{time.monotonic() - started:.0f} s"
    )


def _run_mvn(
    argv: list[str], log_path: Path, version: str, started: float, progress: Progress
) -> int | str:
    """Run mvn with its output in `log_path`, reporting how many files it has downloaded
    every few seconds. Returns the exit code, or a reason it could not finish."""
    try:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
        )
    except OSError as e:
        return f"cannot run {argv[0]}: {e}"
    # Reading its output blocks, so a silent, hung mvn is ended by a timer instead.
    timed_out = threading.Event()

    def expire() -> None:
        timed_out.set()
        proc.kill()

    timer = threading.Timer(RESOLVE_TIMEOUT_S, expire)
    timer.start()
    downloads = 0
    latest = ""
    last_report = started
    try:
        assert proc.stdout is not None
        with log_path.open("w") as log:
            for line in proc.stdout:
                log.write(line)
                # "[INFO] Downloaded from central: https://.../name-1.0.jar (12 kB at …)"
                _, found, source = line.partition("Downloaded from ")
                if found:
                    downloads += 1
                    words = source.split()
                    latest = words[1].rsplit("/", 1)[-1] if len(words) > 1 else latest
                now = time.monotonic()
                if downloads and now - last_report >= PROGRESS_EVERY_S:
                    last_report = now
                    progress(
                        f"  Kafka {version}: {downloads} files downloaded in "
                        f"{now - started:.0f} s (latest: {latest})"
                    )
        code = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if timed_out.is_set():
        return f"timed out after {RESOLVE_TIMEOUT_S:.0f} s"
    return code


def _record_class_archive(home: Path, version: str, archive: Path, progress: Progress) -> None:
    """Start a broker once with -XX:ArchiveClassesAtExit, so the classes it loaded are
    stored pre-parsed in `archive` (JDK 13+ dynamic CDS) and later JVMs map them instead of
    loading them from the jars: a broker then starts in about 3 s instead of 4.5, the
    storage formatter in 0.9 s instead of 1.5. Only an optimisation: if it fails, brokers
    start without it, and `<archive>.failed` says why (delete it to try again)."""
    progress(f"recording a class-data archive of Apache Kafka {version} (once, 15-30 s)")
    partial = archive.with_suffix(".partial")
    partial.unlink(missing_ok=True)
    kafka = ApacheKafka(home=home, use_class_archive=False)
    try:
        # Formatted first, without the option: the formatter's JVM would dump an archive
        # of its own at exit (8 s), only to be overwritten by the broker's.
        kafka.format()
        kafka.jvm_options += [f"-XX:ArchiveClassesAtExit={partial}", "-Xlog:cds=off"]
        kafka.start()
        # The JVM writes the archive as it exits: 10 s or more, past a normal stop's
        # timeout (whose SIGKILL would lose the archive).
        kafka.stop(timeout_s=ARCHIVE_DUMP_TIMEOUT_S)
    except ServerError as e:
        failure = str(e)
    else:
        failure = "the JVM wrote no archive"
        if partial.is_file() and partial.stat().st_size > 0:
            partial.rename(archive)
            return
    finally:
        kafka.close()
    partial.unlink(missing_ok=True)
    progress(f"  no class-data archive, brokers start without one: {failure}")
    archive.with_suffix(".failed").write_text(failure + "\n")


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# The Kafka protocol, just enough to ask for metadata -------------------------------------


@dataclass(frozen=True)
class BrokerMetadata:
    cluster_id: str | None
    controller_id: int
    brokers: tuple[tuple[int, str, int], ...]  # (node id, host, port)


# Metadata v4 with request header v1: the oldest version Kafka 4.x still serves (KIP-896
# removed v0-v3), and the newest before the "flexible" encoding, so fixed-width fields
# suffice.
METADATA_API_KEY = 3
METADATA_VERSION = 4


def kafka_metadata(host: str, port: int, timeout_s: float = 1.0) -> BrokerMetadata | None:
    """The broker list and cluster id a Kafka broker on host:port reports, or None when
    nothing answers a Metadata request there (yet)."""
    client_id = b"derender-probe"
    correlation_id = 1
    request = (
        struct.pack(">hhih", METADATA_API_KEY, METADATA_VERSION, correlation_id, len(client_id))
        + client_id
        # topics: an empty array (none; null would list every topic), and
        # allow_auto_topic_creation: false.
        + struct.pack(">i?", 0, False)
    )
    try:
        with socket.create_connection((host, port), timeout=timeout_s) as s:
            s.sendall(struct.pack(">i", len(request)) + request)
            (size,) = struct.unpack(">i", _recv_exactly(s, 4))
            reply = _recv_exactly(s, size)
        return _parse_metadata(reply, correlation_id)
    except (OSError, struct.error, ValueError, UnicodeDecodeError):
        return None


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = s.recv(n - len(data))
        if not chunk:
            raise ValueError("connection closed mid-reply")
        data += chunk
    return data


def _parse_metadata(reply: bytes, correlation_id: int) -> BrokerMetadata:
    pos = 0

    def take(fmt: str) -> tuple[int, ...]:
        nonlocal pos
        values = struct.unpack_from(fmt, reply, pos)
        pos += struct.calcsize(fmt)
        return tuple(int(v) for v in values)

    def string() -> str | None:
        nonlocal pos
        (length,) = take(">h")
        if length < 0:
            return None
        text = reply[pos : pos + length].decode()
        pos += length
        return text

    (got_id,) = take(">i")
    if got_id != correlation_id:
        raise ValueError(f"correlation id {got_id}, expected {correlation_id}")
    take(">i")  # throttle_time_ms
    (count,) = take(">i")
    brokers = []
    for _ in range(count):
        (node_id,) = take(">i")
        broker_host = string() or ""
        (broker_port,) = take(">i")
        string()  # rack
        brokers.append((node_id, broker_host, broker_port))
    cluster_id = string()
    (controller_id,) = take(">i")
    return BrokerMetadata(cluster_id, controller_id, tuple(brokers))


# The broker ------------------------------------------------------------------------------


def new_cluster_id() -> str:
    """A random Kafka cluster id: 16 bytes in URL-safe base64 without padding, as
    `kafka-storage random-uuid` prints (and, like it, never starting with '-', which a
    command line would take for an option)."""
    while True:
        text = base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def read_properties(path: Path) -> dict[str, str]:
    """A Java .properties file as Kafka writes them (key=value lines, # comments)."""
    result: dict[str, str] = {}
    for line in path.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")):
            key, _, value = line.partition("=")
            result[key.strip()] = value.strip()
    return result


class ApacheKafka(LocalServer):
    """One Apache Kafka 4.x process in KRaft combined mode (broker + controller, node 1)
    on 127.0.0.1. Transactions, idempotent producers, consumer groups and topic configs
    work as in production; topics are never created implicitly.

    Storage lives in `data_dir`: a temporary folder removed by `close()`, or the given
    folder, which is kept, so a new ApacheKafka on it (on other ports too) finds its topics
    and records again. The storage is formatted once, on the first start.

    `stop()` sends SIGTERM (a clean shutdown, about a second), then SIGKILL; `kill()` is a
    crash; `pause()` / `resume()` freeze and thaw the process (SIGSTOP / SIGCONT), as a
    long GC pause or a partitioned broker would look to clients; `restart()` keeps the
    ports and the data.
    """

    name = "kafka"

    def __init__(
        self,
        version: str = DEFAULT_VERSION,
        *,
        data_dir: Path | None = None,
        port: int | None = None,
        controller_port: int | None = None,
        host: str = LOCALHOST,
        config: Mapping[str, str] | None = None,
        jvm_options: Sequence[str] = FAST_START_JVM_OPTIONS,
        home: Path | None = None,
        use_class_archive: bool = True,
        progress: Progress = print,
    ) -> None:
        """`config` adds to or overrides the server.properties this class writes;
        `home` is a folder made by `resolve` (default: resolve `version` now)."""
        java = java_binary()
        self.home = home if home is not None else resolve(version, progress)
        super().__init__(java, port, host)
        self.controller_port = controller_port if controller_port is not None else free_port(host)
        self.data_dir = Path(data_dir).absolute() if data_dir is not None else self.workdir / "data"
        self.config_path = self.workdir / "server.properties"
        self.log4j_path = self.workdir / "log4j2.properties"
        self.extra_config = dict(config or {})
        archive = class_archive_path(self.home, java)
        self.jvm_options = list(jvm_options)
        if use_class_archive and archive.is_file():
            self.jvm_options.append(f"-XX:SharedArchiveFile={archive}")
        self._classpath = classpath(self.home)
        self._paused = False
        self.cluster_id: str | None = self._formatted_cluster_id()
        # Seconds the last start took, formatting included (for callers that track it).
        self.last_start_s: float | None = None

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def properties(self) -> dict[str, str]:
        """The server.properties of the next start."""
        props = {
            # One process is the whole cluster: broker and KRaft controller (4.x has no
            # ZooKeeper mode).
            "process.roles": "broker,controller",
            "node.id": str(NODE_ID),
            # A static quorum of one voter. `format --standalone` would make a dynamic
            # quorum instead, which records the controller's endpoint in the metadata log;
            # with a static one, a kept data dir also starts on other ports.
            "controller.quorum.voters": f"{NODE_ID}@{self.host}:{self.controller_port}",
            "listeners": (
                f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}"
            ),
            "advertised.listeners": (
                f"PLAINTEXT://{self.host}:{self.port},CONTROLLER://{self.host}:{self.controller_port}"
            ),
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(self.data_dir),
            # A broker killed and started again cannot register until the controller
            # (restarted with it) expires the old registration's session: 9 s by default,
            # and registration retries every heartbeat interval (2 s). Shorter for tests,
            # yet longer than a loaded CI machine's stalls.
            "broker.session.timeout.ms": "3000",
            "broker.heartbeat.interval.ms": "500",
            # One broker: the internal topics can have one replica only (the defaults of 3
            # would leave consumer groups and transactions without a coordinator).
            "offsets.topic.replication.factor": "1",
            "transaction.state.log.replication.factor": "1",
            "transaction.state.log.min.isr": "1",
            "share.coordinator.state.topic.replication.factor": "1",
            "share.coordinator.state.topic.min.isr": "1",
            # One partition each instead of 50: the first consumer group and the first
            # transactional producer of a fresh cluster wait for these topics to be
            # created and loaded (2-2.5 s each with 50 partitions, under 1 s with one).
            # Coordination works the same on one partition.
            "offsets.topic.num.partitions": "1",
            "transaction.state.log.num.partitions": "1",
            "min.insync.replicas": "1",
            # Tests start consumers and expect them to be assigned partitions at once, not
            # after the default 3 s wait for more members.
            "group.initial.rebalance.delay.ms": "0",
            "num.partitions": "1",
            # As in production here: the worker's topics are created on purpose, and a
            # typo in a topic name should fail rather than make a new topic.
            "auto.create.topics.enable": "false",
        }
        props.update(self.extra_config)
        return props

    # LocalServer hooks ---------------------------------------------------------------
    def argv(self) -> list[str]:
        return self._java_argv(KAFKA_MAIN, str(self.config_path))

    def ready(self) -> bool:
        # Accepting connections is not enough: the broker listens before it has caught up
        # with the metadata log and registered. It is ready when it answers a Metadata
        # request listing itself, with our cluster id (not another broker on the port).
        meta = kafka_metadata(self.host, self.port)
        return (
            meta is not None
            and self.cluster_id is not None
            and meta.cluster_id == self.cluster_id
            and any(node == NODE_ID and port == self.port for node, _, port in meta.brokers)
        )

    # ---------------------------------------------------------------------------------
    def start(self, timeout_s: float = KAFKA_START_TIMEOUT_S) -> Self:
        """Write the config, format the storage if it never was, start the broker and wait
        until it serves metadata; on fresh ports if the chosen ones were taken meanwhile
        (only when the ports were not given)."""
        began = time.monotonic()
        attempts = 3 if self._port_chosen else 1
        for attempt in range(attempts):
            self.format()
            try:
                self._start_once(timeout_s)
            except ServerError as e:
                # Fresh ports only help when a port was the problem (the error quotes the
                # log's tail); any other failure would only repeat, a minute each.
                taken = BIND_FAILURE in str(e)
                if attempt + 1 == attempts or self.running or not taken:
                    raise
                self.port = free_port(self.host)
                self.controller_port = free_port(self.host)
                continue
            # From now on the ports are the cluster's address: a restart keeps them.
            self._port_chosen = False
            break
        self.last_start_s = time.monotonic() - began
        return self

    def stop(self, timeout_s: float = KAFKA_STOP_TIMEOUT_S) -> None:
        # A stopped (SIGSTOP) process would act on SIGTERM only after the timeout's
        # SIGKILL: thaw it first so it shuts down cleanly.
        if self._paused:
            self.resume()
        super().stop(timeout_s)

    def kill(self) -> None:
        super().kill()  # SIGKILL also ends a paused process
        self._paused = False

    def pause(self) -> None:
        """Freeze the broker (SIGSTOP): connections stay open but nothing answers. The
        controller freezes with it; after a pause longer than broker.session.timeout.ms
        (3 s) it fences the broker on resume and unfences it at the next heartbeat, as
        after a real stall."""
        if self._proc is None or self._proc.poll() is not None:
            raise ServerError("kafka is not running")
        os.kill(self._proc.pid, signal.SIGSTOP)
        self._paused = True

    def resume(self) -> None:
        """Thaw a paused broker (SIGCONT)."""
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGCONT)
        self._paused = False

    @property
    def paused(self) -> bool:
        return self._paused

    # ---------------------------------------------------------------------------------
    def _java_argv(self, main: str, *args: str) -> list[str]:
        return [
            str(self.binary),
            *self.jvm_options,
            f"-Dlog4j2.configurationFile={self.log4j_path}",
            "-cp",
            self._classpath,
            main,
            *args,
        ]

    def _write_config(self) -> None:
        lines = [f"{key}={value}" for key, value in self.properties().items()]
        self.config_path.write_text("\n".join(lines) + "\n")
        self.log4j_path.write_text(LOG4J2_PROPERTIES)

    def _formatted_cluster_id(self) -> str | None:
        meta = self.data_dir / "meta.properties"
        if not meta.is_file():
            return None
        return read_properties(meta).get("cluster.id")

    def format(self) -> None:
        """Write the config and, unless `data_dir` already holds a formatted storage,
        run `kafka-storage format`: it writes meta.properties (cluster and node id) and
        the bootstrap metadata (feature levels) that a KRaft node refuses to start
        without."""
        self._write_config()
        if self.cluster_id is not None:
            return
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cluster_id = new_cluster_id()
        argv = self._java_argv(
            STORAGE_TOOL_MAIN, "format", "-t", cluster_id, "-c", str(self.config_path)
        )
        with self.log_path.open("ab") as log:
            try:
                done = subprocess.run(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self.workdir,
                    timeout=FORMAT_TIMEOUT_S,
                    check=False,
                )
            except (OSError, subprocess.TimeoutExpired) as e:
                raise ServerError(
                    f"formatting Kafka storage in {self.data_dir} failed: {e}; log tail:\n"
                    f"{self.log_tail()}"
                ) from e
        if done.returncode != 0:
            raise ServerError(
                f"formatting Kafka storage in {self.data_dir} failed (exit code "
                f"{done.returncode}); log tail:\n{self.log_tail()}"
            )
        self.cluster_id = self._formatted_cluster_id()
        if self.cluster_id != cluster_id:
            raise ServerError(f"{self.data_dir}/meta.properties lacks cluster.id {cluster_id}")

    def __repr__(self) -> str:
        state = f"pid {self.pid}" if self.running else "stopped"
        if self._paused:
            state += ", paused"
        return f"<ApacheKafka {self.bootstrap} {state} (data {self.data_dir})>"


if __name__ == "__main__":  # python -m worker.adapters.kafka_server: resolve, start, stop
    with ApacheKafka() as _kafka:
        print(f"{_kafka!r} started in {_kafka.last_start_s:.1f} s", file=sys.stderr)
