"""Serves a JSONL store's console for the browser tests: a real uvicorn on 127.0.0.1.

    python serve_store.py STORE_DIR PORT [PREFIX]

PORT 0 picks a free port; the line ``serving http://127.0.0.1:PORT PREFIX/`` on stdout says
which once the server listens. With PREFIX the console is mounted under it inside a host
Starlette app, as a user would mount it.
"""

from __future__ import annotations

import socket
import sys

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

import inboxlog
import inboxlog.console


def main() -> None:
    root, port, prefix = sys.argv[1], int(sys.argv[2]), (sys.argv[3] if len(sys.argv) > 3 else "")
    console = inboxlog.console.app(inboxlog.Store(root))
    app = Starlette(routes=[Mount(prefix, console)]) if prefix else console
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    print(f"serving http://127.0.0.1:{sock.getsockname()[1]}{prefix}/", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
