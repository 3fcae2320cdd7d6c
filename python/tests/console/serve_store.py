"""Serves a store's console for the browser tests: a real uvicorn on 127.0.0.1.

    python serve_store.py STORE PORT [--schema S] [--prefix PREFIX] [--read-only] [--token T]

STORE is a JSONL directory or a PostgreSQL URL (with --schema), as ``Store.open`` takes.

PORT 0 picks a free port; the line ``serving http://127.0.0.1:PORT[PREFIX]/`` on stdout
says which once the socket is bound. With PREFIX the console is mounted under it inside a
host Starlette app, as a user would mount it.
"""

from __future__ import annotations

import argparse
import socket

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount

import inboxlog
import inboxlog.console


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("port", type=int)
    parser.add_argument("--schema")
    parser.add_argument("--prefix", default="")
    parser.add_argument("--read-only", action="store_true")
    parser.add_argument("--token")
    args = parser.parse_args()
    console = inboxlog.console.app(
        inboxlog.Store.open(args.root, schema=args.schema),
        token=args.token,
        read_only=args.read_only,
    )
    app = Starlette(routes=[Mount(args.prefix, console)]) if args.prefix else console
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", args.port))
    print(f"serving http://127.0.0.1:{sock.getsockname()[1]}{args.prefix}/", flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="off")
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
