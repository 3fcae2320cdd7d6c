"""Helpers of the SSE tests: the console served by a real uvicorn on a free loopback
port of this process, a reader of event streams, and a writer in another process."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import inboxlog
import inboxlog.console
from inboxlog.console import serve

#: The writer process: appends N events of SIZE characters to a session it opens.
WRITER = """
import sys, inboxlog
where, schema, durability, id, n, size = sys.argv[1:7]
store = inboxlog.Store.open(where, durability, schema=schema or None)
with store.open(id) as s:
    for i in range(int(n)):
        s.append("host/n", {"i": i, "pad": "x" * int(size)})
"""


@dataclass
class Where:
    """Where a store is, so that another process can open it."""

    path: str
    schema: str | None
    durability: str

    def open(self) -> inboxlog.Store:
        return inboxlog.Store.open(self.path, self.durability, schema=self.schema)


def write(where: Where, id: str, n: int, size: int = 8) -> subprocess.Popen[bytes]:
    """Starts a process that appends ``n`` events to session ``id``."""
    args = [where.path, where.schema or "", where.durability, id, str(n), str(size)]
    return subprocess.Popen([sys.executable, "-P", "-c", WRITER, *args])


class Served:
    """``inboxlog.console.app(store)`` under a real uvicorn, in a thread of this process."""

    def __init__(self, store: inboxlog.Store, **options: Any) -> None:
        self.app = inboxlog.console.app(store, **options)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(1024)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        self.server = serve.server(
            self.app, log_level="warning", lifespan="off", timeout_graceful_shutdown=5
        )
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, daemon=True
        )
        self.thread.start()
        until(lambda: self.server.started, "the server starts")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(30)


def until(condition: Any, what: str, limit: float = 60.0) -> None:
    """Waits for ``condition()`` (a deadline only so that a broken test ends)."""
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting until {what}"
        time.sleep(0.01)


@dataclass
class Event:
    """One SSE event (or comment) as received."""

    id: str | None = None
    event: str | None = None
    data: list[str] = field(default_factory=list)
    retry: str | None = None
    comment: str | None = None

    def json(self) -> Any:
        return json.loads("\n".join(self.data))


def parse(lines: Iterator[str]) -> Iterator[Event]:
    """The events (and comments, one per line) of an SSE stream's lines."""
    current = Event()
    for line in lines:
        if line == "":
            if current != Event():
                yield current
            current = Event()
        elif line.startswith(":"):
            yield Event(comment=line[1:].strip())
        else:
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "data":
                current.data.append(value)
            elif name in ("id", "event", "retry"):
                setattr(current, name, value)


def connect(url: str, path: str) -> socket.socket:
    """A bare connection that asked for ``path`` and reads nothing yet (a small receive
    buffer, so that what the server sends piles up on its side)."""
    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    return sock


def sse_ids(received: bytes) -> list[int]:
    """The ``id:`` of every event in raw response bytes."""
    return [int(line[4:]) for line in received.split(b"\n") if line.startswith(b"id: ")]


def drain(sock: socket.socket) -> tuple[bytes, bool]:
    """Everything ``sock`` receives until its connection ends, and whether it ended
    with a reset (aborted) rather than a clean close."""
    sock.settimeout(60)
    received = b""
    try:
        while chunk := sock.recv(1 << 16):
            received += chunk
    except ConnectionResetError:
        return received, True
    return received, False
