"""A replicated Apache Kafka cluster as local processes: N `ApacheKafka` nodes, each one JVM
that is both a broker and a voter of the KRaft controller quorum, on free ports of
127.0.0.1, formatted with one cluster id.

What it is for: a single node cannot keep exactly-once across its own restart (its
partitions have no leader for a moment, and the transaction marker sender skips the markers
of leaderless partitions), whereas in a cluster one member can die and come back while its
partitions' leadership moves to live replicas. `node(node_id)` is that member, with
ApacheKafka's kill / start / restart / pause.

The replication settings are a cluster's (internal topics on min(N, 3) replicas, two
in-sync replicas required from three nodes on, new topics on N); everything else is the
single node's test-friendly configuration. Only the standard library is imported here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Self

from worker.adapters.local.embedded import LOCALHOST, ServerError, free_port
from worker.adapters.local.kafka_jars import DEFAULT_VERSION, Progress, new_cluster_id
from worker.adapters.local.kafka_server import (
    BIND_FAILURE,
    FAST_START_JVM_OPTIONS,
    KAFKA_START_TIMEOUT_S,
    KAFKA_STOP_TIMEOUT_S,
    ApacheKafka,
    resolve,
)

__all__ = ["KafkaCluster", "cluster_config"]

# Fresh ports for every node when one was taken between `free_port` and its bind: a
# static quorum's voters are fixed per start, so the whole cluster moves.
PORT_ATTEMPTS = 3


def cluster_config(size: int) -> dict[str, str]:
    """The replication settings of a `size`-node cluster: what the single node's config
    sets to one replica (its only choice), set for a cluster."""
    internal = str(min(size, 3))
    # Two in-sync replicas from three nodes on: an acknowledged write then survives the
    # loss of any one node, and writes go on while one node is down.
    min_isr = "2" if size >= 3 else "1"
    return {
        "offsets.topic.replication.factor": internal,
        "transaction.state.log.replication.factor": internal,
        "transaction.state.log.min.isr": min_isr,
        "share.coordinator.state.topic.replication.factor": internal,
        "share.coordinator.state.topic.min.isr": min_isr,
        "min.insync.replicas": min_isr,
        "default.replication.factor": str(size),
    }


class KafkaCluster:
    """`size` combined broker + controller nodes (node ids 1..size) of one KRaft cluster.

    `start()` starts every node at once (a node comes up only with a majority of the
    quorum) and returns when each serves metadata listing itself and a consumer group
    finds its coordinator. `config` adds to or overrides every node's server.properties.
    Each node's storage lives in its own temporary folder, kept across its kills and
    restarts and removed by `close()`, which also kills every node (`stop()` shuts them
    down cleanly).
    """

    def __init__(
        self,
        size: int = 3,
        version: str = DEFAULT_VERSION,
        *,
        host: str = LOCALHOST,
        config: Mapping[str, str] | None = None,
        jvm_options: Sequence[str] = FAST_START_JVM_OPTIONS,
        progress: Progress = print,
    ) -> None:
        if size < 1:
            raise ValueError(f"a cluster has at least one node, not {size}")
        self.host = host
        self.cluster_id = new_cluster_id()
        home = resolve(version, progress)
        settings = {**cluster_config(size), **(config or {})}
        ports, voters = self._new_ports(size)
        self.nodes = [
            ApacheKafka(
                home=home,
                host=host,
                port=ports[node_id],
                config=settings,
                jvm_options=jvm_options,
                progress=progress,
                node_id=node_id,
                voters=voters,
                cluster_id=self.cluster_id,
            )
            for node_id in range(1, size + 1)
        ]
        # Seconds the last `start()` took, every node's included.
        self.last_start_s: float | None = None

    @property
    def bootstrap(self) -> str:
        """Every node's address, comma-separated: clients find the cluster through any
        node that is up."""
        return ",".join(node.bootstrap for node in self.nodes)

    def node(self, node_id: int) -> ApacheKafka:
        """The member with this node id (1..size), as partition leaders are reported."""
        for node in self.nodes:
            if node.node_id == node_id:
                return node
        raise KeyError(f"no node {node_id} in a cluster of {len(self.nodes)}")

    @property
    def running(self) -> bool:
        return all(node.running for node in self.nodes)

    def start(self, timeout_s: float = KAFKA_START_TIMEOUT_S) -> Self:
        """Start the nodes that are not running, all at once, and wait until every one is
        ready; on a failure, stop them all and raise."""
        began = time.monotonic()
        fresh = all(node.cluster_id is None for node in self.nodes)
        for attempt in range(PORT_ATTEMPTS if fresh else 1):
            errors = self._each(
                [n for n in self.nodes if not n.running], lambda n: n.start(timeout_s)
            )
            if not errors:
                break
            self._each(self.nodes, lambda n: n.stop())
            if (
                attempt + 1 == PORT_ATTEMPTS
                or not fresh
                or not any(BIND_FAILURE in e for e in errors)
            ):
                raise ServerError(f"the Kafka cluster did not start: {'; '.join(errors)}")
            self._move_ports()
        self.last_start_s = time.monotonic() - began
        return self

    def stop(self, timeout_s: float = KAFKA_STOP_TIMEOUT_S) -> None:
        """SIGTERM every node at once (each then SIGKILLed after `timeout_s`): one by one,
        the last nodes would wait for a quorum that is gone."""
        self._each(self.nodes, lambda n: n.stop(timeout_s))

    def close(self) -> None:
        """SIGKILL every node and remove their storage: a clean shutdown would only save
        what is deleted next (and its quorum's last voter waits seconds for the others)."""
        self._each(self.nodes, lambda n: n.kill())
        for node in self.nodes:
            node.close()

    def __enter__(self) -> Self:
        if not self.running:
            try:
                self.start()
            except BaseException:
                self.close()
                raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        up = [node.node_id for node in self.nodes if node.running]
        return f"<KafkaCluster {self.bootstrap} nodes up {up} (cluster {self.cluster_id})>"

    # ---------------------------------------------------------------------------------
    def _new_ports(self, size: int) -> tuple[dict[int, int], dict[int, int]]:
        """A broker port and a controller port per node id, all distinct."""
        chosen: set[int] = set()
        while len(chosen) < 2 * size:
            chosen.add(free_port(self.host))
        ordered = sorted(chosen)
        ids = range(1, size + 1)
        return (
            {i: ordered[2 * (i - 1)] for i in ids},
            {i: ordered[2 * (i - 1) + 1] for i in ids},
        )

    def _move_ports(self) -> None:
        ports, voters = self._new_ports(len(self.nodes))
        for node in self.nodes:
            node.port = ports[node.node_id]
            node.controller_port = voters[node.node_id]
            node.voters = dict(voters)

    @staticmethod
    def _each(nodes: list[ApacheKafka], action: Callable[[ApacheKafka], object]) -> list[str]:
        """`action` on every node at once, on a thread each; the errors, one per node."""
        errors: list[str] = []

        def run(node: ApacheKafka) -> None:
            try:
                action(node)
            except Exception as e:
                errors.append(f"node {node.node_id}: {e}")

        threads = [
            threading.Thread(target=run, args=(n,), name=f"kafka-node-{n.node_id}") for n in nodes
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return errors
