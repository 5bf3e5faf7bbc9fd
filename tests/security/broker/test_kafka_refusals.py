"""Every wrong or missing piece of a Kafka login is a configuration error at start: exit 2
within seconds of connecting (the outage limit here is five minutes, so a retry loop could
not pass), one log line naming what to fix, quoted here word for word as docs/operate/security.md
quotes it. A right revoked while the worker runs is named the same way."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from tokenizers import Tokenizer

from tests.integration.harness import ROOT, WorkerProcess, make_generations
from tests.security.broker.kafka_fixtures import (
    GROUP,
    LITERAL,
    READ,
    TOPIC,
    WORKER_PASSWORD,
    WRITE,
    Acl,
    SecuredBroker,
    Topics,
    run,
    secured_kafka,  # noqa: F401 (the fixture)
)
from worker.run.runner import CLOSE_TIMEOUT_S

pytestmark = pytest.mark.integration

# From the worker's last line before it connects (the settings) to its refusal: the
# refusal itself, without Python's start and the tokenizer's load, which on a loaded
# machine take longer than this. The outage limit below is far past it.
FAST_S = 5.0
# How long a worker process may take in all (many start side by side).
EXIT_TIMEOUT_S = 90.0
OUTAGE_LIMIT = ["--outage-limit-s", "300"]
WRONG_PASSWORD = f"wrong-{uuid.uuid4().hex}"


def _stamp(line: str) -> float:
    """The time of a text log line (`2026-01-02 03:04:05,678 LEVEL …`)."""
    return dt.datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


@dataclass
class Exit:
    code: int
    stderr: str

    def line(self, prefix: str) -> str:
        """The one line that carries `prefix`, from its start on."""
        found = [ln[ln.index(prefix) :] for ln in self.stderr.splitlines() if prefix in ln]
        assert len(found) == 1, self.stderr
        return found[0]

    @property
    def seconds(self) -> float:
        """From the settings line (the last before connecting) to the refusal."""
        lines = self.stderr.splitlines()
        began = next(_stamp(ln) for ln in lines if " settings: " in ln)
        return next(_stamp(ln) for ln in lines if "cannot run: " in ln) - began


def worker_argv(bootstrap: str, topics: Topics, flags: list[str], redis_url: str) -> list[str]:
    return [
        sys.executable, "-m", "worker", "run", "--bootstrap-servers", bootstrap,
        "--redis-url", redis_url, "--state-prefix", f"sec-{topics.group}:",
        "--metrics-port", "0", *topics.flags(), *OUTAGE_LIMIT, *flags,
    ]  # fmt: skip


@dataclass
class Case:
    """One misconfigured worker: where it connects, its topics and flags, its password."""

    bootstrap: str
    topics: Topics
    flags: list[str]
    password: str | None = WORKER_PASSWORD


def _cases(b: SecuredBroker) -> dict[str, Case]:
    """Every refusal: the worker's topics get every right it needs, but one, or none."""

    def topics(drop: Callable[[Topics], Acl] | None = None) -> Topics:
        t: Topics = run(b.fresh())
        acls = [a for a in t.worker_acls() if drop is None or a != drop(t)]
        assert len(acls) == len(t.worker_acls()) - (drop is not None)
        run(b.grant(acls))
        return t

    sasl = b.sasl_flags()
    granted = topics()
    missing = f"{granted.dlq}-gone"
    run(b.grant([(TOPIC, missing, LITERAL, WRITE)]))
    return {
        "password": Case(b.sasl, granted, b.sasl_flags("SCRAM-SHA-512"), WRONG_PASSWORD),
        "mechanism": Case(b.sasl, granted, b.sasl_flags("SCRAM-SHA-1")),
        "untrusted": Case(b.bad("UNTRUSTED"), granted, sasl),
        "wronghost": Case(f"localhost:{b.kafka.port_of('WRONGHOST')}", granted, sasl),
        "no-client-cert": Case(
            b.mtls, granted, ["--security-protocol", "SSL", "--ssl-cafile", str(b.pki.ca)], None
        ),
        "plaintext": Case(b.sasl, granted, [], None),
        "tls-to-plaintext": Case(b.kafka.bootstrap, granted, sasl),
        "not-enabled": Case(b.bad("SCRAMONLY"), granted, b.sasl_flags("PLAIN")),
        "input": Case(b.sasl, topics(lambda t: (TOPIC, t.input, LITERAL, READ)), sasl),
        "output": Case(b.sasl, topics(lambda t: (TOPIC, t.output, LITERAL, WRITE)), sasl),
        "dlq": Case(b.sasl, topics(lambda t: (TOPIC, t.dlq, LITERAL, WRITE)), sasl),
        "group": Case(b.sasl, topics(lambda t: (GROUP, t.group, LITERAL, READ)), sasl),
        "txn": Case(b.sasl, topics(), [*sasl, "--guarantee", "exactly-once"]),
        "missing": Case(b.sasl, granted, [*sasl, "--dlq-topic", missing]),
    }


@pytest.fixture(scope="module")
def exits(
    secured_kafka: SecuredBroker,  # noqa: F811
    redis_url: str,
) -> dict[str, tuple[Case, Exit]]:
    """Every case's worker, all started at once (each is mostly Python's start and the
    tokenizer's load: side by side they take the time of a few, not of all)."""
    cases = _cases(secured_kafka)
    procs = {}
    for name, case in cases.items():
        env = {"DERENDER_SASL_PASSWORD": case.password} if case.password is not None else {}
        procs[name] = subprocess.Popen(
            worker_argv(case.bootstrap, case.topics, case.flags, redis_url),
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    out = {}
    try:
        for name, proc in procs.items():
            _, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
            out[name] = (cases[name], Exit(proc.returncode, err.decode()))
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return out


def refused(exit_: Exit, message: str) -> None:
    assert exit_.code == 2, exit_.stderr
    assert exit_.seconds < FAST_S, exit_.stderr
    assert exit_.line("cannot run: ") == "cannot run: " + message


def _acl_line(operation: str, kind: str, flag: str, name: str) -> str:
    return (
        f"Kafka ACL missing: User:worker may not {operation.upper()} {kind} '{name}' "
        f"(kafka-acls --add --allow-principal User:worker --operation {operation} "
        f"{flag} {name})"
    )


Exits = dict[str, tuple[Case, Exit]]


def test_a_wrong_sasl_password(exits: Exits) -> None:
    case, done = exits["password"]
    refused(
        done,
        f"the broker at {case.bootstrap} refused the SASL login of 'worker' (SCRAM-SHA-512): "
        "check --sasl-username and --sasl-password",
    )
    assert WRONG_PASSWORD not in done.stderr  # (nor the right one, anywhere: test_secrets)


def test_an_unknown_sasl_mechanism(exits: Exits) -> None:
    _, done = exits["mechanism"]  # (found before anything connects, or is even logged)
    assert done.code == 2, done.stderr
    assert done.stderr.strip() == (
        "derender-worker run: --sasl-mechanism: unknown mechanism 'SCRAM-SHA-1' (expected PLAIN, "
        "SCRAM-SHA-256, SCRAM-SHA-512)"
    )


def test_an_untrusted_broker_certificate(exits: Exits, secured_kafka: SecuredBroker) -> None:  # noqa: F811
    case, done = exits["untrusted"]
    refused(
        done,
        f"the broker's TLS certificate at {case.bootstrap} is not signed by a CA in "
        f"{secured_kafka.pki.ca} (unable to get local issuer certificate): set --ssl-cafile "
        "to the CA that signed it",
    )


def test_a_broker_certificate_for_another_name(exits: Exits) -> None:
    case, done = exits["wronghost"]
    refused(
        done,
        f"the broker's TLS certificate at {case.bootstrap} is not for that name (Hostname "
        "mismatch, certificate is not valid for 'localhost'.): list the brokers in "
        "--bootstrap-servers by a name their certificates carry",
    )


def test_no_client_certificate_for_mutual_tls(exits: Exits) -> None:
    case, done = exits["no-client-cert"]
    refused(
        done,
        f"the broker at {case.bootstrap} refused the TLS handshake for want of a client "
        "certificate it trusts (SSLV3_ALERT_BAD_CERTIFICATE): set --ssl-certfile and "
        "--ssl-keyfile to one its CA signed",
    )


def test_a_mechanism_the_broker_does_not_enable(exits: Exits) -> None:
    case, done = exits["not-enabled"]
    refused(
        done,
        f"the broker at {case.bootstrap} does not enable SASL mechanism PLAIN: set "
        "--sasl-mechanism to one it does",
    )


def test_plaintext_to_a_tls_listener(exits: Exits) -> None:
    case, done = exits["plaintext"]
    refused(
        done,
        f"the broker at {case.bootstrap} speaks TLS: set --security-protocol SSL or SASL_SSL "
        "(and --ssl-cafile)",
    )


def test_tls_to_a_plaintext_listener(exits: Exits) -> None:
    """The broker resets the handshake, as a restarting one may; asked in plaintext, it
    answers: a misconfiguration, not an outage."""
    case, done = exits["tls-to-plaintext"]
    refused(
        done,
        f"the broker at {case.bootstrap} speaks plaintext Kafka, not TLS: set "
        "--security-protocol PLAINTEXT or SASL_PLAINTEXT",
    )


def test_no_read_on_the_input_topic(exits: Exits) -> None:
    case, done = exits["input"]
    refused(done, _acl_line("Read", "topic", "--topic", case.topics.input))


def test_no_write_on_the_output_topic(exits: Exits) -> None:
    case, done = exits["output"]
    refused(done, _acl_line("Write", "topic", "--topic", case.topics.output))


def test_no_write_on_the_dead_letter_topic(exits: Exits) -> None:
    case, done = exits["dlq"]
    refused(done, _acl_line("Write", "topic", "--topic", case.topics.dlq))


def test_no_read_on_the_group(exits: Exits) -> None:
    case, done = exits["group"]
    refused(done, _acl_line("Read", "group", "--group", case.topics.group))


def test_no_write_on_the_transactional_ids_under_exactly_once(exits: Exits) -> None:
    case, done = exits["txn"]
    ids = f"derender-{case.topics.group}-{case.topics.input}-"
    refused(
        done,
        f"Kafka ACL missing: User:worker may not WRITE transactional id '{ids}*' (kafka-acls "
        "--add --allow-principal User:worker --operation Write --transactional-id "
        f"{ids} --resource-pattern-type prefixed)",
    )


def test_a_topic_that_does_not_exist(exits: Exits) -> None:
    """(Kafka says a topic is missing only to a principal that may see it: the others
    hear that they may not, as for a topic that exists.)"""
    case, done = exits["missing"]
    refused(
        done,
        f"topic(s) {case.flags[-1]} do not exist on {case.bootstrap} (create them, or point "
        "--input-topic/--output-topic/--dlq-topic/--control-topic elsewhere)",
    )


@pytest.fixture
def granted(secured_kafka: SecuredBroker) -> Topics:  # noqa: F811
    """Fresh topics and group, with every right the worker needs."""
    topics: Topics = run(secured_kafka.fresh())
    run(secured_kafka.grant(topics.worker_acls()))
    return topics


@pytest.mark.parametrize("right", ["read-input", "write-output", "read-group"])
def test_a_right_revoked_while_running_is_named(
    right: str,
    secured_kafka: SecuredBroker,  # noqa: F811
    granted: Topics,
    redis_url: str,
    deepseek: Tokenizer,
    tmp_path: Path,
) -> None:
    """READ on the input is refused at the next fetch; WRITE on the output at the next
    batch's produce, READ on the group at its commit or the next heartbeat (a request is
    published after the revocation)."""
    b = secured_kafka
    worker = WorkerProcess(
        b.sasl, redis_url, granted.input, granted.output, granted.dlq, granted.group,
        f"sec-{granted.group}:", extra=[*b.sasl_flags(), *OUTAGE_LIMIT],
        env={"DERENDER_SASL_PASSWORD": WORKER_PASSWORD}, log_path=tmp_path / "w.log",
    ).start()  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while "partitions assigned" not in worker.log_text():
            assert worker.alive and time.monotonic() < deadline, worker.log_tail()
            time.sleep(0.1)
        if right == "read-input":
            run(b.revoke([(TOPIC, granted.input, LITERAL, READ)]))
            expected = _acl_line("Read", "topic", "--topic", granted.input)
        elif right == "write-output":
            run(b.revoke([(TOPIC, granted.output, LITERAL, WRITE)]))
            gen = make_generations(deepseek, 1, seed=3, prefix="revoked")[0]
            run(b.publish(granted.input, gen.records))
            expected = _acl_line("Write", "topic", "--topic", granted.output)
        else:
            run(b.revoke([(GROUP, granted.group, LITERAL, READ)]))
            gen = make_generations(deepseek, 1, seed=4, prefix="revoked")[0]
            run(b.publish(granted.input, gen.records))
            expected = _acl_line("Read", "group", "--group", granted.group)
        revoked = time.monotonic()
        assert worker.proc is not None
        # The refusal is reported (its line logged) within FAST_S; the process then closes
        # its clients, each within the runner's CLOSE_TIMEOUT_S: aiokafka's consumer close
        # awaits its group coordination task, which right after a join can be inside a
        # JoinGroup of its own, and then takes the whole bound (seen once in .ci/run: the
        # line 0.1 s after the revocation, "closing the consumer took longer than 5s").
        while "cannot run: " not in worker.log_text() and worker.alive:
            assert time.monotonic() - revoked < FAST_S, worker.log_tail()
            time.sleep(0.02)
        assert time.monotonic() - revoked < FAST_S, worker.log_tail()
        code = worker.proc.wait(timeout=EXIT_TIMEOUT_S)
        assert code == 2, worker.log_tail()
        assert time.monotonic() - revoked < FAST_S + CLOSE_TIMEOUT_S + 1.0, worker.log_tail()
        assert Exit(code, worker.log_text()).line("cannot run: ") == "cannot run: " + expected
    finally:
        if worker.alive:
            worker.stop()


def test_publish_and_tail_name_a_refused_login(
    secured_kafka: SecuredBroker,  # noqa: F811
) -> None:
    b = secured_kafka
    env = {**os.environ, "DERENDER_SASL_PASSWORD": WRONG_PASSWORD}
    tools = {
        "publish": ["publish", os.devnull, "--topic", "any"],
        "tail": ["tail", "--topic", "any"],
    }
    procs = {}
    for name, args in tools.items():
        argv = [sys.executable, "-m", "worker", *args, "--bootstrap-servers", b.sasl]
        procs[name] = subprocess.Popen(
            [*argv, *b.sasl_flags()],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=EXIT_TIMEOUT_S)
        assert proc.returncode == 2, f"{name}: {err}"
        assert err.strip() == (
            f"derender-worker {name}: the broker at {b.sasl} refused the SASL login of 'worker' "
            "(SCRAM-SHA-512): check --sasl-username and --sasl-password"
        ), name
        assert WRONG_PASSWORD not in out + err
