"""How long a person's decision takes to reach the tool that waits for it (SPEC §17).

    .venv/bin/python -P python/bench/bench_approvals.py [--trials 40] [--poll-ms 5]
        [--pg postgresql://postgres@127.0.0.1:5432/test]

A worker process asks for an approval in a turn, parks it and waits in place, asking
``session.approvals_ready()`` (which takes posted decisions in) every ``--poll-ms``;
the bench's own process, another process, posts the decision with ``store.decide``.
The figure is from just before ``decide`` is called to the moment the worker's tool
starts (``approvals_ready()`` true and ``resume_parked()`` returned), wall clock on one
machine, per trial, on a JSONL store (``sync``) and on PostgreSQL (a schema of its own,
dropped afterwards). The goal is p99 <= 250 ms.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
import uuid
from multiprocessing.connection import Connection

import inboxlog


def open_store(where: str, schema: str | None) -> inboxlog.Store:
    if where.startswith("postgres"):
        return inboxlog.Store.postgres(where, schema=schema, durability="sync")
    return inboxlog.Store(where, durability="sync")


def worker(where: str, schema: str | None, trials: int, poll: float, pipe: Connection) -> None:
    """Per trial: a turn, a call, an approval asked and parked; waits in place for the
    decision, then starts the tool and ends the turn. Sends each start time."""
    store = open_store(where, schema)
    with store.create(f"bench-{uuid.uuid4().hex[:8]}") as s:
        pipe.send(s.id)
        for n in range(trials):
            s.inbox.append("next-turn", {"id": f"u{n}", "role": "user", "content": "go"})
            turn = s.open_turn()
            p = s.propose_step()
            s.decide({"kind": "enter", "messages": p["messages"]})
            call = {"type": "tool-call", "id": f"c{n}", "name": "rm", "arguments": "{}"}
            message = {
                "id": f"m{n}",
                "role": "assistant",
                "content": [call],
                "source": {"kind": "model", "provider": "bench", "model": "m"},
            }
            s.append("assistant/message", {"turn": turn, "step": 1, "message": message})
            s.ask_approval(f"a{n}", "rm", f"c{n}")
            s.park()
            pipe.send(("parked", n))
            while not s.approvals_ready():
                time.sleep(poll)
            s.resume_parked()
            started = time.time()
            result = {
                "id": f"r{n}",
                "role": "user",
                "content": [{"type": "tool-result", "toolCallId": f"c{n}", "content": []}],
                "source": {"kind": "tool", "callId": f"c{n}"},
            }
            s.append("tool/result", {"turn": turn, "step": 1, "message": result})
            s.end_step_and_close("completed")
            pipe.send(("started", n, started))
    pipe.send(("done",))


def measure(where: str, schema: str | None, trials: int, poll: float) -> list[float]:
    parent, child = mp.Pipe()
    proc = mp.get_context("spawn").Process(target=worker, args=(where, schema, trials, poll, child))
    proc.start()
    store = open_store(where, schema)
    session_id = parent.recv()
    waits: list[float] = []
    for n in range(trials):
        assert parent.recv() == ("parked", n)
        time.sleep(0.02 + (n % 5) * 0.007)  # the person takes a moment
        posted = time.time()
        store.decide(session_id, f"a{n}", "allowed-once")
        kind, m, started = parent.recv()
        assert (kind, m) == ("started", n)
        waits.append((started - posted) * 1000)
    assert parent.recv() == ("done",)
    proc.join()
    return waits


def report(name: str, waits: list[float]) -> None:
    ordered = sorted(waits)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    print(
        f"{name:<10} n={len(waits):<4} p50 {statistics.median(waits):7.1f} ms"
        f"   p99 {p99:7.1f} ms   max {ordered[-1]:7.1f} ms"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=40)
    ap.add_argument("--poll-ms", type=float, default=5.0)
    ap.add_argument(
        "--pg",
        default=os.environ.get("INBOXLOG_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test"),
    )
    args = ap.parse_args()
    poll = args.poll_ms / 1000
    print(f"decision posted -> tool starts, polling every {args.poll_ms:g} ms")
    with tempfile.TemporaryDirectory() as root:
        report("jsonl", measure(root, None, args.trials, poll))
    schema = f"bench_approvals_{os.getpid()}"
    try:
        report("postgres", measure(args.pg, schema, args.trials, poll))
    except inboxlog.UnavailableError as e:
        print(f"postgres   skipped: {e}", file=sys.stderr)
    finally:
        drop(args.pg, schema)
    return 0


def drop(url: str, schema: str) -> None:
    """Drops the bench's schema (psycopg, a bench-only dependency of the venv)."""
    try:
        import psycopg
    except ImportError:
        return
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


if __name__ == "__main__":
    sys.exit(main())
