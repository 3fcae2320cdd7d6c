"""LangGraph checkpoints on PostgreSQL: ``InboxlogSaver.put`` beside
``langgraph-checkpoint-postgres``'s ``PostgresSaver.put``, in one run.

    .venv/bin/pip install "langgraph-checkpoint-postgres>=3,<4" "psycopg[binary]>=3.2,<4"
    .venv/bin/python python/bench/bench_langgraph.py [--steps 500] [--url URL]

One thread, ``--steps`` checkpoints of an agent's state: a message list that grows by
one message per step (alternately a user and an assistant message of about 300
characters) and a step counter, each checkpoint the child of the one before, as
LangGraph writes them. Both savers use LangGraph's default serializer. Two pairs of
rows: ``sync``, every put committed and flushed before it returns (``PostgresSaver``:
autocommit; ``InboxlogSaver``: the store's ``sync`` durability), and ``async``, every
put committed with ``synchronous_commit = off`` (``PostgresSaver``: set on its
connection; ``InboxlogSaver``: the store's ``batched`` durability), where the server's
WAL flush no longer sets the pace. Each runs in a schema of its own on the server at ``--url``
(default: INBOXLOG_TEST_PG), dropped afterwards. Prints the time per put around step 10
(median of steps 1-20), around the last step (median of its 20 last) and on average.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.postgres import PostgresSaver

import inboxlog
from inboxlog.integrations.langgraph import InboxlogSaver

WORDS = "the quick brown fox jumps over the lazy dog while the agent thinks " * 4


def message(i: int) -> BaseMessage:
    text = f"message {i}: {WORDS}"
    if i % 2 == 0:
        return HumanMessage(content=text, id=str(uuid.uuid4()))
    return AIMessage(content=text, id=str(uuid.uuid4()))


def run(saver: BaseCheckpointSaver[Any], steps: int, thread: str) -> list[float]:
    """Puts ``steps`` checkpoints; returns the seconds each put took."""
    messages: list[BaseMessage] = []
    version: Any = None
    config: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    times = []
    for step in range(steps):
        messages = [*messages, message(step)]  # a new list, as add_messages makes
        version = saver.get_next_version(version, None)
        checkpoint: Any = {
            "v": 4,
            "id": str(uuid6(clock_seq=step)),
            "ts": "2026-12-01T00:00:00+00:00",
            "channel_values": {"messages": messages, "step": step},
            "channel_versions": {"messages": version, "step": version},
            "versions_seen": {"model": {"messages": version}},
            "updated_channels": ["messages", "step"],
        }
        metadata: Any = {"source": "loop", "step": step, "parents": {}}
        new_versions = {"messages": version, "step": version}
        start = time.perf_counter()
        config = saver.put(config, checkpoint, metadata, new_versions)
        times.append(time.perf_counter() - start)
    # Both read back the same state.
    tup = saver.get_tuple(config)
    assert tup is not None and tup.checkpoint["channel_values"]["messages"] == messages
    return times


def in_schema(
    url: str, schema: str, body: Callable[[str], list[float]], asynchronous: bool = False
) -> list[float]:
    """Runs ``body(url of the schema)`` with a schema of its own, dropped afterwards;
    ``asynchronous``: the URL's sessions commit with ``synchronous_commit = off``."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    try:
        sep = "&" if "?" in url else "?"
        options = f"-csearch_path%3D{schema}"
        if asynchronous:
            options += "%20-csynchronous_commit%3Doff"
        return body(f"{url}{sep}options={options}")
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def postgres_saver(url: str, steps: int) -> list[float]:
    with PostgresSaver.from_conn_string(url) as saver:
        saver.setup()
        return run(saver, steps, "bench")


def inboxlog_saver(url: str, schema: str, steps: int, durability: str) -> list[float]:
    store = inboxlog.Store.postgres(url, schema=schema, durability=durability)
    with InboxlogSaver(store) as saver:
        times = run(saver, steps, "bench")
        # Batched puts are durable after the barrier: the last put pays for it.
        start = time.perf_counter()
        saver.session("bench").flush()
        times[-1] += time.perf_counter() - start
        return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=500)
    default_url = os.environ.get("INBOXLOG_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--url", default=default_url)
    args = parser.parse_args()
    steps = args.steps
    results: dict[str, list[float]] = {}
    for commit in ("sync", "async"):
        tag = f"{commit}_{uuid.uuid4().hex[:8]}"
        theirs, ours = f"bench_lg_pg_{tag}", f"bench_lg_ib_{tag}"
        results[f"PostgresSaver {commit}"] = in_schema(
            args.url, theirs, lambda u: postgres_saver(u, steps), commit == "async"
        )
        durability = "sync" if commit == "sync" else "batched"
        results[f"InboxlogSaver {commit}"] = in_schema(
            args.url,
            ours,
            lambda _, schema=ours, mode=durability: inboxlog_saver(args.url, schema, steps, mode),
        )
    window = min(20, steps)
    print(f"{steps} checkpoints of a growing message list, one thread, PostgreSQL; per put:")
    print(f"{'':22} {'steps 1-20':>12} {'last 20':>12} {'mean':>12} {'last/first':>11}")
    for name, times in results.items():
        first = statistics.median(times[:window]) * 1e3
        last = statistics.median(times[-window:]) * 1e3
        mean = statistics.fmean(times) * 1e3
        print(f"{name:22} {first:9.2f} ms {last:9.2f} ms {mean:9.2f} ms {last / first:10.2f}x")
    for commit in ("sync", "async"):
        base = statistics.median(results[f"PostgresSaver {commit}"][-window:])
        ours_last = statistics.median(results[f"InboxlogSaver {commit}"][-window:])
        print(f"{commit} commits: InboxlogSaver.put is {base / ours_last:.1f}x faster at the end")


if __name__ == "__main__":
    main()
