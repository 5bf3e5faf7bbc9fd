"""One module per `derender-worker` command, each with its flag table and its function;
`COMMANDS` in the order the top-level usage lists them."""

from __future__ import annotations

from worker.commands import check, demo, gateway, publish, replay, run, serve, servers, tail
from worker.flags import Command

COMMANDS: tuple[Command, ...] = (
    run.COMMAND,
    replay.COMMAND,
    serve.COMMAND,
    gateway.COMMAND,
    check.COMMAND,
    publish.COMMAND,
    tail.COMMAND,
    demo.COMMAND,
    servers.COMMAND,
)
