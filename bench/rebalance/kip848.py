"""A stand-in worker on KIP-848's consumer group protocol (confluent-kafka, librdkafka):
each input record copied to the output topic with the worker's (request id, seq, part)
headers, exactly-once the KIP-447 way (one transactional producer per member, offsets
sent with the consumer's group metadata, a transaction committed every `--commit-ms`).

It does none of the worker's processing: it measures what the group protocol and the
transactions cost a scale event, on the same fleet and load as the worker
(bench/rebalance_bench.py, candidate `kip848`). It logs `partitions assigned:` with its
whole assignment after every change, as the worker does.
"""

from __future__ import annotations

import argparse
import json
import logging
import signal
import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

log = logging.getLogger("kip848")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--output", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--transactional-id", required=True)
    ap.add_argument("--commit-ms", type=int, default=100)
    # librdkafka pauses every assigned partition while an application rebalance callback
    # is pending; without callbacks it applies the changes itself, and the prototype
    # follows its assignment after each consume.
    ap.add_argument("--no-callbacks", action="store_true")
    args = ap.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    stop = False

    def on_term(*_: object) -> None:
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, on_term)
    consumer = Consumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "group.protocol": "consumer",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
            "client.id": args.name,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": args.bootstrap,
            "transactional.id": args.transactional_id,
            "linger.ms": 0,
            "client.id": args.name,
        }
    )
    producer.init_transactions(30)
    owned: set[int] = set()
    in_txn = False
    began = 0.0
    positions: dict[int, int] = {}  # partition → next offset, in the open transaction

    def commit() -> None:
        nonlocal in_txn
        if not in_txn:
            return
        offsets = [TopicPartition(args.input, p, o) for p, o in positions.items()]
        try:
            producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 10)
            producer.commit_transaction(10)
        except KafkaException as exc:
            log.warning("commit failed: %s", exc)
            err = exc.args[0]
            if err.txn_requires_abort():
                producer.abort_transaction(10)
            # the records after the committed offsets are read again from there
            for p in positions:
                committed = consumer.committed([TopicPartition(args.input, p)], 10)[0]
                if committed.offset >= 0 and p in owned:
                    consumer.seek(committed)
        positions.clear()
        in_txn = False

    def show() -> None:
        names = ", ".join(f"{args.input}/{p}" for p in sorted(owned)) or "none"
        log.info("partitions assigned: %s", names)

    def on_assign(c: Consumer, parts: list[TopicPartition]) -> None:
        owned.update(tp.partition for tp in parts)
        show()

    def on_revoke(c: Consumer, parts: list[TopicPartition]) -> None:
        commit()  # what was read of them is committed before they leave
        owned.difference_update(tp.partition for tp in parts)
        log.info("partitions revoked: %s", ", ".join(str(tp.partition) for tp in parts))
        show()

    if args.no_callbacks:
        consumer.subscribe([args.input])
    else:
        consumer.subscribe(
            [args.input], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke
        )

    def follow() -> None:
        now = {tp.partition for tp in consumer.assignment()}
        if gone := owned - now:
            commit()  # (refused for the partitions gone: they are done again)
            owned.difference_update(gone)
            log.info("partitions revoked: %s", ", ".join(str(p) for p in sorted(gone)))
        if now != owned or gone:
            owned.update(now)
            show()

    log.info("consuming %s as group %s", args.input, args.group)
    records = 0
    while not stop:
        msgs = consumer.consume(500, 0.05)
        if args.no_callbacks:
            follow()
        for m in msgs:
            if m.error():
                log.warning("consume error: %s", m.error())
                continue
            if not in_txn:
                producer.begin_transaction()
                in_txn, began = True, time.monotonic()
            doc = json.loads(m.value())
            headers = [
                ("derender-request-id", str(doc.get("request_id", "")).encode()),
                ("derender-seq", str(doc.get("seq", "")).encode()),
                ("derender-part", b"0"),
            ]
            producer.produce(args.output, m.value(), key=m.key(), headers=headers)
            positions[m.partition()] = m.offset() + 1
            records += 1
        producer.poll(0)
        if in_txn and time.monotonic() - began >= args.commit_ms / 1000:
            commit()
    commit()
    consumer.close()  # leaves the group
    log.info("stopped after %d records", records)
    return 0


if __name__ == "__main__":
    sys.exit(main())
