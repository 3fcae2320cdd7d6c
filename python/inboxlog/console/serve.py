"""The console under uvicorn, as ``inboxlog serve`` runs it: a server that ends the
console's SSE streams as it shuts down, so that stopping it waits for no browser; that
sends small writes at once (``TCP_NODELAY`` on the sockets it is given, which asyncio
sets only on sockets it made itself); and that lets the console abort the connection
of a client that takes nothing (the ``inboxlog.abort`` scope extension), so that what
the client left untaken is not held until it goes away."""

from __future__ import annotations

import socket
from typing import Any

import uvicorn
from starlette.types import Receive, Scope, Send

from .app import Console
from .stream import ABORT


class Server(uvicorn.Server):
    """uvicorn's server, ending the console's streams before it waits for connections
    to close (a browser then reconnects to the next server with Last-Event-ID)."""

    def __init__(self, console: Console, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.console = console

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        for sock in sockets or []:
            if sock.family in (socket.AF_INET, socket.AF_INET6):
                # Accepted connections inherit it.
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        await super().startup(sockets)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.console.hub.close()
        await super().shutdown(sockets)

    def abort(self, scope: Scope) -> None:
        """Aborts the connection of the request ``scope`` (a reset: nothing it left
        untaken is kept)."""
        client = scope.get("client")
        if client is None:
            return
        for connection in list(self.server_state.connections):
            transport = getattr(connection, "transport", None)
            if transport is None:
                continue
            peer = transport.get_extra_info("peername")
            if peer is not None and tuple(peer[:2]) == tuple(client[:2]):
                transport.abort()

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The console, its requests given the ``inboxlog.abort`` extension."""
        if scope["type"] == "http":
            scope = {**scope, "extensions": {**(scope.get("extensions") or {}), ABORT: self.abort}}
        await self.console(scope, receive, send)


def server(console: Console, **options: Any) -> Server:
    """A :class:`Server` of ``console`` with uvicorn's ``options``."""
    config = uvicorn.Config(console, **{"interface": "asgi3", **options})
    made = Server(console, config)
    config.app = made.app
    return made
