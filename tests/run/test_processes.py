"""The supervisor's pure parts: how many processes `auto` means, what each is given, and
how their metrics merge into one exposition (tests/integration/test_processes.py runs it)."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from worker.errors import ConfigError
from worker.observe.metrics import Metrics
from worker.run.cpus import cgroup_cpu_quota, usable_cpus
from worker.run.processes import Supervisor, child_env, merge_expositions
from worker.settings import Settings, SettingsError, add_flags, from_args, to_env


def _parse(argv: list[str], environ: dict[str, str] | None = None) -> Settings:
    parser = argparse.ArgumentParser()
    add_flags(parser, environ=environ or {})
    return from_args(parser.parse_args(argv))


@pytest.mark.parametrize(
    ("files", "quota", "cpus"),
    [
        ({"cpu.max": "max 100000\n"}, None, 8),
        ({"cpu.max": "200000 100000\n"}, 2.0, 2),
        ({"cpu.max": "150000 100000\n"}, 1.5, 2),  # a fractional quota rounds up
        ({"cpu.max": "50000 100000\n"}, 0.5, 1),
        ({"cpu.max": "3200000 100000\n"}, 32.0, 8),  # never more than the affinity mask
        ({"cpu/cpu.cfs_quota_us": "300000\n", "cpu/cpu.cfs_period_us": "100000\n"}, 3.0, 3),
        ({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}, None, 8),
        ({}, None, 8),
    ],
)
def test_usable_cpus_follow_the_cgroup_quota(
    tmp_path: Path, files: dict[str, str], quota: float | None, cpus: int
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert cgroup_cpu_quota(tmp_path) == quota
    assert usable_cpus(tmp_path, affinity=8) == cpus


def test_processes_flag_takes_a_count_or_auto() -> None:
    assert _parse([]).processes == 1
    assert _parse(["--processes", "3"]).processes == 3
    assert _parse([], {"DERENDER_PROCESSES": "4"}).processes == 4
    assert _parse(["--processes", "auto"]).processes == usable_cpus()
    with pytest.raises(SettingsError, match="--processes must be at least 1"):
        _parse(["--processes", "0"])
    # (A bad variable is found as the flags are parsed: a ConfigError, not argparse's
    # usage error, since the command line is not what is wrong.)
    with pytest.raises(ConfigError, match="DERENDER_PROCESSES: invalid value 'many'"):
        _parse([], {"DERENDER_PROCESSES": "many"})


def test_settings_survive_the_trip_through_the_environment() -> None:
    s = _parse(
        [
            "--processes", "2", "--sasl-password", "hunter2", "--security-protocol",
            "SASL_SSL", "--sasl-mechanism", "PLAIN", "--sasl-username", "u",
            "--outage-limit-s", "12.5", "--reset", "earliest",
        ]
    )  # fmt: skip
    env = {k: v for k, v in to_env(s).items() if v is not None}
    assert _parse([], env) == s


def test_a_worker_process_gets_its_settings_by_environment() -> None:
    s = _parse(
        ["--processes", "3", "--redis-url", "redis://:pw@r:6379/0", "--group-instance-id", "pod-a"]
    )
    base = {"PATH": "/bin", "DERENDER_LANES": "7", "DERENDER_SASL_PASSWORD": "stale"}
    env = child_env(s, 2, 45678, base)
    assert env["PATH"] == "/bin"
    assert env["DERENDER_REDIS_URL"] == "redis://:pw@r:6379/0"  # secrets: never in argv
    # The settings win over whatever the environment held (they were read from it).
    assert "DERENDER_SASL_PASSWORD" not in env and env["DERENDER_LANES"] == "2"
    assert env["DERENDER_PROCESSES"] == "1"
    assert env["DERENDER_METRICS_HOST"] == "127.0.0.1"
    assert env["DERENDER_METRICS_PORT"] == "45678"
    assert env["DERENDER_GROUP_INSTANCE_ID"] == "pod-a-2"  # static membership per process
    assert env["DERENDER_PROCESS_INDEX"] == "2"
    child = _parse([], env)
    assert child.processes == 1 and child.redis_url == s.redis_url
    assert Supervisor(s).command == [sys.executable, "-m", "worker", "run"]  # no flags


def test_expositions_merge_with_a_process_label() -> None:
    a, b = Metrics(), Metrics()
    a.records.labels("ok").inc(5)
    b.records.labels("ok").inc(7)
    b.records.labels("dlq").inc(1)
    a.lag.labels("0").set(3)
    b.lag.labels("1").set(4)
    a.latency.observe_many([0.001, 0.002])
    merged = merge_expositions([("0", a.exposition()), ("1", b.exposition())]).decode()
    families = {f.name: f for f in text_string_to_metric_families(merged)}
    alone = [f.name for f in text_string_to_metric_families(a.exposition().decode())]
    assert sorted(families) == sorted(alone)  # each family once
    records = {
        (s.labels["process"], s.labels["result"]): s.value
        for s in families["derender_records"].samples
        if s.name == "derender_records_total"
    }
    assert records[("0", "ok")] == 5 and records[("1", "ok")] == 7 and records[("1", "dlq")] == 1
    lag = {(s.labels["process"], s.labels["partition"]): s.value
           for s in families["derender_consumer_lag"].samples}  # fmt: skip
    assert lag == {("0", "0"): 3.0, ("1", "1"): 4.0}
    counts = {
        s.labels["process"]: s.value
        for s in families["derender_record_latency_seconds"].samples
        if s.name.endswith("_count")
    }
    assert counts == {"0": 2.0, "1": 0.0}
    assert merge_expositions([]) == b""


def test_probes_need_every_process() -> None:
    s = _parse(["--processes", "2"])
    sup = Supervisor(s)

    async def ask() -> tuple[str, bytes]:
        status, _, body = await sup.respond("/readyz")
        return status, body

    status, body = asyncio.run(ask())  # no process started yet
    assert status.startswith("503") and body == b""
    assert asyncio.run(sup.respond("/nope"))[0].startswith("404")


# -- the supervisor's lifecycle, with stand-in worker processes (no broker needed) -------

# A worker process starts with SIGTERM held until its handler is in (stop_signal.install):
# the stand-ins put theirs in as the worker does, then sleep.
_HANDLED = (
    "import signal, sys; signal.signal(signal.SIGTERM, lambda *_: sys.exit(0)); "
    "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM}); "
)
_SLEEPER = _HANDLED + "import time; time.sleep(60)"


def _supervise(
    code_of: list[str], stop_after_s: float | None = None
) -> tuple[int, list[int | None]]:
    """Run a Supervisor whose process i runs `python -c code_of[i]`; stop it after
    `stop_after_s` (None: wait until it ends by itself). → (exit code, children's codes)."""
    s = _parse(["--processes", str(len(code_of)), "--metrics-port", "0"])
    # Process i runs code_of[i], picked by the index the supervisor hands it.
    pick = "import os, sys; exec(sys.argv[1 + int(os.environ['DERENDER_PROCESS_INDEX'])])"
    sup = Supervisor(s, command=[sys.executable, "-c", pick, *code_of])

    async def main() -> int:
        task = asyncio.create_task(sup.run())
        if stop_after_s is not None:
            await asyncio.sleep(stop_after_s)
            sup.stop()
        return await asyncio.wait_for(task, 30)

    code = asyncio.run(main())
    return code, [c.proc.returncode for c in sup.children]


def test_one_process_exiting_stops_the_others_with_its_code() -> None:
    code, codes = _supervise([_SLEEPER, "import sys; sys.exit(3)"])
    assert code == 3
    assert codes[1] == 3 and codes[0] == 0  # the sleeper stopped on the supervisor's SIGTERM


def test_a_stop_ends_every_process_and_exits_0() -> None:
    code, codes = _supervise([_SLEEPER, _SLEEPER], stop_after_s=0.5)
    assert code == 0 and codes == [0, 0]


def test_a_process_starts_with_sigterm_held_until_it_handles_it() -> None:
    # Stopped while it is still "starting" (the first second), it is not killed: the
    # signal waits, and its handler takes it once in place.
    starting = (
        "import signal, sys, time\n"
        "held = signal.SIGTERM in signal.pthread_sigmask(signal.SIG_BLOCK, [])\n"
        "time.sleep(1.0)\n"
        "signal.signal(signal.SIGTERM, lambda *_: sys.exit(0 if held else 5))\n"
        "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})\n"
        "time.sleep(60)\n"
    )
    code, codes = _supervise([starting], stop_after_s=0.3)
    assert code == 0 and codes == [0]


def test_a_process_killed_by_sigterm_fails_the_pod() -> None:
    # The worker never dies by the signal (it is held, then handled): one that does is
    # not a clean stop.
    unhandled = (
        "import signal, time; "
        "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM}); time.sleep(60)"
    )
    code, codes = _supervise([unhandled], stop_after_s=0.5)
    assert code == 1 and codes == [-15]


def test_a_process_killed_by_another_signal_fails_the_pod() -> None:
    code, codes = _supervise(["import os, signal; os.kill(os.getpid(), signal.SIGKILL)"])
    assert code == 1 and codes == [-9]
