"""`--redis-wait-replicas`: a batch is committed only once the replicas have every state it
stands on, including states an earlier try of the same batch saved on the master alone.

Found by the chaos suite (test_a_failover_to_a_lagging_replica with WAIT): a
batch's save failed its WAIT (the replica was frozen) but was applied on the master; the
retry loaded those states, found every record a duplicate, wrote nothing (so waited for
nothing) and committed. The master then died before its replica had the states, and the
requests' next records met the older ones. Now the retry writes the unchanged states back
and waits for them: it fails at its WAIT, like the first try, until the replicas answer.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from tests.batch.test_loop import REGISTRY
from tests.run.test_assignment import encode_record
from tests.support.helpers import ListSink, ListSource, chunk
from worker.adapters.state.redis_cluster import NotReplicated
from worker.adapters.state.redis_store import RedisStore
from worker.batch.checkpoint import Checkpoint
from worker.batch.loop import run_batch
from worker.ports import InRecord
from worker.run.assignment import Assignment

pytestmark = pytest.mark.integration


def _records(n: int) -> list[InRecord]:
    out = []
    for seq in range(n):
        rid = f"r{seq % 3}"  # three requests, several records each
        value = encode_record(chunk(rid, seq // 3, [100 + seq]))
        out.append(InRecord(value, rid, 0, f"in:{seq}"))
    return out


@pytest.mark.parametrize("mode", ["standalone", "cluster"])
def test_a_retry_of_a_batch_whose_save_was_not_replicated_is_not_committed(
    mode: str, request: pytest.FixtureRequest
) -> None:
    # Standalone: no replica at all; the cluster: one replica per master, two asked for.
    # Either way WAIT can never be met: every save is applied on the master, never
    # acknowledged by enough replicas.
    url = request.getfixturevalue("redis_url" if mode == "standalone" else "redis_cluster_url")
    wanted = 1 if mode == "standalone" else 2

    async def body() -> None:
        store = RedisStore(
            url,
            key_prefix=f"t{uuid.uuid4().hex[:8]}:",
            mode=mode,
            wait_replicas=wanted,
            wait_timeout_s=0.1,
        )
        try:
            source, sink = ListSource(), ListSink()
            checkpoint = Checkpoint(source, store, Assignment().lease)
            batch = source.batch(_records(9))
            for attempt in range(3):
                with pytest.raises(NotReplicated):
                    await run_batch(
                        batch,
                        registry=REGISTRY,
                        sink=sink,
                        checkpoint=checkpoint,
                        max_record_bytes=1 << 20,
                    )
                await checkpoint.abort(batch)
                assert source.committed == {}, f"committed unreplicated states (try {attempt})"
            # The first try delivered the outputs and applied the states on the master;
            # the retries found the records applied (duplicates) and sent nothing again.
            loaded = await store.load_many(["r0", "r1", "r2"])
            assert all(s is not None and s.seq == 2 for s in loaded.values()), loaded
            assert len({(o.key, dict(o.headers)["derender-seq"]) for o in sink.outputs}) == len(
                sink.outputs
            )
        finally:
            await store.close()

    asyncio.run(body())
