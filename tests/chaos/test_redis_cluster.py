"""The state in a real Redis Cluster (3 masters with a replica each, append-only files
fsync'd always, 2 s node timeout) while the cluster is reconfigured under a running
worker (`--redis-mode cluster`): a master SIGKILLed and its replica promoted, slots
resharded between masters while records flow, a master restarted, the one seed node the
worker was given killed after its start. Verified as the other
chaos suites are: every request exact, repeats identical, nothing lost.

What a failover can lose: Redis replicates asynchronously, so a save a master
acknowledged and died with before sending it to its replica is gone from the promoted
replica. The worker then loads an older state: its CAS refuses nothing (the seqs match
what it loaded), and the next record of that request meets a `sequence_gap` (or
`state_missing`). On one machine the window of a plain SIGKILL is the microseconds between
the reply and the replication stream leaving in the same event-loop turn, and the kill
test has not hit it; `test_a_failover_to_a_lagging_replica` makes it happen (a replica
frozen while its master acknowledges saves), shows the loss is only ever failed requests,
never wrong text, and that `--redis-wait-replicas 1` closes it.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from redis.crc import key_slot
from tokenizers import Tokenizer

from tests.adapters.state.redis_cluster_tools import wait_all_named
from tests.chaos.test_redis import Input
from tests.chaos.tools import Tail, describe, per_request, wait_log, wait_until
from tests.integration.harness import (
    Output,
    WorkerProcess,
    choice_text,
    interleave,
    make_generations,
    verify,
)
from tests.support.servers import ClusterNode, LocalRedisCluster
from worker.core.errors import SEQUENCE_GAP, STATE_MISSING

pytestmark = [pytest.mark.chaos, pytest.mark.integration]

CLUSTER = ("--redis-mode", "cluster")


class Flow:
    """Publishes records in slices on a thread, so they keep flowing while a test acts."""

    def __init__(self, source: Input, records: list[dict[str, Any]], slices: int, every_s: float):
        self.source = source
        size = max(1, -(-len(records) // slices))
        self.slices = [records[i : i + size] for i in range(0, len(records), size)]
        self.every_s = every_s
        self.sent = 0
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="flow", daemon=True)

    def _run(self) -> None:
        try:
            for piece in self.slices:
                self.source.send(piece)
                self.sent += 1
                time.sleep(self.every_s)
        except BaseException as e:  # reported by join()
            self.error = e

    def __enter__(self) -> Flow:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.join()

    def join(self) -> None:
        self._thread.join(120)
        if self.error is not None:
            raise AssertionError(f"publishing failed: {self.error!r}")


# More than a loopback socket's buffers hold (a few MB at most).
FILLER_BYTES = 32 << 20


def _key_on(cluster: LocalRedisCluster, master: ClusterNode, name: str) -> str:
    """A key (name{tag}) whose slot `master` serves."""
    mine = {slot for slot, m in cluster.slots().items() if m is master}
    return next(k for i in itertools.count() if key_slot((k := f"{name}{{{i}}}").encode()) in mine)


def holding(w: WorkerProcess) -> None:
    """Wait until the worker holds its partitions: the tests below act while records flow
    through it, and a worker slow to start (a loaded machine) would otherwise meet the
    whole flow at once, after the fault (the flow is only a few seconds long)."""
    wait_log(w, "partitions assigned", 60)


def state_keys(node: ClusterNode, prefix: str) -> int:
    cursor, n = b"0", 0
    while True:
        cursor, keys = node.call("SCAN", cursor, "MATCH", f"{prefix}{{*", "COUNT", 1000)
        n += len(keys)
        if cursor == b"0":
            return n


@pytest.fixture
def cluster(restartable_redis_cluster: LocalRedisCluster) -> Iterator[LocalRedisCluster]:
    yield restartable_redis_cluster


@pytest.mark.parametrize("wait", [False, True])
def test_a_master_killed_mid_run_fails_over_to_its_replica(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    cluster: LocalRedisCluster,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
    wait: bool,
) -> None:
    """SIGKILL of a master while records flow; its replica is promoted after the node
    timeout, the worker backs off meanwhile (connection refused, CLUSTERDOWN) and goes on
    with the new master. With `--redis-wait-replicas 1` no acknowledged save can be lost
    with the master; saves on the promoted master (which has no replica left) then wait
    until the old master is back as its replica, so it is restarted at once."""
    gens = make_generations(deepseek, 240, seed=1701, prefix="fo")
    records = interleave(gens, seed=1702)
    source = Input(kafka_bootstrap, topics["input"])
    flags = [*CLUSTER, *(("--redis-wait-replicas", "1") if wait else ())]
    w = worker_factory(*flags, redis=cluster.url)
    holding(w)
    victim = cluster.masters()[0]
    (replica,) = cluster.replicas_of(victim)
    with Tail(kafka_bootstrap, topics["output"]) as tail, Flow(source, records, 12, 0.4) as flow:
        # Mid-run: some requests answered, the victim holding states of requests in flight.
        tail.wait(lambda o: len(o) > 300, 60, "the first outputs")
        wait_until(lambda: state_keys(victim, w.state_prefix) > 20, 30, "states on the victim")
        victim.kill()
        cluster.wait_promoted(replica)
        assert w.alive, w.log_tail()
        if wait:
            victim.start()
        flow.join()
        outputs = tail.wait_done([g.request_id for g in gens], 120)
        wait_until(lambda: source.all_committed(w), 60, "everything to be committed")
    verify(outputs, gens)
    log = w.log_text()
    assert "processing a batch failed, retrying" in log  # it did see the master go
    assert "recovered after" in log
    # The old master comes back as a replica of the new one.
    if not wait:
        victim.start()
    wait_until(lambda: victim.role() == "slave", 30, "the old master to rejoin as a replica")
    assert w.stop() == 0, w.log_tail()


def test_the_one_seed_node_dies_before_the_first_batch(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    cluster: LocalRedisCluster,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    """The worker is given ONE seed node, a master, which is SIGKILLed after the worker
    started and before any record came: the worker read the topology at start, so every
    node is a seed, and it finds the promoted replica and the other masters. (When the
    topology was learnt at the first batch, the worker knew only the dead seed: an outage
    until --outage-limit-s, though the cluster failed over in about 2 s.) The seed stays
    dead to the end."""
    gens = make_generations(deepseek, 80, seed=1741, prefix="seed")
    records = interleave(gens, seed=1742)
    source = Input(kafka_bootstrap, topics["input"])
    seed = cluster.masters()[0]
    (replica,) = cluster.replicas_of(seed)
    # (A replica shows in CLUSTER SLOTS once the gossip has it there.)
    wait_all_named(seed, len(cluster.nodes))
    w = worker_factory(*CLUSTER, redis=f"redis://{seed.addr}")
    wait_until(lambda: "Redis Cluster: 3 masters, 6 nodes known" in w.log_text(), 60, "the start")
    seed.kill()
    cluster.wait_promoted(replica)
    with Tail(kafka_bootstrap, topics["output"]) as tail:
        source.send(records)
        outputs = tail.wait_done([g.request_id for g in gens], 120)
        wait_until(lambda: source.all_committed(w), 60, "everything to be committed")
    verify(outputs, gens)
    assert w.alive and not seed.running, w.log_tail()
    assert "giving up" not in w.log_text()
    assert w.stop() == 0, w.log_tail()


def test_live_resharding_while_records_flow(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    cluster: LocalRedisCluster,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
) -> None:
    """Slots move from one master to another (IMPORTING/MIGRATING, MIGRATE of their
    keys, SETSLOT NODE) while the worker loads and saves: it gets ASK for keys already
    moved, TRYAGAIN for calls spanning both sides, MOVED once a slot is done."""
    gens = make_generations(deepseek, 240, seed=1711, prefix="rs")
    records = interleave(gens, seed=1712)
    source = Input(kafka_bootstrap, topics["input"])
    w = worker_factory(*CLUSTER, redis=cluster.url)
    holding(w)
    first, second, _ = cluster.masters()
    slots = cluster.slots()
    mine = [s for s, m in sorted(slots.items()) if m is first]
    moved: list[int] = []
    with Tail(kafka_bootstrap, topics["output"]) as tail, Flow(source, records, 12, 0.5) as flow:
        tail.wait(lambda o: len(o) > 200, 60, "the first outputs")
        during = [flow.sent]
        # Half of the first master's slots to the second, one slot at a time, with a
        # pause between key batches so that migrations overlap many batches.
        moved.append(cluster.move_slots(mine[: len(mine) // 2], first, second, 20))
        # ... and some back, while the flow continues.
        moved.append(cluster.move_slots(mine[: len(mine) // 8], second, first, 20))
        during.append(flow.sent)
        done_while_moving = len(tail.snapshot())
        flow.join()
        outputs = tail.wait_done([g.request_id for g in gens], 120)
        wait_until(lambda: source.all_committed(w), 60, "everything to be committed")
    verify(outputs, gens)
    assert moved[0] > 0, "no state key was migrated: the resharding missed the flow"
    # Records were published, and outputs produced, while the slots moved.
    assert during[0] < len(flow.slices) and during[1] > during[0], during
    print(f"resharding: keys moved {moved}, slices sent {during}, outputs {done_while_moving}")
    now = cluster.slots()
    assert all(now[s] is second for s in mine[len(mine) // 8 : len(mine) // 2])
    assert all(now[s] is first for s in mine[: len(mine) // 8])
    assert w.stop() == 0, w.log_tail()


@pytest.mark.parametrize("down_s", [0.0, 5.0])
def test_a_master_restarted_mid_run(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    cluster: LocalRedisCluster,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
    down_s: float,
) -> None:
    """A whole node restarted (SIGTERM, then started on its port and folder): back within
    the node timeout it is still the master, with every key from its append-only file;
    down longer (5 s), its replica takes over and it rejoins as a replica."""
    gens = make_generations(deepseek, 200, seed=1721, prefix="rn")
    records = interleave(gens, seed=1722)
    source = Input(kafka_bootstrap, topics["input"])
    w = worker_factory(*CLUSTER, redis=cluster.url)
    holding(w)
    node = cluster.masters()[1]
    (replica,) = cluster.replicas_of(node)
    with Tail(kafka_bootstrap, topics["output"]) as tail, Flow(source, records, 10, 0.4) as flow:
        tail.wait(lambda o: len(o) > 200, 60, "the first outputs")
        wait_until(lambda: state_keys(node, w.state_prefix) > 20, 30, "states on the node")
        node.restart(down_s)
        if down_s > 0:
            cluster.wait_promoted(replica)
            wait_until(lambda: node.role() == "slave", 30, "the node to rejoin as a replica")
        else:
            assert node.role() == "master"
        flow.join()
        outputs = tail.wait_done([g.request_id for g in gens], 120)
        wait_until(lambda: source.all_committed(w), 60, "everything to be committed")
    verify(outputs, gens)
    assert w.stop() == 0, w.log_tail()


def _first_deliveries(outputs: list[Output]) -> tuple[list[Output], dict[str, list[str]]]:
    """Each (request, seq, part)'s first output, and per request the codes of the later
    outputs that differ from it under the same triple — each must be a `sequence_gap` /
    `state_missing` error (a redelivery against an older state). The first delivery is
    what a client saw first, so its text is what must never be wrong; the records after
    a redone one may keep their first-delivery chunks (the failed request ignores them on
    the redo), so dropping the replaced chunk instead would leave a hole in the text."""
    first: dict[tuple[str, str, str], Output] = {}
    redone: dict[str, list[str]] = defaultdict(list)
    for o in outputs:
        h = o.headers
        triple = (h["derender-request-id"], h["derender-seq"], h["derender-part"])
        seen = first.get(triple)
        if seen is None:
            first[triple] = o
        elif seen.value != o.value:
            code = json.loads(o.value).get("error", {}).get("code") if o.value[:1] == b"{" else None
            assert code in (SEQUENCE_GAP, STATE_MISSING), f"{triple}: two different outputs"
            redone[triple[0]].append(code)
    return list(first.values()), redone


@pytest.mark.parametrize("wait", [False, True])
def test_a_failover_to_a_lagging_replica(
    deepseek: Tokenizer,
    kafka_bootstrap: str,
    cluster: LocalRedisCluster,
    topics: dict[str, str],
    worker_factory: Callable[..., WorkerProcess],
    wait: bool,
) -> None:
    """The loss asynchronous replication allows, made to happen: a replica frozen
    (SIGSTOP) while its master goes on acknowledging saves, the master SIGKILLed, the
    replica thawed and promoted (CLUSTER FAILOVER TAKEOVER) without the last saves.

    Without `--redis-wait-replicas`, requests whose saves were lost fail at their next
    record (`sequence_gap`, or `state_missing` for one whose first save was lost): never
    wrong text, and every other request exact. With `--redis-wait-replicas 1` no save is
    acknowledged while the replica is frozen (the worker retries them as an outage), so
    the promoted replica has every acknowledged save and every request is exact."""
    gens = make_generations(deepseek, 200, seed=1731, prefix="lag")
    records = interleave(gens, seed=1732)
    source = Input(kafka_bootstrap, topics["input"])
    flags = [*CLUSTER, *(("--redis-wait-replicas", "1") if wait else ())]
    w = worker_factory(*flags, redis=cluster.url)
    holding(w)
    victim = cluster.masters()[0]
    (replica,) = cluster.replicas_of(victim)
    assert replica.pid is not None
    # Three parts, each spanning most requests: before the freeze, during it (saved on
    # the master only), and after the failover (their records meet what was lost). Paced
    # by what the worker did, not by the clock: a loaded machine once let a timed flow
    # finish before the freeze, and nothing was lost.
    third = len(records) // 3
    parts = [records[:third], records[third : 2 * third], records[2 * third :]]
    with Tail(kafka_bootstrap, topics["output"]) as tail:
        source.send(parts[0])
        tail.wait(lambda o: len(o) > 200, 60, "the first outputs")
        os.kill(replica.pid, signal.SIGSTOP)
        try:
            seen = len(tail.snapshot())
            # A frozen replica still receives what fits in its socket buffer, and applies
            # it when thawed: a filler first, so that the saves wait in the master's
            # output buffer and die with it. With WAIT too: that is what once showed a
            # retry committing on states its replica never had (test_replicated_saves).
            victim.call("SET", _key_on(cluster, victim, "filler"), b"x" * FILLER_BYTES)
            source.send(parts[1])  # saves go on to the master, not to its replica
            if wait:
                # A batch's outputs go out, its save is applied on the master and never
                # acknowledged: the partition stalls there (a retry writes the same
                # states back and waits again) until the replica answers.
                tail.wait(lambda o: len(o) > seen, 60, "outputs while the replica is frozen")
                wait_log(w, "NotReplicated", 60)
            else:
                tail.wait(lambda o: len(o) > seen + 200, 60, "outputs while the replica is frozen")
            time.sleep(0.5)  # (a batch saves after its outputs are acknowledged)
        finally:
            victim.kill()
            os.kill(replica.pid, signal.SIGCONT)
        replica.call("CLUSTER", "FAILOVER", "TAKEOVER")
        cluster.wait_promoted(replica)
        # The old master back, as the new one's replica (with WAIT, saves on the new
        # master need it).
        victim.start()
        source.send(parts[2])
        outputs = tail.wait_done([g.request_id for g in gens], 120)
        wait_until(lambda: source.all_committed(w), 60, "everything to be committed")
    if wait:
        verify(outputs, gens)
    else:
        # A batch whose outputs were acked and whose save was lost with the master is
        # redone against the older state: its record then meets a gap and gets an error
        # where its first delivery had a chunk — the one way a triple can carry two
        # outputs, and only as that error.
        outputs, redone = _first_deliveries(outputs)
        got = per_request(outputs)
        failed = []
        for g in gens:
            items = got[g.request_id]
            codes = [k for _, _, k in describe(items) if k not in ("chunk", "done")]
            codes += redone.get(g.request_id, [])
            text = "".join(
                choice_text(c)
                for _, _, kind, v in items
                if kind == "chunk"
                for c in json.loads(v)["choices"]
            )
            if codes:
                assert set(codes) <= {SEQUENCE_GAP, STATE_MISSING}, (g.request_id, codes)
                assert g.expected.startswith(text), g.request_id  # never wrong text
                failed.append(g.request_id)
            else:
                assert text == g.expected, g.request_id
        exact = [g for g in gens if g.request_id not in failed]
        verify(outputs, exact)
        print(f"lagging replica: {len(failed)} of {len(gens)} requests lost a save")
        assert failed, "no save was lost: the replica did not lag"
    assert w.stop() == 0, w.log_tail()
