"""The e2e bench's Markdown report."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from e2ebench.client import DIRECT, GATEWAY, SYSTEMS, VLLM, Timed
from e2ebench.hops import Hops
from e2ebench.stack import Usage

TTFT_ADDED_MS = 25.0  # the target: the loop adds at most this to TTFT p50
ITL_RATIO = 1.10  # and keeps inter-token p50 within 10 %


@dataclass
class Level:
    """Everything measured at one concurrency."""

    concurrency: int
    timed: dict[str, list[Timed]] = field(default_factory=lambda: {s: [] for s in SYSTEMS})
    # Per round of the gateway: (its p50 TTFT ms, vLLM's of the same round).
    rounds: list[tuple[float, float]] = field(default_factory=list)
    # Over the gateway's waves, per process: "gateway", "worker", and "kafka" and "redis"
    # when started here.
    used: dict[str, Usage] = field(default_factory=dict)
    gateway_tokens: int = 0
    gateway_s: float = 0.0  # the gateway's waves, wall seconds
    # The same processes over the other systems' waves (the loop idle), and how long.
    idle: dict[str, Usage] = field(default_factory=dict)
    idle_s: float = 0.0
    worker_batches: float = 0.0  # the worker's batches over the gateway's waves
    worker_records: float = 0.0  # and the records in them
    wait_count: float = 0.0
    wait_sum: float = 0.0
    wait_p50: float | None = None
    hops: Hops | None = None
    # Per system, over its waves: busy and total CPU seconds of the cores the loop and the
    # clients run on (all of them when the engine shares them).
    busy: dict[str, tuple[float, float]] = field(default_factory=dict)


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    ys = sorted(xs)
    return ys[min(len(ys) - 1, round(q * (len(ys) - 1)))]


def ms(x: float | None) -> str:
    return "–" if x is None else f"{x * 1000:.1f}"


def ttfts(ts: list[Timed]) -> list[float]:
    return [t.ttft_s for t in ts if t.ttft_s is not None and t.error is None]


def gaps(ts: list[Timed]) -> list[float]:
    return [g for t in ts if t.error is None for g in t.gaps_s]


def _verdict(ok: bool) -> str:
    return "met" if ok else "**missed**"


def _per(u: dict[str, Usage], n: int, name: str, split: bool = False) -> str:
    """A process's µs of CPU per token (with the user / system split)."""
    if name not in u:
        return "–"
    x = u[name]
    total = f"{(x.user_s + x.system_s) / n * 1e6:.0f}"
    if not split:
        return total
    return total + f" ({x.user_s / n * 1e6:.0f} / {x.system_s / n * 1e6:.0f})"


def _switches(u: dict[str, Usage], n: int, name: str) -> str:
    return f"{u[name].switches / n:.2f}" if name in u else "–"


def render(levels: list[Level], info: dict[str, str], elapsed_s: float) -> str:
    out = [
        f"# End-to-end latency: the gateway loop against vLLM's coupled server, {info['date']}",
        "",
    ]
    out += [f"- {k}: {v}" for k, v in info.items() if k != "date"]
    out += [f"- took {elapsed_s:.0f} s", ""]
    out += [
        "## TTFT and inter-token latency",
        "",
        "ms, over every request of every round; `direct` = render then generate called by "
        "hand on the engine (no Kafka, no worker).",
        "",
        "| streams | system | requests | errors | tokens/request | TTFT p50 | TTFT p99 | "
        "inter-token p50 | inter-token p99 |",
        "|--:|---|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for lv in levels:
        for s in SYSTEMS:
            ts = lv.timed[s]
            if not ts:
                continue
            ok = [t for t in ts if t.error is None]
            per = statistics.mean(t.tokens for t in ok) if ok else 0
            tt, gg = ttfts(ts), gaps(ts)
            out.append(
                f"| {lv.concurrency} | {s} | {len(ts)} | {len(ts) - len(ok)} | {per:.1f} | "
                f"{ms(pct(tt, 0.5))} | {ms(pct(tt, 0.99))} | {ms(pct(gg, 0.5))} | "
                f"{ms(pct(gg, 0.99))} |"
            )
    out += [
        "",
        "## Against the targets",
        "",
        f"Reported, never asserted: the gateway adds ≤ {TTFT_ADDED_MS:.0f} ms to TTFT p50 and "
        f"keeps inter-token p50 within {round((ITL_RATIO - 1) * 100)} % of vLLM's (p99 reported "
        "beside). Per round: the gateway's TTFT p50 minus vLLM's in the same round.",
        "",
        "| streams | added TTFT p50 ms | every round | inter-token p50 ratio | target | "
        "added TTFT p99 ms | inter-token p99 ratio |",
        "|--:|--:|---|--:|---|--:|--:|",
    ]
    for lv in levels:
        g, v = lv.timed[GATEWAY], lv.timed[VLLM]
        gt, vt = ttfts(g), ttfts(v)
        gg, vg = gaps(g), gaps(v)
        if not gt or not vt or not gg or not vg:
            continue
        added = (pct(gt, 0.5) or 0) - (pct(vt, 0.5) or 0)
        ratio = (pct(gg, 0.5) or 0) / (pct(vg, 0.5) or 1)
        added99 = (pct(gt, 0.99) or 0) - (pct(vt, 0.99) or 0)
        ratio99 = (pct(gg, 0.99) or 0) / (pct(vg, 0.99) or 1)
        every = ", ".join(f"{(a - b) * 1000:+.1f}" for a, b in lv.rounds)
        ok = added * 1000 <= TTFT_ADDED_MS and ratio <= ITL_RATIO
        out.append(
            f"| {lv.concurrency} | {added * 1000:+.1f} | {every} | {ratio:.2f} | "
            f"{_verdict(ok)} | {added99 * 1000:+.1f} | {ratio99:.2f} |"
        )
    out += [
        "",
        "How full the cores of the loop and the clients were over each system's waves (busy "
        "over total CPU time of those cores; the engine's too when it shares them): a core "
        "near 100 % queues every hop of the loop behind the others.",
        "",
        "| streams | " + " | ".join(f"{s} busy %" for s in SYSTEMS) + " |",
        "|--:|" + "--:|" * len(SYSTEMS),
    ]
    for lv in levels:
        if lv.busy:
            cells = " | ".join(
                f"{lv.busy[s][0] / lv.busy[s][1] * 100:.0f}" if lv.busy.get(s, (0, 0))[1] else "–"
                for s in SYSTEMS
            )
            out.append(f"| {lv.concurrency} | {cells} |")
    out += [
        "",
        "## CPU per streamed token",
        "",
        "User + system CPU of each process over the gateway's waves, divided by the tokens "
        "its clients received: µs per token (the user / system split in brackets), and the "
        "process's voluntary context switches per token (each a wait on a socket: a proxy for "
        "the messages it exchanges and the wake-ups they cost). Kafka and Redis when started "
        "here; `loop` is their sum with the gateway's and the worker's, the share of the "
        "clients' core the loop takes. The worker's records per batch (its "
        "`derender_batch_records`): its costs per batch are shared by that many tokens.",
        "",
        "| streams | tokens | gateway µs/token | switches | worker µs/token | switches | "
        "Kafka µs/token | Redis µs/token | loop µs/token | worker records/batch |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for lv in levels:
        if not lv.gateway_tokens:
            continue
        n = lv.gateway_tokens
        u = lv.used
        loop = sum((x.user_s + x.system_s for x in u.values()), 0.0)
        per_batch = f"{lv.worker_records / lv.worker_batches:.2f}" if lv.worker_batches else "–"
        out.append(
            f"| {lv.concurrency} | {n} | {_per(u, n, 'gateway', True)} | "
            f"{_switches(u, n, 'gateway')} | {_per(u, n, 'worker', True)} | "
            f"{_switches(u, n, 'worker')} | {_per(u, n, 'kafka')} | {_per(u, n, 'redis')} | "
            f"{loop / n * 1e6:.0f} | {per_batch} |"
        )
    out += [
        "",
        "Idle, over the other systems' waves (the loop waiting, nothing to do): CPU ms per "
        "second, and what that is per token at the gateway waves' token rate (the part of the "
        "figures above that does not depend on the traffic).",
        "",
        "| streams | gateway idle ms/s | worker idle ms/s | Kafka idle ms/s | Redis idle ms/s | "
        "idle loop µs/token |",
        "|--:|--:|--:|--:|--:|--:|",
    ]
    for lv in levels:
        if not lv.idle_s or not lv.gateway_tokens:
            continue
        rate = {k: (x.user_s + x.system_s) / lv.idle_s for k, x in lv.idle.items()}
        per_token = sum(rate.values()) * lv.gateway_s / lv.gateway_tokens
        cells = " | ".join(
            f"{rate[k] * 1000:.1f}" if k in rate else "–"
            for k in ("gateway", "worker", "kafka", "redis")
        )
        out.append(f"| {lv.concurrency} | {cells} | {per_token * 1e6:.0f} |")
    out += [
        "",
        "## Where the gateway's time goes",
        "",
        "p50 / p99 ms per hop (bench/e2ebench/hops.py: Kafka record timestamps, 1 ms "
        "resolution, and the client's clock). First token: client → published (render, "
        "generate's first event, the publish call), published → output (the worker's "
        "hold, the gateway producer's linger included), output → client (the worker's "
        "produce and acks, the gateway's fetch, SSE). Every token: the last two. `direct` "
        "gives render alone and the engine's first event without Kafka. The gateway's "
        "`derender_gateway_reply_wait_seconds` (first record published → first output "
        "read) beside: its mean, and its p50 as the bucket bound.",
        "",
        "| streams | direct: render | direct: TTFT | client → published | published → "
        "output | output → client | per token: worker hold | per token: output → client | "
        "reply wait mean / p50 bucket |",
        "|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
    ]
    for lv in levels:
        h = lv.hops
        if h is None:
            continue
        d = lv.timed[DIRECT]
        render_s = [t.render_s for t in d if t.render_s is not None]

        def pp(xs: list[float]) -> str:
            return f"{ms(pct(xs, 0.5))} / {ms(pct(xs, 0.99))}"

        mean = lv.wait_sum / lv.wait_count if lv.wait_count else None
        out.append(
            f"| {lv.concurrency} | {pp(render_s)} | {pp(ttfts(d))} | {pp(h.to_published)} | "
            f"{pp(h.worker_first)} | {pp(h.to_client_first)} | {pp(h.worker_token)} | "
            f"{pp(h.to_client_token)} | {ms(mean)} / ≤ {ms(lv.wait_p50)} |"
        )
    return "\n".join(out)
