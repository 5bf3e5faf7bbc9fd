"""Apache Kafka itself as a local process: a single-node KRaft cluster, one JVM that is both
the broker and the controller, for tests that need what tansu lacks (transactions,
idempotent producers, topic configs such as `max.message.bytes`, records that outlive a
restart), and for `derender-worker servers`.

Its jars come from Maven Central (`kafka_jars`); `resolve()` makes sure they are in the
cache and records, once per JVM, a class-data-sharing archive of a started broker
(`cds-<jvm>.jsa` beside the jars: 50 MB, 15-30 s), which cuts each later JVM start by a
third to a half; afterwards it returns at once.

`ApacheKafka` runs `java -cp libs/* kafka.Kafka server.properties` on free ports, in the
style of `embedded.TansuBroker`: its log goes to a file in its own temporary directory, a
failed start quotes the log's tail, and it is ready when it answers a Metadata request
(`kafka_probe`). Only the standard library is imported here.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Self

from worker.adapters.broker.kafka_probe import (
    BrokerMetadata,
    group_coordinator_error,
    kafka_metadata,
)
from worker.adapters.local.embedded import LOCALHOST, LocalServer, ServerError, free_port
from worker.adapters.local.kafka_jars import (
    DEFAULT_VERSION,
    LOG4J2_PROPERTIES,
    MissingToolError,
    Progress,
    class_archive_path,
    classpath,
    file_lock,
    jars_resolved,
    java_binary,
    kafka_home,
    missing_tools,
    new_cluster_id,
    read_properties,
    resolve_jars,
)

__all__ = [
    "DEFAULT_VERSION",
    "ApacheKafka",
    "BrokerMetadata",
    "MissingToolError",
    "jars_resolved",
    "kafka_metadata",
    "missing_tools",
    "resolve",
    "starts_from_cache",
]

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


def resolve(version: str = DEFAULT_VERSION, progress: Progress = print) -> Path:
    """The cache folder of Apache Kafka `version`, with its jars in `libs/`; resolves them
    from Maven Central with mvn the first time (a minute or more), at once afterwards.
    Safe to call from several processes at once: one resolves, the others wait."""
    home = kafka_home(version)
    java = java_binary()
    if starts_from_cache(version):
        return home
    home.mkdir(parents=True, exist_ok=True)
    with file_lock(home / ".lock", progress, f"Kafka {version} in {home}"):
        if not jars_resolved(version):
            resolve_jars(home, version, progress)
        archive = class_archive_path(home, java)
        if not _archive_decided(archive):
            _record_class_archive(home, version, archive, progress)
    return home


def starts_from_cache(version: str = DEFAULT_VERSION) -> bool:
    """True when a broker of `version` can start at once: java is installed and `resolve`
    has nothing left to do (no download, no class-data archive to record)."""
    try:
        java = java_binary()
    except MissingToolError:
        return False
    home = kafka_home(version)
    return jars_resolved(version) and _archive_decided(class_archive_path(home, java))


def _archive_decided(archive: Path) -> bool:
    """Recorded, or tried and failed with this JVM (not tried again: each try costs a
    broker start)."""
    return archive.is_file() or archive.with_suffix(".failed").is_file()


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


# The broker ------------------------------------------------------------------------------


class ApacheKafka(LocalServer):
    """One Apache Kafka 4.x process in KRaft combined mode (broker + controller, node 1
    unless it is a cluster member) on 127.0.0.1. Transactions, idempotent producers,
    consumer groups and topic configs work as in production; topics are never created
    implicitly.

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
        node_id: int = NODE_ID,
        voters: Mapping[int, int] | None = None,
        cluster_id: str | None = None,
    ) -> None:
        """`config` adds to or overrides the server.properties this class writes;
        `home` is a folder made by `resolve` (default: resolve `version` now). A member of
        a cluster (the tests' kafka_cluster.py) has its `node_id`, the quorum's `voters` (node id →
        controller port, its own included) and the `cluster_id` to format its storage with."""
        java = java_binary()
        self.home = home if home is not None else resolve(version, progress)
        super().__init__(java, port, host)
        self.node_id = node_id
        if voters is not None:
            controller_port = voters[node_id]
        self.controller_port = controller_port if controller_port is not None else free_port(host)
        self.voters = dict(voters) if voters is not None else None
        self._new_cluster_id = cluster_id
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
        voters = self.voters if self.voters is not None else {self.node_id: self.controller_port}
        props = {
            # One process is a broker and a KRaft controller (4.x has no ZooKeeper mode);
            # alone, it is the whole cluster.
            "process.roles": "broker,controller",
            "node.id": str(self.node_id),
            # A static quorum (of one voter alone). `format --standalone` would make a
            # dynamic quorum instead, which records the controller's endpoint in the
            # metadata log; with a static one, a kept data dir also starts on other ports.
            "controller.quorum.voters": ",".join(
                f"{node}@{self.host}:{port}" for node, port in sorted(voters.items())
            ),
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
            # Keep records whatever their timestamps: the chaos suites stamp theirs in
            # 2023, far past the 7-day default, and the first retention check (30 s after
            # start) deleted records a worker had not read yet.
            "log.retention.ms": "-1",
            "transaction.state.log.num.partitions": "1",
            "min.insync.replicas": "1",
            # Tests start consumers and expect them to be assigned partitions at once, not
            # after the default 3 s wait for more members.
            "group.initial.rebalance.delay.ms": "0",
            # The tests and the demo run workers with 3 s session timeouts, so that a
            # killed or frozen member leaves the group within seconds; Kafka refuses
            # anything under 6 s by default (INVALID_SESSION_TIMEOUT at JoinGroup).
            "group.min.session.timeout.ms": "1000",
            # The same for KIP-848 groups (`--kafka-client confluent`), whose session and
            # heartbeat the broker sets (45 s and 5 s by default): a member hears of a
            # rebalance at its next heartbeat.
            "group.consumer.session.timeout.ms": "3000",
            "group.consumer.min.session.timeout.ms": "1000",
            "group.consumer.heartbeat.interval.ms": "500",
            "group.consumer.min.heartbeat.interval.ms": "100",
            # The broker computes a KIP-848 group's new assignment at most once per this
            # interval (1 s by default): a partition waited for it on every move.
            "group.consumer.assignment.interval.ms": "0",
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
            and any(node == self.node_id and port == self.port for node, _, port in meta.brokers)
        )

    # ---------------------------------------------------------------------------------
    def start(self, timeout_s: float = KAFKA_START_TIMEOUT_S) -> Self:
        """Write the config, format the storage if it never was, start the broker and wait
        until it serves metadata and consumer groups; on fresh ports if the chosen ones
        were taken meanwhile (only when the ports were not given)."""
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
                if self.voters is None:  # (a cluster's voters are fixed: no new port there)
                    self.controller_port = free_port(self.host)
                continue
            # From now on the ports are the cluster's address: a restart keeps them.
            self._port_chosen = False
            break
        self._await_group_coordinator(began + timeout_s)
        self.last_start_s = time.monotonic() - began
        return self

    def _await_group_coordinator(self, deadline: float) -> None:
        """Until a consumer group would find its coordinator: on a fresh cluster the first
        FindCoordinator creates `__consumer_offsets`, which takes about a second to load
        (kafka_probe)."""
        while (code := group_coordinator_error(self.host, self.port)) != 0:
            if not self.running:
                raise ServerError(f"kafka exited after its start; log tail:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise ServerError(
                    f"kafka serves metadata but no group coordinator (error {code}); "
                    f"log tail:\n{self.log_tail()}"
                )
            time.sleep(0.05)

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
        _wait_stopped(self._proc.pid)

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
        cluster_id = self._new_cluster_id or new_cluster_id()
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


def _main() -> None:
    """python -m worker.adapters.local.kafka_server: resolve (with progress), start once, stop:
    whether this machine can run Apache Kafka, and how long a start takes."""

    def progress(line: str) -> None:
        print(line, flush=True)  # flushed: a pipe (CI's log) would hold it until exit

    with ApacheKafka(progress=progress) as kafka:
        progress(f"{kafka!r} started in {kafka.last_start_s or 0:.1f} s")


if __name__ == "__main__":
    _main()


# How long pause() waits for every thread of the JVM to have stopped.
STOPPED_TIMEOUT_S = 5.0


def _wait_stopped(pid: int, timeout_s: float = STOPPED_TIMEOUT_S) -> None:
    """Return once every thread of `pid` is stopped: kill() only makes the stop pending
    (on a loaded machine a paused broker once still answered a Metadata request)."""
    tasks = Path(f"/proc/{pid}/task")
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            stats = [(t / "stat").read_text() for t in tasks.iterdir()]
        except OSError:
            return
        # The state is the field after the command name, which ends at the last ")".
        if all(stat.rsplit(")", 1)[1].split()[0] in ("T", "t") for stat in stats):
            return
        time.sleep(0.005)
    raise ServerError(f"kafka (pid {pid}) did not stop within {timeout_s:g} s of SIGSTOP")
