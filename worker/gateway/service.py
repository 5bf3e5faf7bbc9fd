"""The gateway's lifetime: the engine client, the publisher, this replica's reply
partitions, the control topic (when on) and the HTTP server started in that order,
stopped in reverse on SIGTERM or SIGINT (requests in flight get the HTTP server's grace
period)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from worker.errors import ConfigError
from worker.gateway.app import build_app
from worker.gateway.control import GatewayControl
from worker.gateway.engine import ABORT_TIMEOUT_S, Engine
from worker.gateway.exchange import Services
from worker.gateway.metrics import GatewayMetrics
from worker.gateway.replies import Replies, topic_partitions
from worker.observe import http_server
from worker.observe.tracing import setup
from worker.tools.publisher import Publisher

log = logging.getLogger("derender.gateway")

# How long requests cut off by a stop get to abort their engine request and send their
# abort record (the abort call is bounded by engine.ABORT_TIMEOUT_S).
DRAIN_TIMEOUT_S = ABORT_TIMEOUT_S + 5.0


@dataclass(frozen=True)
class GatewayConfig:
    engine_url: str
    render_url: str | None
    engine_api_key: str | None
    engine_timeout_s: float
    bootstrap_servers: str
    input_topic: str
    output_topic: str
    reply_partitions: Sequence[int] | None
    reply_timeout_s: float
    host: str
    port: int
    api_key: str | None
    max_body_bytes: int
    kafka: dict[str, Any]  # aiokafka's security options
    control_topic: str | None = None


async def serve(
    c: GatewayConfig, stop: asyncio.Event, on_ready: Callable[[str], None] | None = None
) -> int:
    """Run until `stop` is set; once listening, prints `DERENDER_GATEWAY_URL=…` (or gives
    the URL to `on_ready`: the demo runs a gateway in its own process)."""
    await topic_partitions(c.bootstrap_servers, c.input_topic, **c.kafka)  # (it must exist)
    engine = Engine(
        c.engine_url, c.render_url, timeout_s=c.engine_timeout_s, api_key=c.engine_api_key
    )
    replies = Replies(c.bootstrap_servers, c.output_topic, c.reply_partitions, **c.kafka)
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_callback(engine.aclose)
        publisher = await stack.enter_async_context(
            # linger 0: each engine event is a record a client waits for, sent at once.
            Publisher(c.bootstrap_servers, c.input_topic, linger_ms=0, **c.kafka)
        )
        await replies.start()
        stack.push_async_callback(replies.stop)
        control = None
        if c.control_topic:  # (followed from its end before any request is published)
            try:
                control = GatewayControl(c.bootstrap_servers, c.control_topic, **c.kafka)
                await stack.enter_async_context(control)
            except ValueError as exc:  # (the topic does not exist)
                raise ConfigError(f"--control-topic: {exc}") from None
        tracing = setup()  # a SERVER span per request when OTEL_* asks (observe/tracing.py)
        services = Services(
            engine,
            publisher,
            replies,
            GatewayMetrics(lambda: replies.in_flight),
            c.reply_timeout_s,
            tracing,
            control=control,
        )
        app = build_app(services, api_key=c.api_key, max_body_bytes=c.max_body_bytes)
        if tracing is not None:
            app = tracing.server_spans(app)
        server = await http_server.start(app, c.host, c.port)
        url = f"http://{c.host}:{server.port}"
        if on_ready is None:
            print(f"DERENDER_GATEWAY_URL={url}", flush=True)
        else:
            on_ready(url)
        log.info(
            "serving on %s:%d; engine %s; reply partitions %s of %s; control topic %s",
            c.host,
            server.port,
            c.engine_url,
            ",".join(map(str, replies.owned)),
            c.output_topic,
            c.control_topic or "off",
        )
        await stop.wait()
        server.close()
        await server.wait_closed()
        if services.active:  # (cancelled after the grace period: still closing)
            await asyncio.wait(set(services.active), timeout=DRAIN_TIMEOUT_S)
    log.info("stopped")
    return 0


def run(c: GatewayConfig, loop_factory: Any = None) -> int:
    async def main() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
        return await serve(c, stop)

    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(main())
