"""`derender-worker servers --redis-cluster N`: a real Redis Cluster for development.

Runs `worker.tools.servers.run_servers` in a child process as the CLI does (tansu as the broker:
quick, and the cluster is what is tested here), waits for `REDIS_URL=…`, checks the seeds
lead to a cluster of N masters with a replica each that serves every slot, and that
SIGTERM stops every node (exit 0)."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.integration.harness import ROOT
from tests.support import servers
from worker.adapters.local.embedded import redis_server_binary, tansu_binary, tcp_accepts
from worker.adapters.state.redis_store import RedisStore
from worker.ports import StateWrite, Stored

pytestmark = pytest.mark.integration

# `derender-worker servers --redis-cluster N --kafka tansu`, without relying on the CLI.
SNIPPET = (
    "import sys; from worker.tools.servers import Options, run_servers; "
    "sys.exit(run_servers(Options(kafka='tansu', redis_cluster=int(sys.argv[1]))))"
)


def test_servers_start_a_cluster_and_stop_it_on_sigterm(tmp_path: Path) -> None:
    try:
        redis_server_binary()
        tansu_binary()
    except servers.ServerError as e:
        pytest.skip(str(e))
    log = tmp_path / "servers.log"
    with log.open("ab") as err:
        proc = subprocess.Popen(
            [sys.executable, "-c", SNIPPET, "2"],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
    try:
        assert proc.stdout is not None
        lines = [proc.stdout.readline(), proc.stdout.readline()]
        assert lines[0].startswith("KAFKA_BOOTSTRAP_SERVERS="), log.read_text()
        assert lines[1].startswith("REDIS_URL=redis://"), log.read_text()
        url = lines[1].strip().split("=", 1)[1]
        addrs = url.removeprefix("redis://").split(",")
        assert len(addrs) == 4  # 2 masters, 2 replicas
        host, port = addrs[0].split(":")
        info = servers.redis_call(host, int(port), "CLUSTER", "INFO").decode()
        assert "cluster_state:ok" in info and "cluster_size:2" in info
        assert "cluster_known_nodes:4" in info

        async def use() -> None:
            store = RedisStore(url, mode="cluster", key_prefix="s:")
            try:
                writes = [StateWrite(f"r{i}", 0, b"x", False, None, 1) for i in range(50)]
                assert await store.save_many(writes) == []
                got = await store.load_many([f"r{i}" for i in range(50)])
                assert list(got.values()) == [Stored(0, b"x")] * 50
            finally:
                await store.close()

        asyncio.run(use())
        stderr = log.read_text()
        assert "a Redis Cluster (2 masters with a replica each)" in stderr
        assert "--redis-mode cluster" in stderr
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0, log.read_text()
        for addr in addrs:
            h, p = addr.split(":")
            assert not tcp_accepts(h, int(p)), f"{addr} still accepts connections"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_data_dir_is_refused_with_a_cluster(tmp_path: Path) -> None:
    snippet = (
        "import sys; from pathlib import Path; from worker.tools.servers import Options, "
        "run_servers; sys.exit(run_servers(Options(kafka='tansu', data_dir=Path(sys.argv[1]),"
        " redis_cluster=3)))"
    )
    done = subprocess.run(
        [sys.executable, "-c", snippet, str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "--redis-cluster keeps no data across runs" in done.stderr
