"""The console under uvicorn, as ``inboxlog serve`` runs it: a server that ends the
console's SSE streams as it shuts down, so that stopping it waits for no browser."""

from __future__ import annotations

import socket

import uvicorn

from .app import Console


class Server(uvicorn.Server):
    """uvicorn's server, ending the console's streams before it waits for connections
    to close (a browser then reconnects to the next server with Last-Event-ID)."""

    def __init__(self, console: Console, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.console = console

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.console.hub.close()
        await super().shutdown(sockets)


def server(console: Console, **options: object) -> Server:
    """A :class:`Server` of ``console`` with uvicorn's ``options``."""
    return Server(console, uvicorn.Config(console, **options))  # type: ignore[arg-type]
