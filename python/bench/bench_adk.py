"""ADK sessions: ``InboxlogSessionService`` beside ADK's ``DatabaseSessionService``, in one
run, at 10, 1,000 and 10,000 events of history.

    .venv/bin/python python/bench/bench_adk.py [--events 10000] [--url URL] [--no-postgres]

One session per service grows to ``--events`` events (alternately a user and a model
event of about 300 characters, the way a runner appends them). At each of 10, 1,000 and
10,000 events it prints: ``append``, the median time of the 20 appends that brought the
history to that size; ``get``, the median of 5 full ``get_session`` calls; ``get 20``,
the median of 20 ``get_session(config=GetSessionConfig(num_recent_events=20))``. The
inboxlog service holds a session it wrote (it is its one writer), so its reads come from
what it keeps; ``get`` and ``get 20`` of a session it does not hold (another worker's,
read from the store) are printed as ``cold get`` and ``cold get 20`` (medians of 5).

Services: inboxlog on a JSONL directory (``sync``: fsync before each append returns) and
on PostgreSQL (``sync``), ADK's ``DatabaseSessionService`` on SQLite through aiosqlite
(a file in a temporary directory, SQLite's defaults) and on PostgreSQL through asyncpg.
PostgreSQL ones run in schemas (inboxlog) or databases' tables of their own on the
server at ``--url`` (default: INBOXLOG_TEST_PG), dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from google.adk.events.event import Event
from google.adk.sessions import DatabaseSessionService
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.genai import types

import inboxlog
from inboxlog.integrations.adk import InboxlogSessionService

WORDS = "the quick brown fox jumps over the lazy dog while the agent thinks " * 4
SIZES = (10, 1_000, 10_000)


def event(i: int) -> Event:
    role, author = ("user", "user") if i % 2 == 0 else ("model", "assistant")
    return Event(
        author=author,
        invocation_id=f"inv-{i // 2}",
        content=types.Content(role=role, parts=[types.Part(text=f"event {i}: {WORDS}")]),
    )


async def median(fn: Callable[[], Awaitable[Any]], times: int) -> float:
    took = []
    for _ in range(times):
        start = time.perf_counter()
        await fn()
        took.append(time.perf_counter() - start)
    return statistics.median(took)


async def measure(
    name: str, service: BaseSessionService, total: int, cold: BaseSessionService | None
) -> list[str]:
    rows = []
    session = await service.create_session(app_name="bench", user_id="u")
    ids = {"app_name": "bench", "user_id": "u", "session_id": session.id}
    appended: list[float] = []
    for i in range(total):
        start = time.perf_counter()
        await service.append_event(session, event(i))
        appended.append(time.perf_counter() - start)
        size = i + 1
        if size not in SIZES:
            continue
        recent = GetSessionConfig(num_recent_events=20)

        async def full(s: BaseSessionService = service) -> Any:
            return await s.get_session(**ids)

        async def last20(s: BaseSessionService = service, recent: GetSessionConfig = recent) -> Any:
            return await s.get_session(**ids, config=recent)

        cells = [
            f"append {statistics.median(appended[-20:]) * 1e3:8.3f} ms",
            f"get {await median(full, 5) * 1e3:9.3f} ms",
            f"get 20 {await median(last20, 20) * 1e3:8.3f} ms",
        ]
        if cold is not None:
            cells += [
                f"cold get {await median(lambda: full(cold), 5) * 1e3:9.3f} ms",
                f"cold get 20 {await median(lambda: last20(cold), 5) * 1e3:8.3f} ms",
            ]
        rows.append(f"{name:<28} {size:>6} events  " + "  ".join(cells))
        print(rows[-1], flush=True)
    return rows


def sql(url: str, command: str) -> None:
    subprocess.run(["psql", url, "-X", "-q", "-c", command], check=True, capture_output=True)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=SIZES[-1])
    parser.add_argument(
        "--url",
        default=os.environ.get("INBOXLOG_TEST_PG") or "postgresql://postgres@127.0.0.1:5432/test",
    )
    parser.add_argument("--no-postgres", action="store_true")
    args = parser.parse_args()
    tmp = tempfile.mkdtemp()

    store = inboxlog.Store(os.path.join(tmp, "logs"), durability="sync")
    await measure(
        "inboxlog JSONL (sync)",
        InboxlogSessionService(store),
        args.events,
        InboxlogSessionService(store),
    )
    sqlite = DatabaseSessionService(db_url=f"sqlite+aiosqlite:///{tmp}/adk.db")
    await measure("ADK database, SQLite", sqlite, args.events, None)
    await sqlite.close()
    if args.no_postgres:
        return

    schema = f"bench_adk_{uuid.uuid4().hex[:12]}"
    try:
        pg = inboxlog.Store.postgres(args.url, schema=schema, durability="sync")
        await measure(
            "inboxlog PostgreSQL (sync)",
            InboxlogSessionService(pg),
            args.events,
            InboxlogSessionService(pg),
        )
    finally:
        sql(args.url, f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    database = f"bench_adk_{uuid.uuid4().hex[:12]}"
    sql(args.url, f'CREATE DATABASE "{database}"')
    try:
        url = args.url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://")
        adk_pg = DatabaseSessionService(db_url=f"{url}/{database}")
        await measure("ADK database, PostgreSQL", adk_pg, args.events, None)
        await adk_pg.close()
    finally:
        sql(args.url, f'DROP DATABASE IF EXISTS "{database}"')


if __name__ == "__main__":
    asyncio.run(main())
