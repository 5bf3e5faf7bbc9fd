"""`derender-worker run`: the worker (Kafka in, Kafka out, state in Redis). Its flag table
is `worker.settings.FLAGS`: the worker's settings, which the runtime reads too."""

from __future__ import annotations

import argparse
import asyncio
import os

from worker.flags import Command
from worker.settings import FLAGS


def run(args: argparse.Namespace) -> int:
    import logging

    from worker.adapters.state.redis_store import RedisStore
    from worker.commands.common import event_loop_factory, tune_gc
    from worker.config import load_registry
    from worker.flags import secret_values
    from worker.observe.logs import PROCESS_INDEX_ENV, configure
    from worker.observe.metrics import Metrics, serve
    from worker.run import stop_signal
    from worker.run.runner import Runner
    from worker.settings import from_args

    settings = from_args(args)
    configure(
        settings.log_format,
        settings.log_level,
        os.environ.get(PROCESS_INDEX_ENV),
        secret_values(FLAGS, settings),
    )
    log = logging.getLogger("derender.worker")
    if settings.processes > 1:
        from worker.run.processes import Supervisor

        log.info("settings: %s", settings.redacted())

        async def supervise() -> int:
            try:
                return await Supervisor(settings).run()
            finally:
                stop_signal.take_back(asyncio.get_running_loop().remove_signal_handler)

        stop_signal.hand_over()
        return asyncio.run(supervise())
    registry = load_registry(settings.models)
    registry.max_output_bytes = settings.max_output_bytes
    tune_gc()
    log.info("models: %s (default %s)", ", ".join(registry.models), registry.default)
    log.info("settings: %s", settings.redacted())

    async def main() -> int:
        store = RedisStore(
            settings.redis_url,
            ttl_s=settings.state_ttl_s,
            done_ttl_s=settings.done_ttl_s,
            key_prefix=settings.state_prefix,
            mode=settings.redis_mode,
            wait_replicas=settings.redis_wait_replicas,
            wait_timeout_s=settings.redis_wait_timeout_ms / 1000,
        )
        metrics = Metrics()
        server = None
        if settings.metrics_port:
            server = await serve(metrics, settings.metrics_host, settings.metrics_port)
        try:
            return await Runner(settings, registry, store, metrics).run()
        finally:
            stop_signal.take_back(asyncio.get_running_loop().remove_signal_handler)
            if server is not None:
                server.close()
                await server.wait_closed()

    stop_signal.hand_over()  # (a SIGTERM from now on is the loop's to handle: Runner.run)
    with asyncio.Runner(loop_factory=event_loop_factory(settings.event_loop)) as runner:
        return runner.run(main())


COMMAND = Command(
    "run",
    "the worker: Kafka in, Kafka out, state in Redis",
    "Consume ChunkRecords, publish OpenAI payloads. Every flag can also be set as "
    "DERENDER_<FLAG> (dashes as underscores).",
    FLAGS,
    run,
)
