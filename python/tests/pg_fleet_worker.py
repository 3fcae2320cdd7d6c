"""A worker process of test_pg_fleet_scale.py: holds sessions open on ONE PostgreSQL
store and appends to every one of them in rounds until told to stop.

    python pg_fleet_worker.py '{"url": ..., "schema": ..., "max_connections": 3,
        "name": "w3", "ids": [...], "create": true, "threads": 4, "stop": "/tmp/stop"}'

It reports on stdout, one line per fact, each written whole with one ``os.write``
(a kill never leaves half a line, and a line written is a line the parent reads):

    ready N          N sessions are open (created, or opened when "create" is false)
    ack ID N         the append of round N to session ID returned
    fenced ID        an append to ID raised FencedError: the session is dropped
    error ID TEXT    an append to ID raised anything else: the session is dropped
    round N          round N is over: every session still held was appended to
    done             the stop file exists; every session still held is closed

Every append is a ``note`` event with data ``{"w": name, "n": round}``.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import inboxlog


def say(line: str) -> None:
    os.write(1, f"{line}\n".encode())


def main(params: dict[str, Any]) -> int:
    store = inboxlog.Store.postgres(
        params["url"], schema=params["schema"], max_connections=params["max_connections"]
    )
    name: str = params["name"]
    stop = Path(params["stop"])
    begin = store.create if params["create"] else store.open
    with ThreadPoolExecutor(params["threads"]) as pool:
        held = dict(zip(params["ids"], pool.map(begin, params["ids"]), strict=True))
        say(f"ready {len(held)}")
        lock = threading.Lock()

        def append(id: str, n: int) -> None:
            try:
                held[id].append("note", {"w": name, "n": n})
            except inboxlog.FencedError:
                say(f"fenced {id}")
            except inboxlog.InboxlogError as e:
                say(f"error {id} {type(e).__name__}: {e}".replace("\n", " "))
            else:
                say(f"ack {id} {n}")
                return
            with lock:
                dropped = held.pop(id)
            # A fenced writer may fail to close; what it reported stands.
            with contextlib.suppress(inboxlog.InboxlogError):
                dropped.close()

        n = 0
        while not stop.exists():
            list(pool.map(append, list(held), [n] * len(held)))
            say(f"round {n}")
            n += 1
    for s in held.values():
        s.close()
    say("done")
    return 0


if __name__ == "__main__":
    sys.exit(main(json.loads(sys.argv[1])))
