"""What a new worker pays to resume a session, beside the peer each integration is
compared with, in one run (issue #51).

    pip install "langgraph-checkpoint-postgres>=3,<4" "psycopg-pool>=3.2"
    .venv/bin/python python/bench/bench_resume.py [--runs 3] [--repeat 7]
        [--sizes 100,10000,100000] [--pydantic-sizes 100,10000] [--adk-sizes 100,10000]
        [--checkpoints 500] [--only openai,langgraph,pydantic,adk] [--url URL]
    .venv/bin/python python/bench/bench_resume.py --langgraph-parts

Every pickup is a new handle, as a worker that has just started pays it: no pool, no
open connection, no prepared statement, nothing kept in memory (the files are in the page
cache, and the Python modules imported). Cases:

- ``openai``: ``InboxlogSession(inboxlog.Store(dir), id)`` and ``get_items(limit=20)`` of
  a JSONL session whose items were written by ``add_items`` in batches of 100 (durability
  ``none``), against a new ``SQLiteSession(id, file)`` and its ``get_items(limit=20)`` of
  the same items, written the same way.
- ``langgraph``: a new ``inboxlog.Store.postgres`` and ``InboxlogSaver`` and its first
  ``get_tuple`` of a thread of ``--checkpoints`` checkpoints, against
  ``PostgresSaver.from_conn_string`` (a new connection) and its first ``get_tuple``. Each
  checkpoint updates a step counter and a short note. Timed until the tuple is returned;
  closing (the store dropped, the connection closed) is not timed.
- ``pydantic``: a new ``inboxlog.Store(dir)`` and the current history
  (``fold_messages(store.read(id, history_start(store, id)))``, what the capability reads
  on a worker that holds none of it) of a session whose history was imported (a run given
  ``message_history=``, then one request and response), against Pydantic AI's own way of
  keeping one: the bytes of ``result.all_messages_json()`` read from a file and loaded with
  ``ModelMessagesTypeAdapter.validate_json``.
- ``adk``: a new ``InboxlogSessionService(inboxlog.Store(dir))`` and
  ``get_session(config=GetSessionConfig(num_recent_events=20))`` of a session grown by
  ``append_event``, against a new ``DatabaseSessionService`` on SQLite (aiosqlite) and the
  same call, on the same events.

Each run times every case at every size (the median of ``--repeat`` pickups after one
untimed pickup, the two sides taking turns); the table gives the median over the runs and
the spread (min-max), and ``peer/ours`` per run (above 1: inboxlog is faster). PostgreSQL
runs in schemas of its own on the server at ``--url`` (default: INBOXLOG_TEST_PG),
dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import inboxlog

SESSION = "resume"
LIMIT = 20
BATCH = 100
WORDS = "the quick brown fox jumps over the lazy dog " * 2

Pickup = Callable[[], Awaitable[object]]


def item(i: int) -> dict[str, Any]:
    role = "user" if i % 2 == 0 else "assistant"
    return {"role": role, "content": f"item {i}: {WORDS}"}


async def median_ms(pickup: Pickup, repeat: int) -> float:
    """The median wall time of ``pickup`` in ms, after one untimed call."""
    await pickup()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        await pickup()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def sync(fn: Callable[[], object]) -> Pickup:
    async def run() -> object:
        return fn()

    return run


# --- OpenAI Agents -----------------------------------------------------------------------


async def openai_case(root: Path, n: int) -> tuple[Pickup, Pickup]:
    from agents import SQLiteSession

    from inboxlog.integrations.openai_agents import InboxlogSession

    directory, db = root / f"openai-{n}", root / f"openai-{n}.sqlite"
    items: Any = [item(i) for i in range(n)]
    with InboxlogSession(inboxlog.Store(directory, "none"), SESSION) as ours:
        for at in range(0, n, BATCH):
            await ours.add_items(items[at : at + BATCH])
    theirs = SQLiteSession(SESSION, db)
    for at in range(0, n, BATCH):
        await theirs.add_items(items[at : at + BATCH])
    theirs.close()
    want = items[-LIMIT:]

    async def inboxlog_pickup() -> object:
        with InboxlogSession(inboxlog.Store(directory), SESSION) as session:
            got = await session.get_items(limit=LIMIT)
        assert got == want
        return got

    async def peer_pickup() -> object:
        session = SQLiteSession(SESSION, db)
        try:
            got = await session.get_items(limit=LIMIT)
        finally:
            session.close()
        assert got == want
        return got

    return inboxlog_pickup, peer_pickup


# --- LangGraph ---------------------------------------------------------------------------


def checkpoints(saver: Any, n: int, thread: str) -> None:
    """Writes ``n`` checkpoints of a small state to ``thread``."""
    from langgraph.checkpoint.base.id import uuid6

    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    version: Any = None
    for step in range(n):
        version = saver.get_next_version(version, None)
        checkpoint: Any = {
            "v": 4,
            "id": str(uuid6(clock_seq=step)),
            "ts": "2026-12-01T00:00:00+00:00",
            "channel_values": {"step": step, "note": f"step {step}: {WORDS}"},
            "channel_versions": {"step": version, "note": version},
            "versions_seen": {"model": {"step": version}},
            "updated_channels": ["step", "note"],
        }
        metadata: Any = {"source": "loop", "step": step, "parents": {}}
        config = saver.put(config, checkpoint, metadata, {"step": version, "note": version})


class Postgres:
    """Schemas of this run's own on the server, dropped by :meth:`drop`."""

    def __init__(self, url: str) -> None:
        self.url, self.schemas = url, list[str]()

    def schema(self) -> str:
        name = f"bench_resume_{uuid.uuid4().hex[:10]}"
        self.schemas.append(name)
        return name

    def drop(self) -> None:
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as admin:
            for name in self.schemas:
                admin.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


def langgraph_case(pg: Postgres, n: int) -> tuple[Pickup, Pickup]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    from inboxlog.integrations.langgraph import InboxlogSaver

    ours_schema, theirs_schema = pg.schema(), pg.schema()
    thread = f"thread-{n}"
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    with psycopg.connect(pg.url, autocommit=True) as admin:
        admin.execute(f"CREATE SCHEMA {theirs_schema}")
    theirs_url = f"{pg.url}?options=-csearch_path%3D{theirs_schema}"
    with PostgresSaver.from_conn_string(theirs_url) as saver:
        saver.setup()
        checkpoints(saver, n, thread)
    store = inboxlog.Store.postgres(pg.url, schema=ours_schema, durability="none")
    with InboxlogSaver(store) as writer:
        checkpoints(writer, n, thread)
        writer.session(thread).flush()
    del store

    def check(got: Any) -> None:
        assert got is not None and got.checkpoint["channel_values"]["step"] == n - 1

    def inboxlog_pickup() -> object:
        # Timed until the tuple is returned; the store's connections close when it is
        # dropped, after the clock stopped.
        took = time.perf_counter()
        store = inboxlog.Store.postgres(pg.url, schema=ours_schema)
        with InboxlogSaver(store) as saver:
            got = saver.get_tuple(config)
            took = time.perf_counter() - took
        del store
        check(got)
        return took

    def peer_pickup() -> object:
        took = time.perf_counter()
        with PostgresSaver.from_conn_string(theirs_url) as saver:
            got = saver.get_tuple(config)
            took = time.perf_counter() - took
        check(got)
        return took

    return sync(inboxlog_pickup), sync(peer_pickup)


def langgraph_parts(pg: Postgres, n: int, repeat: int) -> None:
    """Where the ``langgraph`` case's time goes (``--langgraph-parts``): the store's
    connection, its first ``tail`` (the statement prepared, then run, in a backend that
    has just started) and a second one, the saver's Python fold; beside them the same
    steps through psycopg: a connection with and without TLS (the server offers it, so
    ``sslmode=prefer``, both clients' default, takes it), a round trip, the first
    statement on the tables, the tail's statement prepared and run, then run again."""
    import psycopg

    from inboxlog.integrations.langgraph import InboxlogSaver
    from inboxlog.integrations.langgraph import saver as module

    schema, thread = pg.schema(), f"thread-{n}"
    store = inboxlog.Store.postgres(pg.url, schema=schema, durability="none")
    with InboxlogSaver(store) as writer:
        checkpoints(writer, n, thread)
        writer.session(thread).flush()
    del store
    version: Any = f"SELECT version FROM {schema}.schema_version"
    tail: Any = (
        f"SELECT NULL::bigint, NULL::text, header, NULL::integer, next_seq "
        f"FROM {schema}.sessions WHERE id = %(id)s UNION ALL "
        f"(SELECT seq, type, line, NULL::integer, NULL::bigint FROM {schema}.events "
        f"WHERE session = %(id)s AND seq < %(b)s::bigint AND seq >= LEAST(%(b)s::bigint, "
        f"(SELECT next_seq FROM {schema}.sessions WHERE id = %(id)s)) - %(n)s::bigint "
        f"ORDER BY seq DESC LIMIT %(n)s::bigint)"
    )
    bound = {"id": thread, "n": module.RECENT, "b": 2**62}
    parts: dict[str, list[float]] = {}

    @contextlib.contextmanager
    def clock(name: str) -> Iterator[None]:
        start = time.perf_counter()
        yield
        parts.setdefault(name, []).append((time.perf_counter() - start) * 1000)

    for _ in range(repeat):
        with clock("inboxlog: Store.postgres (connect, set up, check)"):
            store = inboxlog.Store.postgres(pg.url, schema=schema)
        with clock("inboxlog: first tail(16): prepare + run"):
            events = store.tail(thread, module.RECENT)
        with clock("inboxlog: second tail(16): run"):
            store.tail(thread, module.RECENT)
        saver = InboxlogSaver(store)
        with clock("inboxlog: the saver's fold into a tuple"):
            folded = module._Thread(None)
            folded.fold_events(events)
            assert saver._answer(folded, thread, "", None) is not None
        del saver, store
        with clock("psycopg: connect, no TLS"):
            conn = psycopg.connect(pg.url, sslmode="disable", autocommit=True)
        conn.close()
        with clock("psycopg: connect, TLS (prefer)"):
            conn = psycopg.connect(pg.url, autocommit=True)
        with clock("psycopg: a round trip (SELECT 1)"):
            conn.execute("SELECT 1").fetchall()
        with clock("psycopg: first statement on the tables"):
            conn.execute(version).fetchall()
        with clock("psycopg: the tail, prepared + run"):
            conn.execute(tail, bound, prepare=True).fetchall()
        with clock("psycopg: the tail, run"):
            conn.execute(tail, bound, prepare=True).fetchall()
        conn.close()
    for name, took in parts.items():
        print(f"{name:<52} {spread(took)} ms")


# --- Pydantic AI -------------------------------------------------------------------------


async def pydantic_case(root: Path, n: int) -> tuple[Pickup, Pickup]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        TextPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from inboxlog.integrations.pydantic_ai import (
        InboxlogCapability,
        fold_messages,
        history_start,
    )

    def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart(f"answer {len(messages)}: {WORDS}")])

    imported: list[ModelMessage] = []
    for i in range(0, n - 2, 2):
        imported.append(ModelRequest(parts=[UserPromptPart(f"question {i}: {WORDS}")]))
        imported.append(ModelResponse(parts=[TextPart(f"answer {i}: {WORDS}")]))
    directory = root / f"pydantic-{n}"
    capability = InboxlogCapability(inboxlog.Store(directory, "none"))
    agent = Agent(FunctionModel(answer), capabilities=[capability])
    result = await agent.run("the last question", message_history=imported, conversation_id=SESSION)
    file = root / f"pydantic-{n}.json"
    file.write_bytes(result.all_messages_json())
    want = len(result.all_messages())
    assert want == n, (want, n)

    def inboxlog_pickup() -> object:
        store = inboxlog.Store(directory)
        got = fold_messages(store.read(SESSION, history_start(store, SESSION)))
        assert len(got) == want
        return got

    def peer_pickup() -> object:
        got = ModelMessagesTypeAdapter.validate_json(file.read_bytes())
        assert len(got) == want
        return got

    return sync(inboxlog_pickup), sync(peer_pickup)


# --- Google ADK --------------------------------------------------------------------------


async def adk_case(root: Path, n: int) -> tuple[Pickup, Pickup]:
    from google.adk.events.event import Event
    from google.adk.sessions import DatabaseSessionService
    from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
    from google.genai import types

    from inboxlog.integrations.adk import InboxlogSessionService

    def event(i: int) -> Event:
        role, author = ("user", "user") if i % 2 == 0 else ("model", "assistant")
        return Event(
            author=author,
            invocation_id=f"inv-{i // 2}",
            content=types.Content(role=role, parts=[types.Part(text=f"event {i}: {WORDS}")]),
        )

    directory, db = root / f"adk-{n}", f"sqlite+aiosqlite:///{root}/adk-{n}.db"
    written: list[BaseSessionService] = [
        InboxlogSessionService(inboxlog.Store(directory, "none")),
        DatabaseSessionService(db_url=db),
    ]
    ids: dict[str, Any] = {"app_name": "bench", "user_id": "u", "session_id": SESSION}
    for service in written:
        session = await service.create_session(**ids)
        for i in range(n):
            await service.append_event(session, event(i))
    for service in written:  # the writer lets the session go: its log is synced
        await service.close()  # type: ignore[attr-defined]
    del written
    recent = GetSessionConfig(num_recent_events=LIMIT)

    def check(got: Any) -> None:
        assert got is not None and len(got.events) == min(n, LIMIT)
        assert got.events[-1].content.parts[0].text.startswith(f"event {n - 1}:")

    async def inboxlog_pickup() -> object:
        service = InboxlogSessionService(inboxlog.Store(directory))
        got = await service.get_session(**ids, config=recent)
        check(got)
        return got

    async def peer_pickup() -> object:
        service = DatabaseSessionService(db_url=db)
        try:
            got = await service.get_session(**ids, config=recent)
        finally:
            await service.close()
        check(got)
        return got

    return inboxlog_pickup, peer_pickup


# --- The run -----------------------------------------------------------------------------


def spread(values: list[float], digits: int = 2) -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"


async def timed(pickup: Pickup, repeat: int) -> float:
    """``median_ms``, or, for a pickup that returns its own time (seconds), the median of
    those."""
    first = await pickup()
    if not isinstance(first, float):
        return await median_ms(pickup, repeat)
    took = [await pickup() for _ in range(repeat)]
    return statistics.median(float(t) for t in took if isinstance(t, float)) * 1000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--sizes", default="100,10000,100000")
    parser.add_argument("--pydantic-sizes", default="100,10000")
    parser.add_argument("--adk-sizes", default="100,10000")
    parser.add_argument("--checkpoints", type=int, default=500)
    parser.add_argument("--only", default="openai,langgraph,pydantic,adk")
    parser.add_argument("--langgraph-parts", action="store_true")
    parser.add_argument(
        "--url",
        default=os.environ.get("INBOXLOG_TEST_PG") or "postgresql://postgres@127.0.0.1:5432/test",
    )
    args = parser.parse_args()
    only = set(args.only.split(","))
    sizes = [int(s) for s in args.sizes.split(",")]
    cases: list[tuple[str, str, int, Pickup, Pickup]] = []
    pg = Postgres(args.url)
    if args.langgraph_parts:
        try:
            langgraph_parts(pg, args.checkpoints, 5 * args.repeat)
        finally:
            pg.drop()
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        try:
            started = time.perf_counter()
            if "openai" in only:
                for n in sizes:
                    cases.append(
                        ("openai get_items(20)", "SQLiteSession", n, *await openai_case(root, n))
                    )
            if "langgraph" in only:
                n = args.checkpoints
                ours, peer = langgraph_case(pg, n)
                cases.append(("langgraph first get_tuple", "PostgresSaver", n, ours, peer))
            if "pydantic" in only:
                for n in (int(s) for s in args.pydantic_sizes.split(",")):
                    ours, peer = await pydantic_case(root, n)
                    cases.append(("pydantic current history", "validate_json", n, ours, peer))
            if "adk" in only:
                for n in (int(s) for s in args.adk_sizes.split(",")):
                    ours, peer = await adk_case(root, n)
                    cases.append(
                        ("adk get_session(recent 20)", "DatabaseSessionService", n, ours, peer)
                    )
            print(f"written in {time.perf_counter() - started:.1f} s", flush=True)
            gc.collect()  # what writing left is not a new worker's
            results: dict[int, tuple[list[float], list[float]]] = {
                i: ([], []) for i in range(len(cases))
            }
            for run in range(args.runs):
                for i, (_, _, _, ours, peer) in enumerate(cases):
                    results[i][0].append(await timed(ours, args.repeat))
                    results[i][1].append(await timed(peer, args.repeat))
                print(f"run {run + 1} of {args.runs} done", flush=True)
        finally:
            pg.drop()
    print()
    print(
        f"{'case':<28} {'size':>7} {'inboxlog ms':>20} {'peer':<22} {'peer ms':>20} "
        f"{'peer/ours':>18}"
    )
    for i, (case, peer_name, n, _, _) in enumerate(cases):
        ours_ms, peer_ms = results[i]
        ratios = [p / o for o, p in zip(ours_ms, peer_ms, strict=True)]
        print(
            f"{case:<28} {n:>7} {spread(ours_ms):>20} {peer_name:<22} {spread(peer_ms):>20} "
            f"{spread(ratios):>18}"
        )
    print("\nlargest size / smallest size, inboxlog (median of runs):")
    for case in dict.fromkeys(c[0] for c in cases):
        mine = [
            (c[2], statistics.median(results[i][0])) for i, c in enumerate(cases) if c[0] == case
        ]
        if len(mine) > 1:
            print(f"  {case:<28} {mine[-1][1] / mine[0][1]:5.2f}x ({mine[0][0]} -> {mine[-1][0]})")


if __name__ == "__main__":
    asyncio.run(main())
