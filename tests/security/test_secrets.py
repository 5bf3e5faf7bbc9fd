"""No secret in any log line, metric, exception text, /metrics, `ps` output or the settings
dump: the worker runs (two processes under the supervisor, at DEBUG) with a SASL password
and a Redis password read from mounted files, and its whole output, its /metrics and every
process's command line are searched for the secrets; `serve`'s API key, from a file, the
same. (A refused password is searched for in test_kafka_refusals.)"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import uuid
from pathlib import Path

import pytest
import redis

from tests.integration.harness import ROOT
from tests.security.broker.kafka_fixtures import (
    WORKER_PASSWORD,
    SecuredBroker,
    Topics,
    run,
    secured_kafka,  # noqa: F401 (the fixture)
)
from tests.support import servers
from worker.adapters.local.embedded import free_port

pytestmark = pytest.mark.integration

DEADLINE_S = 60.0


def _cmdlines(pid: int) -> list[str]:
    """The command lines of `pid` and its children (as `ps` shows them)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if int(entry.name) == pid or ppid == pid:
            out.append(cmdline)
    return out


def _ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def _leaks(text: str, secrets: list[str]) -> list[str]:
    return [s for s in secrets if s in text]


def test_the_worker_shows_no_secret(
    secured_kafka: SecuredBroker,  # noqa: F811
    restartable_redis: servers.RedisServer,
    tmp_path: Path,
) -> None:
    b = secured_kafka
    redis_password = f"rds-{uuid.uuid4().hex}"
    with redis.Redis(port=restartable_redis.port) as r:
        r.config_set("requirepass", redis_password)
    redis_url = f"redis://:{redis_password}@127.0.0.1:{restartable_redis.port}/0"
    secrets = [WORKER_PASSWORD, redis_password]
    files = tmp_path / "secrets"
    files.mkdir()
    (files / "sasl-password").write_text(WORKER_PASSWORD + "\n")
    (files / "redis-url").write_text(redis_url)
    topics: Topics = run(b.fresh())
    run(b.grant(topics.worker_acls()))
    port = free_port("127.0.0.1")
    argv = [
        sys.executable, "-m", "worker", "run", "--bootstrap-servers", b.sasl,
        *topics.flags(), *b.sasl_flags(), "--sasl-password-file", str(files / "sasl-password"),
        "--state-prefix", f"sec-{topics.group}:", "--metrics-port", str(port),
        "--processes", "2", "--log-level", "DEBUG",
    ]  # fmt: skip
    log = tmp_path / "worker.log"
    with log.open("wb") as out:
        worker = subprocess.Popen(
            argv,
            cwd=ROOT,
            env={**os.environ, "DERENDER_REDIS_URL_FILE": str(files / "redis-url")},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        # Ready: both processes logged in and joined the group (the supervisor's /readyz
        # is every child's), the lag sampler has its clients.
        deadline = time.monotonic() + DEADLINE_S
        while not _ready(port):
            assert worker.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
            metrics = r.read().decode()
        commands = _cmdlines(worker.pid)
        assert len(commands) == 3, commands  # the supervisor and its two workers
        assert not _leaks(metrics, secrets)
        assert not _leaks("\n".join(commands), secrets)
    finally:
        worker.terminate()
        worker.wait(timeout=DEADLINE_S)
    output = log.read_text()
    assert worker.returncode == 0, output
    assert "DEBUG" in output and "settings: " in output  # (the dump, at the most talkative)
    assert "'sasl_password': '***'" in output
    assert f"'redis_url': 'redis://:***@127.0.0.1:{restartable_redis.port}/0'" in output
    assert not _leaks(output, secrets)


def test_serve_shows_no_secret(tmp_path: Path) -> None:
    api_key, state_key = f"key-{uuid.uuid4().hex}", f"state-{uuid.uuid4().hex}"
    (tmp_path / "api-key").write_text(api_key)
    env = {
        **os.environ,
        "DERENDER_API_KEY_FILE": str(tmp_path / "api-key"),
        "DERENDER_STATE_KEY": state_key,
        "DERENDER_LOG_LEVEL": "DEBUG",
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "worker", "serve", "--host", "127.0.0.1", "--port", "0"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().rsplit(":", 1)[1])
        url = f"http://127.0.0.1:{port}"
        wrong = urllib.request.Request(f"{url}/v1/models", headers={"Authorization": "Bearer x"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(wrong, timeout=5)
        refused.value.close()
        assert refused.value.code == 401
        right = urllib.request.Request(
            f"{url}/v1/models", headers={"Authorization": f"Bearer {api_key}"}
        )
        with urllib.request.urlopen(right, timeout=5) as r:
            assert r.status == 200
        with urllib.request.urlopen(f"{url}/metrics", timeout=5) as r:
            metrics = r.read().decode()
        commands = "\n".join(_cmdlines(proc.pid))
        assert not _leaks(metrics + commands, [api_key, state_key])
    finally:
        proc.terminate()
        out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    assert "'api_key': '***'" in err and "'state_key': '***'" in err
    assert not _leaks(out + err, [api_key, state_key])
