"""What both Kafka clients' sinks share: outputs grouped by the input partition whose
transaction carries them, refusals gathered across those transactions, and the warning
for a reply partition the output topic does not have."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable

from worker.ports import OutputsRefused, OutRecord, Partition

log = logging.getLogger("derender.worker")

# Requests warned about a missing reply partition, remembered so each is warned once;
# forgotten all at once past this many (a bound, not a cache).
MISROUTED_WARNED_MAX = 10_000

Grouped = dict[Partition, list[OutRecord]]


def by_source(
    outputs: list[OutRecord], dead_letters: list[OutRecord]
) -> tuple[list[Partition], Grouped, Grouped]:
    """The input partitions the records came from, and each one's outputs and dead
    letters."""
    outs: Grouped = {}
    dls: Grouped = {}
    for rec in outputs:
        outs.setdefault(rec.source_partition, []).append(rec)
    for rec in dead_letters:
        dls.setdefault(rec.source_partition, []).append(rec)
    return list(outs.keys() | dls.keys()), outs, dls


def raise_refusals(results: Iterable[object]) -> None:
    """After sends gathered with `return_exceptions`: the first error that is not a
    refusal as it is, else every refusal together (the rest was delivered)."""
    refused: list[tuple[OutRecord, BaseException]] = []
    for result in results:
        if isinstance(result, OutputsRefused):
            refused += result.refused
        elif isinstance(result, BaseException):
            raise result
    if refused:
        raise OutputsRefused(refused)


class Misrouted:
    """Outputs whose request names a reply partition the output topic does not have:
    counted (and the worker's metric told), each request warned about once."""

    def __init__(self, on_misrouted: Callable[[], object] | None) -> None:
        self.count = 0
        self.on_misrouted = on_misrouted  # (the worker's metric)
        self._warned: set[str] = set()

    def __call__(self, rec: OutRecord, topic: str, partitions: int) -> None:
        self.count += 1
        if self.on_misrouted is not None:
            self.on_misrouted()
        if rec.key in self._warned:
            return
        if len(self._warned) >= MISROUTED_WARNED_MAX:
            self._warned.clear()
        self._warned.add(rec.key)
        log.warning(
            "request %s names reply partition %d, which output topic %s does not have "
            "(%d partitions): its outputs go to the key's partition",
            rec.key,
            rec.partition,
            topic,
            partitions,
        )
