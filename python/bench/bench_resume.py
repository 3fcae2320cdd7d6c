"""What a new worker pays to pick a session up, beside what users compare with, in one run
(issue #41): open a session written by another worker and read what the framework asks
for, at several history lengths.

    .venv/bin/pip install "langgraph-checkpoint-postgres>=3,<4" "psycopg[binary]>=3.2,<4"
    .venv/bin/python python/bench/bench_resume.py [--sizes 10,1000,10000,100000]
        [--repeat 7] [--url URL] [--no-postgres] [--langgraph-max 10000]

Cases, each at every size (the history's items, checkpoints or messages):
- ``openai``: a new store handle, ``InboxlogSession(store, id)`` and
  ``get_items(limit=20)`` of a JSONL session of that many items (one item per
  ``openai-agents/items`` event), against ``SQLiteSession(id, file)`` and its
  ``get_items(limit=20)`` on a file holding the same items.
- ``langgraph``: a new ``InboxlogSaver`` and its first ``get_tuple`` of a thread of that
  many checkpoints on PostgreSQL, against a new ``PostgresSaver`` and its first
  ``get_tuple``; each on what a worker keeps between pickups (the store's pool, the
  saver's connection). Each checkpoint updates a step counter and one short note, so that
  the peer's stored bytes grow linearly too (sizes above ``--langgraph-max`` are skipped:
  writing them takes minutes).
- ``pydantic``: a new store handle, ``store.open`` and the Pydantic AI history
  (``fold_messages(session.events())``) of a session of that many messages, against
  Pydantic AI's own way of keeping one: the bytes of ``result.all_messages_json()`` in a
  file, read and loaded with ``ModelMessagesTypeAdapter.validate_json``; both also with
  Python's cyclic garbage collector off, to show what its passes cost.
- ``open``: a bare ``store.open`` and ``close`` of the ``openai`` case's log (JSONL, a new
  store handle each time), and of a PostgreSQL session of that many events (through the
  worker's store).

Every log is written first with durability ``none`` (then closed, which syncs it), so the
writing is quick; each timing is the median of ``--repeat`` pickups, each by a new
handle, after one untimed pickup (the files are in the page cache, as on a worker that
runs many sessions). PostgreSQL runs in schemas of its own on the server at ``--url``
(default: INBOXLOG_TEST_PG), dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import statistics
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import inboxlog

SESSION = "resume"
LIMIT = 20
WORDS = "the quick brown fox jumps over the lazy dog " * 2


def item(i: int) -> dict[str, Any]:
    role = "user" if i % 2 == 0 else "assistant"
    return {"role": role, "content": f"item {i}: {WORDS}"}


def median_ms(pickup: Callable[[], object], repeat: int) -> float:
    """The median wall time of ``pickup`` in ms, after one untimed call."""
    pickup()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        pickup()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


# --- OpenAI Agents -----------------------------------------------------------------------


def openai_case(root: Path, n: int, repeat: int) -> tuple[float, float]:
    from agents import SQLiteSession

    from inboxlog.integrations.openai_agents import ITEMS, InboxlogSession

    directory = root / f"openai-{n}"
    with inboxlog.Store(directory, "none").create(SESSION) as session:
        for i in range(n):
            session.append(ITEMS, {"items": [item(i)]})
    db = root / f"openai-{n}.sqlite"
    theirs = SQLiteSession(SESSION, db)
    asyncio.run(theirs.add_items([item(i) for i in range(n)]))  # type: ignore[list-item]
    theirs.close()

    def ours() -> object:
        with InboxlogSession(inboxlog.Store(directory), SESSION) as s:
            got = asyncio.run(s.get_items(limit=LIMIT))
        assert len(got) == min(n, LIMIT)
        return got

    def peer() -> object:
        s = SQLiteSession(SESSION, db)
        got = asyncio.run(s.get_items(limit=LIMIT))
        s.close()
        assert len(got) == min(n, LIMIT)
        return got

    return median_ms(ours, repeat), median_ms(peer, repeat)


# --- LangGraph ---------------------------------------------------------------------------


def checkpoints(saver: Any, n: int, thread: str) -> Any:
    """Writes ``n`` checkpoints of a small state to ``thread``; returns the last config."""
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
    return config


def langgraph_case(url: str, n: int, repeat: int) -> tuple[float, float]:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    from inboxlog.integrations.langgraph import InboxlogSaver

    ours_schema, theirs_schema = (f"bench_resume_{uuid.uuid4().hex[:10]}" for _ in range(2))
    thread = f"thread-{n}"
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    admin = psycopg.connect(url, autocommit=True)
    try:
        admin.execute(f"CREATE SCHEMA {theirs_schema}")
        theirs_url = f"{url}?options=-csearch_path%3D{theirs_schema}"
        with PostgresSaver.from_conn_string(theirs_url) as saver:
            saver.setup()
            checkpoints(saver, n, thread)
        store = inboxlog.Store.postgres(url, schema=ours_schema, durability="none")
        with InboxlogSaver(store) as saver:
            checkpoints(saver, n, thread)
            saver.session(thread).flush()

        # A worker keeps its store (a pool) or its connection; a pickup makes a new saver.
        worker_store = inboxlog.Store.postgres(url, schema=ours_schema)
        conn = psycopg.connect(theirs_url, autocommit=True, prepare_threshold=0)

        def ours() -> object:
            with InboxlogSaver(worker_store) as saver:
                got = saver.get_tuple(config)
            assert got is not None and got.checkpoint["channel_values"]["step"] == n - 1
            return got

        def peer() -> object:
            got = PostgresSaver(conn).get_tuple(config)  # type: ignore[arg-type]
            assert got is not None and got.checkpoint["channel_values"]["step"] == n - 1
            return got

        try:
            return median_ms(ours, repeat), median_ms(peer, repeat)
        finally:
            conn.close()
    finally:
        for schema in (ours_schema, theirs_schema):
            admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        admin.close()


# --- Pydantic AI and bare opens ----------------------------------------------------------


def pydantic_case(root: Path, n: int, repeat: int) -> tuple[float, float, float, float]:
    from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelRequest, UserPromptPart

    from inboxlog.integrations.pydantic_ai import MESSAGES, fold_messages

    directory = root / f"pydantic-{n}"
    one = ModelMessagesTypeAdapter.dump_python(
        [ModelRequest(parts=[UserPromptPart(WORDS)])], mode="json"
    )
    with inboxlog.Store(directory, "none").create(SESSION) as session:
        for _ in range(n):
            session.append(MESSAGES, {"messages": one})

    file = root / f"pydantic-{n}.json"
    file.write_bytes(
        ModelMessagesTypeAdapter.dump_json(ModelMessagesTypeAdapter.validate_python(one * n))
    )

    def ours() -> object:
        with inboxlog.Store(directory).open(SESSION) as session:
            got = fold_messages(session.events())
        assert len(got) == n
        return got

    def peer() -> object:
        got = ModelMessagesTypeAdapter.validate_json(file.read_bytes())
        assert len(got) == n
        return got

    def without_collector(pickup: Callable[[], object]) -> Callable[[], object]:
        def run() -> object:
            gc.disable()
            try:
                return pickup()
            finally:
                gc.enable()

        return run

    return (
        median_ms(ours, repeat),
        median_ms(peer, repeat),
        median_ms(without_collector(ours), repeat),
        median_ms(without_collector(peer), repeat),
    )


def open_case(store: Callable[[], inboxlog.Store], repeat: int) -> float:
    def ours() -> object:
        with store().open(SESSION) as session:
            return session.last_seq

    return median_ms(ours, repeat)


def postgres_log(url: str, schema: str, n: int) -> None:
    store = inboxlog.Store.postgres(url, schema=schema, durability="none")
    with store.create(SESSION) as session:
        for i in range(n):
            session.append("bench/item", item(i))
        session.flush()


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


# --- The run -----------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="10,1000,10000,100000")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--langgraph-max", type=int, default=10_000)
    parser.add_argument("--no-postgres", action="store_true")
    parser.add_argument(
        "--url",
        default=os.environ.get("INBOXLOG_TEST_PG") or "postgresql://postgres@127.0.0.1:5432/test",
    )
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    rows: list[tuple[str, int, float, float | None]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for n in sizes:
            ours, peer = openai_case(root, n, args.repeat)
            rows.append(("openai get_items(20) | SQLiteSession", n, ours, peer))
            ours, peer, ours_no_gc, peer_no_gc = pydantic_case(root, n, args.repeat)
            rows.append(("pydantic open + history | validate_json", n, ours, peer))
            rows.append(("pydantic, cyclic GC off | validate_json", n, ours_no_gc, peer_no_gc))
            directory = root / f"openai-{n}"
            jsonl = open_case(lambda d=directory: inboxlog.Store(d), args.repeat)
            rows.append(("store.open, JSONL", n, jsonl, None))
            if args.no_postgres:
                continue
            if n <= args.langgraph_max:
                ours, peer = langgraph_case(args.url, n, args.repeat)
                rows.append(("langgraph get_tuple | PostgresSaver", n, ours, peer))
            schema = f"bench_resume_{uuid.uuid4().hex[:10]}"
            try:
                postgres_log(args.url, schema, n)
                worker_store = inboxlog.Store.postgres(args.url, schema=schema)
                pg = open_case(lambda s=worker_store: s, args.repeat)
                rows.append(("store.open, PostgreSQL", n, pg, None))
            finally:
                drop_schema(args.url, schema)
    print(f"{'case':<40} {'items':>8} {'inboxlog ms':>12} {'peer ms':>9} {'peer/ours':>9}")
    for case, n, ours, peer in sorted(rows, key=lambda r: (r[0], r[1])):
        theirs = f"{peer:9.2f}" if peer is not None else f"{'':>9}"
        ratio = f"{peer / ours:8.1f}x" if peer is not None else ""
        print(f"{case:<40} {n:>8} {ours:12.2f} {theirs} {ratio}")
    print("\nflatness (largest size / smallest size, inboxlog):")
    for case in sorted({r[0] for r in rows}):
        mine = sorted((r[1], r[2]) for r in rows if r[0] == case)
        if len(mine) > 1:
            print(f"  {case:<40} {mine[-1][1] / mine[0][1]:6.1f}x ({mine[0][0]} -> {mine[-1][0]})")


if __name__ == "__main__":
    main()
