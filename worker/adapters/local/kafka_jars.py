"""Apache Kafka's jars from Maven Central, resolved with `mvn` into a cache outside the
repository. Maven Central is the one place with Kafka's jars that this project's machines
reach (the release tarball's host is not).

`resolve_jars()` writes a small pom.xml that depends on `org.apache.kafka:kafka_2.13` and
lets mvn copy the runtime classpath into

    $DERENDER_KAFKA_HOME/<version>/          (default ~/.cache/derender-kafka/<version>/)
        pom.xml  mvn.log  libs/*.jar  resolved

The first resolution downloads 45 jars (45 MB, plus Maven's own plugins into ~/.m2, 65 MB
in all) in about 40 s, reporting progress every few seconds; afterwards it returns at once.
The broker itself (and the class-data archive recorded on top of these jars) is
`kafka_server`'s. So are the broker's small text formats at the end (a KRaft cluster
id, a .properties file, its log4j2 configuration). Only the standard library is imported here.
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from worker.adapters.local.embedded import ServerError

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
# How often `resolve_jars` reports while mvn downloads.
PROGRESS_EVERY_S = 5.0
LOG_TAIL_LINES = 30

POM_TEMPLATE = """\
<?xml version="1.0" encoding="UTF-8"?>
<!-- Written by worker/adapters/local/kafka_jars.py: the runtime classpath of an Apache Kafka
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


def missing_tools() -> list[str]:
    """What stops Apache Kafka from running here: each missing tool's message (none when
    java and mvn are both installed). mvn is needed even with the jars cached: a cache
    is never a reason to pick a broker that could not be rebuilt on this machine."""
    missing = []
    for find in (java_binary, mvn_binary):
        try:
            find()
        except MissingToolError as e:
            missing.append(str(e))
    return missing


def jars_resolved(version: str = DEFAULT_VERSION) -> bool:
    """True when `version`'s jars are in the cache already (no download needed)."""
    return (kafka_home(version) / MARKER).is_file()


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


@contextmanager
def file_lock(path: Path, progress: Progress, what: str) -> Iterator[None]:
    """An exclusive lock on `path` across processes; says so when it has to wait."""
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


def resolve_jars(home: Path, version: str, progress: Progress) -> None:
    """Copy Kafka `version`'s runtime classpath into `home`/libs with mvn (the caller
    holds `home`'s lock and has checked the marker)."""
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
            f"{log_path} ends with:\n{tail(log_path)}"
        )
    if not (partial / f"kafka_2.13-{version}.jar").is_file():
        raise ServerError(
            f"mvn finished but {partial} has no kafka_2.13-{version}.jar; "
            f"{log_path} ends with:\n{tail(log_path)}"
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
    assert proc.stdout is not None
    try:
        # The pipe is closed here, not by the garbage collector: an unclosed file's
        # ResourceWarning would surface in whichever test happened to run then.
        with proc.stdout as output, log_path.open("w") as log:
            for line in output:
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


def tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    """The last lines of a log file ('' when it cannot be read)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])


# The broker's small text formats --------------------------------------------------------


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
