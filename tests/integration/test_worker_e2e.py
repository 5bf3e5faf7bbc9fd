"""`derender-worker run` end to end against the real broker and the real redis-server."""

from __future__ import annotations

import asyncio
import json
import urllib.request
from collections.abc import Callable

import pytest
from tokenizers import Tokenizer

from tests.integration.harness import (
    Output,
    WorkerProcess,
    done_count,
    interleave,
    make_generations,
    publish,
    read_all,
    verify,
)
from tests.support.servers import free_port

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("kafka_client")]


# Lanes 1: one batch at a time (on asyncio's own loop); 2: two partitions a lane; 5: more
# lanes than the 4 input partitions (one lane idles).
@pytest.mark.parametrize(("lanes", "loop"), [(1, "asyncio"), (2, "auto"), (5, "auto")])
def test_hundreds_of_interleaved_requests_are_exact(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
    lanes: int,
    loop: str,
) -> None:
    gens = make_generations(deepseek, 300, seed=1)
    worker = worker_factory("--lanes", str(lanes), "--event-loop", loop)
    asyncio.run(publish(kafka_bootstrap, topics["input"], interleave(gens, seed=2)))
    outputs = asyncio.run(
        read_all(kafka_bootstrap, topics["output"], lambda o: done_count(o) >= len(gens))
    )
    verdict = verify(outputs, gens)
    assert verdict.repeats == 0  # no crash, no duplicates
    assert worker.stop() == 0
    assert "stopped after" in worker.log_tail()


def test_bad_records_go_to_the_dlq_and_good_ones_are_answered(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    gens = make_generations(deepseek, 20, seed=3)
    records: list[dict[str, object] | tuple[str, bytes]] = list(interleave(gens, seed=4))
    bad = [
        ("x-1", b"not json at all"),
        ("x-2", json.dumps({"request_id": "x-2", "seq": "zero"}).encode()),
        ("other-key", json.dumps({"request_id": "x-3", "seq": 0}).encode()),
    ]
    for i, b in enumerate(bad):
        records.insert(5 + 7 * i, b)
    worker_factory()
    asyncio.run(publish(kafka_bootstrap, topics["input"], records))

    def errors_of(outputs: list[Output]) -> dict[str, str]:
        return {
            o.key: json.loads(o.value)["error"]["code"] for o in outputs if b'"error"' in o.value
        }

    # Until every answer and both errors are read: the errors' partition (x-3's holds two
    # requests) may be fetched last, after the last [DONE] of the others.
    outputs = asyncio.run(
        read_all(
            kafka_bootstrap,
            topics["output"],
            lambda o: done_count(o) >= len(gens) and len(errors_of(o)) >= 2,
        )
    )
    verify(outputs, gens)
    assert errors_of(outputs) == {"x-2": "invalid_record", "x-3": "invalid_record"}
    dlq = asyncio.run(read_all(kafka_bootstrap, topics["dlq"], lambda o: len(o) >= 3, 30))
    assert sorted(o.value for o in dlq) == sorted(v for _, v in bad)
    for o in dlq:
        assert o.headers["derender-error"]
        assert o.headers["derender-source"].startswith(topics["input"] + "/")


def test_metrics_health_and_check(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    import subprocess
    import sys
    import time

    port = free_port()
    gens = make_generations(deepseek, 10, seed=5)
    worker_factory(metrics_port=port)
    asyncio.run(publish(kafka_bootstrap, topics["input"], interleave(gens, seed=6)))
    asyncio.run(read_all(kafka_bootstrap, topics["output"], lambda o: done_count(o) >= 10))
    # A batch is counted once it is committed, after its outputs are readable: wait for
    # the counts themselves (every series exists from the start, the lag gauges at 0, so
    # their presence says nothing), and for a lag sample (a per-partition series).
    ok = sum(len(g.records) for g in gens)
    expected = [
        f'derender_records_total{{result="ok"}} {float(ok)}',
        f'derender_outputs_total{{kind="done"}} {10.0}',
        'derender_consumer_lag{partition="',
        "derender_consumer_lag_sum 0.0",
    ]
    deadline = time.monotonic() + 30
    body = ""
    while time.monotonic() < deadline:
        body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
        if all(line in body for line in expected):
            break
        time.sleep(0.5)
    for line in expected:
        assert line in body, (line, body)
    assert 'derender_stage_seconds_count{stage="redis_load"}' in body
    for args in (["--metrics-port", str(port)], ["--metrics-port", str(port), "--ready"]):
        res = subprocess.run([sys.executable, "-m", "worker", "check", *args], check=False)
        assert res.returncode == 0
    res = subprocess.run(
        [sys.executable, "-m", "worker", "check", "--metrics-port", str(free_port())],
        check=False,
        capture_output=True,
    )
    assert res.returncode == 1


def test_an_output_over_the_output_bound_fails_its_request_and_the_rest_is_committed(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    """`--max-output-bytes`: a whole response larger than the bound is an `error` output
    for that request only; every other request, before and after it in its partition,
    is answered exactly (the partition moves on)."""
    worker = worker_factory("--max-output-bytes", "2000")
    err = _with_one_big_response(deepseek, kafka_bootstrap, topics, 200, seed=7)
    assert err.headers["derender-kind"] == "error"
    body = json.loads(err.value)["error"]
    assert body["code"] == "invalid_request_error" and "max_output_bytes = 2000" in body["message"]
    assert worker.stop() == 0


def test_an_output_the_broker_refuses_fails_its_request_and_the_partition_moves_on(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    """A real broker enforcing the output topic's `max.message.bytes` (12,000 here, under
    the worker's own 1,000,000 bound): the whole response it refuses becomes an `error`
    output in its place, and every other request is answered exactly — no retry loop,
    no blocked partition. (tansu enforces no size: only brokers that do are tested.)"""
    from aiokafka.admin import AIOKafkaAdminClient
    from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

    from tests.support.server_fixtures import TANSU, kafka_plan

    if kafka_plan().kind == TANSU:
        pytest.skip("tansu does not enforce max.message.bytes")

    async def limit_output_topic() -> None:
        admin = AIOKafkaAdminClient(bootstrap_servers=kafka_bootstrap)
        await admin.start()
        try:
            resource = ConfigResource(
                ConfigResourceType.TOPIC, topics["output"], {"max.message.bytes": "12000"}
            )
            await admin.alter_configs([resource])
        finally:
            await admin.close()

    asyncio.run(limit_output_topic())
    worker = worker_factory()
    err = _with_one_big_response(deepseek, kafka_bootstrap, topics, 2000, seed=9)
    assert err.headers["derender-kind"] == "error"
    assert err.headers["derender-seq"] == "0" and err.headers["derender-part"] == "0"
    assert "refused by the broker" in json.loads(err.value)["error"]["message"]
    assert worker.stop() == 0
    assert "refused by the broker" in worker.log_tail()
    # Its batches were kept to the topic's limit: a refused batch held the big response
    # alone, so no other request's outputs were sent again out of their order.
    assert "record batches are kept to 12000 bytes" in worker.log_text()


def _with_one_big_response(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    repeats: int,
    seed: int,
) -> Output:
    """20 streamed requests with one whole response ("big", `repeats` × a phrase) among
    them, through the running worker: checks every streamed request is exact and
    returns big's only output."""
    gens = make_generations(deepseek, 20, seed=seed)
    ids = deepseek.encode("a long whole answer " * repeats, add_special_tokens=False).ids
    whole = {
        "request_id": "big",
        "seq": 0,
        "type": "response",
        "generate_response": {
            "choices": [{"index": 0, "token_ids": ids, "finish_reason": "length"}]
        },
    }
    records: list[dict[str, object] | tuple[str, bytes]] = list(interleave(gens, seed=seed + 1))
    records.insert(3, whole)
    asyncio.run(publish(kafka_bootstrap, topics["input"], records))
    outputs = asyncio.run(
        read_all(
            kafka_bootstrap,
            topics["output"],
            lambda o: done_count(o) >= len(gens) and any(x.key == "big" for x in o),
        )
    )
    verify([o for o in outputs if o.key != "big"], gens)
    (big,) = [o for o in outputs if o.key == "big"]
    return big


def test_a_stop_right_after_the_last_output_still_commits_every_offset(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    """Commits run in the background (checkpoint.Behind): SIGTERM as the last [DONE] is
    read — its batch's commit still in flight — and the stop waits for them, so the group
    has committed every input record (no redelivery for the next owner)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from tests.chaos.launch import ENV
    from tests.chaos.tools import LAUNCHER, group_offsets

    gens = make_generations(deepseek, 40, seed=11)
    # Every commit takes 1.5 s to go out (tests/chaos/launch.py): the last ones are in
    # flight when the stop arrives.
    env = {ENV: json.dumps({"delay_commit_s": 1.5})}
    worker = worker_factory("--lanes", "2", module=LAUNCHER, env=env)
    asyncio.run(publish(kafka_bootstrap, topics["input"], interleave(gens, seed=12)))
    asyncio.run(read_all(kafka_bootstrap, topics["output"], lambda o: done_count(o) >= len(gens)))
    assert worker.stop() == 0

    async def ends() -> dict[int, int]:
        consumer = AIOKafkaConsumer(bootstrap_servers=kafka_bootstrap)
        await consumer.start()
        try:
            tps = [TopicPartition(topics["input"], p) for p in range(4)]
            return {tp.partition: o for tp, o in (await consumer.end_offsets(tps)).items()}
        finally:
            await consumer.stop()

    assert group_offsets(kafka_bootstrap, worker.group_id, topics["input"], 4) == asyncio.run(
        ends()
    )
