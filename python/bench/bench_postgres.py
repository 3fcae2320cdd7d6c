"""The PostgreSQL store at fleet scale through the wheel, beside bare psycopg clients, in
one run (issue #21).

    .venv/bin/python python/bench/bench_postgres.py [--quick] [--url URL]

(``psycopg[binary]`` comes with ``make venv``.) Four measurements, against the server at
``--url`` (default: INBOXLOG_TEST_PG), in schemas of their own dropped afterwards:

- acks/s of ``n`` threads on distinct sessions, ``n`` in ``--writers`` (1, 8, 32, 64):
  bare clients (``psycopg``, one connection per thread, a prepared one-row ``INSERT``
  in autocommit: the statement and its commit, into a table shaped like the store's
  ``events``), one ``Store.postgres`` in ``sync`` mode with its default connection
  bound (one session per thread, one event per ``append``) and in ``batched`` mode
  (durable events/s: ``flush()`` after every 1,000 appends). The three sides take
  turns, ``--rounds`` rounds of ``--seconds`` each; the table shows the backends each
  side held at its peak (``pg_stat_activity``, by application name);
- commit-to-follower latency: ``--lag-writers`` threads append in ``sync`` mode while a
  second store follows their sessions (``store.follow``, a thread per follower); from
  the instant ``append`` returned to the instant the follower yielded the event;
- opening ``--open-sessions`` sessions on one store, held open together: time and
  backends.

The server is shared: setting up a side stops, with a message, once the bench holds
more than ``--max-backends`` backends or leaves fewer than ``--leave-free`` connection
slots to others. ``--quick``: one round of 1 s per side (a smoke run).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import psycopg

import inboxlog

T = TypeVar("T")

PREFIX = "inboxlog_pybench_"
WATCHER = PREFIX + "watcher"
FLEET_SCHEMA = "inboxlog_pybench_fleet"
BARE_SCHEMA = "inboxlog_pybench_bare"
TYPE = "assistant/chunk"
# The payload of the Rust benchmarks (about 260 bytes as a stored line).
DATA: dict[str, Any] = {
    "text": 'Here is the next part of the answer, with "quotes", a tab\t and a newline\n, '
    "some accents (é, ü, ñ), a check ✓ and a clef 𝄞 to keep the parser honest. "
    "Lorem ipsum dolor.",
    "index": 42,
}
PER_FLUSH = 1000
POLL = 0.025
DRAIN = 10.0


def named(url: str, app: str) -> str:
    """``url`` with ``application_name`` set to ``app``."""
    return f"{url}{'&' if '?' in url else '?'}application_name={app}"


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"


class Stop(Exception):
    """A side could not run (over the budget, no room on the server, an error)."""


class Backends:
    """The peak backends per application name, and the guard of the server's slots."""

    def __init__(self, url: str, budget: int, leave_free: int) -> None:
        self.conn = psycopg.connect(named(url, WATCHER), autocommit=True)
        self.lock = threading.Lock()
        self.peaks: dict[str, int] = {}
        self.budget = budget
        self.leave_free = leave_free
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)
        self.thread.start()

    def _watch(self) -> None:
        while not self.stopped.is_set():
            # A missed sample; the next one may work.
            with contextlib.suppress(psycopg.Error):
                self.sample()
            self.stopped.wait(POLL)

    def close(self) -> None:
        self.stopped.set()
        self.thread.join()
        self.conn.close()

    def sample(self) -> tuple[int, int]:
        """Records the peaks; returns the bench's backends and the server's free slots."""
        with self.lock:
            rows = self.conn.execute(
                "SELECT coalesce(application_name, ''), count(*) FROM pg_stat_activity"
                " WHERE starts_with(application_name, %s) AND application_name <> %s"
                " GROUP BY 1",
                (PREFIX, WATCHER),
            ).fetchall()
            row = self.conn.execute(
                "SELECT current_setting('max_connections')::int"
                " - current_setting('superuser_reserved_connections')::int - count(*)"
                " FROM pg_stat_activity WHERE backend_type = 'client backend'"
            ).fetchone()
            for name, n in rows:
                self.peaks[name] = max(self.peaks.get(name, 0), n)
        free = int(row[0]) if row else 0
        return sum(n for _, n in rows), free

    def check(self, doing: str) -> None:
        total, free = self.sample()
        if total > self.budget:
            raise Stop(
                f"stopped {doing}: the bench holds {total} backends, over its budget of "
                f"{self.budget} (--max-backends)"
            )
        if free < self.leave_free:
            raise Stop(
                f"stopped {doing}: the server has {free} free connection slots left, fewer "
                f"than the {self.leave_free} the bench leaves to other users (--leave-free)"
            )

    def room_for(self, need: int, doing: str) -> None:
        _, free = self.sample()
        if free - need < self.leave_free:
            raise Stop(
                f"skipped {doing}: it needs {need} connections and the server has {free} "
                f"free slots, {self.leave_free} of which the bench leaves to others"
            )

    def peak(self, name: str) -> int:
        self.sample()
        return self.peaks.get(name, 0)


def race(
    workers: Sequence[Callable[[threading.Event], T]], seconds: float
) -> tuple[list[T], float]:
    """Runs each worker on a thread of its own, all released at once, until ``seconds``
    passed (each finishes the call it is in); returns their results and the time from
    the release until the last returned. The first worker error is raised."""
    barrier = threading.Barrier(len(workers) + 1)
    stop = threading.Event()
    results: list[T | None] = [None] * len(workers)
    errors: list[BaseException] = []

    def body(i: int, work: Callable[[threading.Event], T]) -> None:
        barrier.wait()
        try:
            results[i] = work(stop)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i, w)) for i, w in enumerate(workers)]
    for t in threads:
        t.start()
    barrier.wait()
    started = time.perf_counter()
    time.sleep(seconds)
    stop.set()
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise errors[0]
    return [r for r in results if r is not None], elapsed


@dataclass
class Run:
    ops: int = 0
    elapsed: float = 0.0

    def add(self, ops: int, elapsed: float) -> None:
        self.ops += ops
        self.elapsed += elapsed

    def rate(self) -> float:
        return self.ops / max(self.elapsed, 1e-9)


@dataclass
class Bench:
    url: str
    seconds: float
    backends: Backends
    notes: list[str] = field(default_factory=list)

    def store(self, app: str, durability: str) -> inboxlog.Store:
        return inboxlog.Store.postgres(
            named(self.url, app), schema=FLEET_SCHEMA, durability=durability
        )

    def sessions(self, store: inboxlog.Store, key: str, n: int) -> list[inboxlog.Session]:
        out: list[inboxlog.Session] = []
        try:
            for i in range(n):
                out.append(store.create(f"{key}-{i}"))
                self.backends.check(f"opening session {i + 1} of {n}")
        except BaseException:
            close(out)
            raise
        return out

    def bare(self, app: str, n: int, key: str) -> tuple[int, float]:
        self.backends.room_for(n, f"{n} bare clients")
        insert = (
            f"INSERT INTO {BARE_SCHEMA}.events (session, seq, type, line) VALUES (%s, %s, %s, %s)"
        )
        conns: list[psycopg.Connection[Any]] = []
        try:
            for i in range(n):
                conns.append(psycopg.connect(named(self.url, app), autocommit=True))
                self.backends.check(f"connecting bare client {i + 1} of {n}")

            def worker(i: int) -> Callable[[threading.Event], int]:
                conn, session = conns[i], f"{key}-{i}"

                def work(stop: threading.Event) -> int:
                    seq = 0
                    while not stop.is_set():
                        conn.execute(insert, (session, seq, TYPE, line(seq)), prepare=True)
                        seq += 1
                    return seq

                return work

            counts, elapsed = race([worker(i) for i in range(n)], self.seconds)
            return sum(counts), elapsed
        finally:
            for c in conns:
                c.close()

    def store_side(self, app: str, durability: str, n: int, key: str) -> tuple[int, float]:
        store = self.store(app, durability)
        sessions = self.sessions(store, key, n)

        def worker(s: inboxlog.Session) -> Callable[[threading.Event], int]:
            def work(stop: threading.Event) -> int:
                acked = 0
                while not stop.is_set():
                    if durability == "sync":
                        s.append(TYPE, DATA)
                        acked += 1
                    else:
                        for _ in range(PER_FLUSH):
                            s.append(TYPE, DATA)
                        s.flush()
                        acked += PER_FLUSH
                return acked

            return work

        try:
            counts, elapsed = race([worker(s) for s in sessions], self.seconds)
        finally:
            close(sessions)
        return sum(counts), elapsed


def close(sessions: Sequence[inboxlog.Session]) -> None:
    for s in sessions:
        s.close()


DATA_JSON = json.dumps(DATA, ensure_ascii=False, separators=(",", ":"))


def line(seq: int) -> str:
    """The line of event ``seq`` as the store writes it (compact JSON, same payload)."""
    return f'{{"type":"{TYPE}","seq":{seq},"time":{int(time.time() * 1000)},"data":{DATA_JSON}}}'


def reset(url: str, create: bool) -> None:
    with psycopg.connect(named(url, PREFIX + "setup"), autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {FLEET_SCHEMA} CASCADE")
        conn.execute(f"DROP SCHEMA IF EXISTS {BARE_SCHEMA} CASCADE")
        if create:
            # Shaped like the store's `events` table: same columns, same key.
            conn.execute(f"CREATE SCHEMA {BARE_SCHEMA}")
            conn.execute(
                f"CREATE TABLE {BARE_SCHEMA}.events (session text NOT NULL, seq bigint NOT NULL,"
                " type text NOT NULL, line text NOT NULL, PRIMARY KEY (session, seq))"
            )


def settle(url: str) -> None:
    """Starts the next phase, or the next side of the throughput table, from the state
    the first started from: the tables the last one filled dropped and the server's dirty
    pages written out, so that no run pays for the writes of the one before it (a
    checkpoint or an autovacuum running meanwhile)."""
    reset(url, create=True)
    try:
        with psycopg.connect(named(url, PREFIX + "setup"), autocommit=True) as conn:
            conn.execute("CHECKPOINT")
    except psycopg.Error as e:
        print(f"between phases: cannot write the server's dirty pages out (CHECKPOINT): {e}")


def cell(bench: Bench, n: int, side: str, run: Run, failed: str | None) -> str:
    """A side's figure, or a pointer to the note saying why it failed."""
    if failed is not None:
        bench.notes.append(f"{n} writers, {side}: {failed}")
        return f"failed ({len(bench.notes)})"
    return f"{run.rate():,.0f}"


def throughput(bench: Bench, writers: list[int], rounds: int) -> None:
    sides = ("bare", "sync", "batched")
    print(
        "\n| writers | bare acks/s | store sync acks/s | sync / bare | store batched events/s"
        " | backends bare / sync / batched |"
    )
    print("| --- | --- | --- | --- | --- | --- |")
    for n in writers:
        runs = {side: Run() for side in sides}
        failed: dict[str, str] = {}
        for r in range(rounds):
            for side in sides if r % 2 == 0 else tuple(reversed(sides)):
                if side in failed:
                    continue
                app, key = f"{PREFIX}{side}_{n}", f"{side}-{n}-{r}"
                settle(bench.url)  # the side after a batched one would pay for its rows
                try:
                    if side == "bare":
                        runs[side].add(*bench.bare(app, n, key))
                    else:
                        runs[side].add(*bench.store_side(app, side, n, key))
                except (Stop, inboxlog.InboxlogError, psycopg.Error) as e:
                    failed[side] = str(e)

        cells = {side: cell(bench, n, side, runs[side], failed.get(side)) for side in sides}
        ratio = (
            "—"
            if "bare" in failed or "sync" in failed
            else f"{runs['sync'].rate() / max(runs['bare'].rate(), 1e-9):.2f}×"
        )
        peaks = " / ".join(str(bench.backends.peak(f"{PREFIX}{s}_{n}")) for s in sides)
        print(
            f"| {n} | {cells['bare']} | {cells['sync']} | {ratio} | {cells['batched']} | {peaks} |",
            flush=True,
        )
    for i, note in enumerate(bench.notes, 1):
        print(f"({i}) {note}")
    print(f"load average after the table: {load_average()}")


def latency(bench: Bench, n: int) -> None:
    wapp, fapp = PREFIX + "lag_writers", PREFIX + "lag_followers"
    print(
        f"\ncommit-to-follower latency, {n} sync writers on one store, {n} followers on "
        f"another, {bench.seconds} s:"
    )
    try:
        m = lag(bench, wapp, fapp, n)
        print(
            f"p50 {m.percentile(50)}, p99 {m.percentile(99)}, max {m.percentile(100)} over "
            f"{len(m.latencies)} events ({m.rate:,.0f} acks/s; {m.early} yielded before their "
            f"append returned, counted as 0; {m.missed} not yielded within {DRAIN:.0f} s); "
            f"backends: writers {bench.backends.peak(wapp)}, followers {bench.backends.peak(fapp)}"
        )
    except (Stop, inboxlog.InboxlogError) as e:
        print(
            f"failed: {e} (backends: writers {bench.backends.peak(wapp)}, followers "
            f"{bench.backends.peak(fapp)})"
        )
    print(f"load average: {load_average()}")


@dataclass
class Lag:
    """What a latency run measured."""

    latencies: list[float]  # seconds, sorted
    early: int  # yielded before their writer's append returned (counted as 0)
    missed: int  # acknowledged, not yielded within DRAIN of the writers' end
    rate: float  # acks/s

    def percentile(self, p: int) -> str:
        lat = self.latencies
        if not lat:
            return "—"
        return f"{lat[min(len(lat) - 1, len(lat) * p // 100)] * 1e3:.1f} ms"


def lag(bench: Bench, wapp: str, fapp: str, n: int) -> Lag:
    """``n`` sync writers on a store named ``wapp``, followed from a store named ``fapp``."""
    wstore = bench.store(wapp, "sync")
    sessions = bench.sessions(wstore, f"lag-{n}", n)
    followers: list[inboxlog.Follower] = []
    try:
        fstore = bench.store(fapp, "sync")
        for i, s in enumerate(sessions):
            last = s.last_seq
            f = fstore.follow(s.id, 0 if last is None else last + 1)
            followers.append(f)
            # A first read, so a follower that connects on first use does it now,
            # where the budget is checked.
            if f.next(0.001) is not None:
                raise Stop(f"session {s.id} has events no writer appended yet")
            bench.backends.check(f"opening follower {i + 1} of {n}")
        ends: list[int | None] = [None] * n
        seen: list[list[tuple[int, float]]] = [[] for _ in range(n)]
        give_up = threading.Event()
        errors: list[BaseException] = []

        def follow(i: int) -> None:
            f = followers[i]
            try:
                while not give_up.is_set():
                    end = ends[i]
                    if end is not None and f.next_seq >= end:
                        return
                    event = f.next(0.1)
                    if event is not None:
                        seen[i].append((event["seq"], time.perf_counter()))
            except BaseException as e:
                errors.append(e)

        def writer(i: int) -> Callable[[threading.Event], list[tuple[int, float]]]:
            s = sessions[i]

            def work(stop: threading.Event) -> list[tuple[int, float]]:
                acks: list[tuple[int, float]] = []
                nxt = 0
                while not stop.is_set():
                    seq = s.append(TYPE, DATA)["seq"]
                    acks.append((seq, time.perf_counter()))
                    nxt = seq + 1
                ends[i] = nxt
                return acks

            return work

        threads = [threading.Thread(target=follow, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        try:
            acks, elapsed = race([writer(i) for i in range(n)], bench.seconds)
        finally:
            deadline = time.perf_counter() + DRAIN
            for t in threads:
                t.join(max(0.0, deadline - time.perf_counter()))
            give_up.set()
            for t in threads:
                t.join()
        if errors:
            raise errors[0]
        lat: list[float] = []
        acked = early = missed = 0
        for mine, got in zip(acks, seen, strict=False):
            at = dict(got)
            for seq, t_ack in mine:
                acked += 1
                y = at.get(seq)
                if y is None:
                    missed += 1
                elif y < t_ack:
                    early += 1
                    lat.append(0.0)
                else:
                    lat.append(y - t_ack)
        return Lag(sorted(lat), early, missed, acked / max(elapsed, 1e-9))
    finally:
        for f in followers:
            f.close()
        close(sessions)


def open_many(bench: Bench, count: int) -> None:
    app = PREFIX + "open"
    print(f"\nopening {count} sessions on one store:")
    group = 10
    try:
        # Created (and closed) ten at a time on another store first.
        setup = bench.store(PREFIX + "open_setup", "sync")
        for start in range(0, count, group):
            close(bench.sessions(setup, f"open-{start}", min(group, count - start)))
        del setup
        store = bench.store(app, "sync")
        opened: list[inboxlog.Session] = []
        spent = 0.0
        stopped = None
        try:
            for i in range(count):
                began = time.perf_counter()
                try:
                    s = store.open(f"open-{i // group * group}-{i % group}")
                except inboxlog.InboxlogError as e:
                    stopped = f"opening session {i + 1} of {count}: {e}"
                    break
                finally:
                    spent += time.perf_counter() - began
                opened.append(s)
                # Not timed: the budget check after each open.
                try:
                    bench.backends.check(f"after {len(opened)} opens")
                except Stop as e:
                    stopped = str(e)
                    break
        finally:
            peak = bench.backends.peak(app)
            began = time.perf_counter()
            close(opened)
            closing = time.perf_counter() - began
        print(
            f"{len(opened)} of {count} opened in {spent * 1e3:.1f} ms "
            f"({spent * 1e3 / max(len(opened), 1):.1f} ms per open), held open together; "
            f"closed in {closing * 1e3:.1f} ms; backends at the peak: {peak}"
        )
        if stopped:
            print(f"stopped early: {stopped}")
    except (Stop, inboxlog.InboxlogError) as e:
        print(f"failed: {e}")
    print(f"load average: {load_average()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    default_url = os.environ.get("INBOXLOG_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--url", default=default_url)
    parser.add_argument("--quick", action="store_true", help="one round of 1 s per side")
    parser.add_argument("--seconds", type=float, help="per side and round (default 5)")
    parser.add_argument("--rounds", type=int, help="default 3")
    parser.add_argument("--writers", default="1,8,32,64")
    parser.add_argument("--lag-writers", type=int, default=64)
    parser.add_argument("--open-sessions", type=int, default=1000)
    parser.add_argument("--max-backends", type=int, default=72)
    parser.add_argument("--leave-free", type=int, default=10)
    args = parser.parse_args()
    seconds = args.seconds or (1.0 if args.quick else 5.0)
    rounds = args.rounds or (1 if args.quick else 3)
    writers = [int(n) for n in args.writers.split(",")]
    print(
        f"## PostgreSQL at fleet scale through the wheel (inboxlog {inboxlog.__version__}, "
        f"psycopg {psycopg.__version__}); {seconds} s per side per round, {rounds} round(s)"
        f"{' (quick)' if args.quick else ''}; load average at start: {load_average()}"
    )
    reset(args.url, create=True)
    backends = Backends(args.url, args.max_backends, args.leave_free)
    try:
        bench = Bench(args.url, seconds, backends)
        throughput(bench, writers, rounds)
        settle(args.url)
        latency(bench, args.lag_writers)
        settle(args.url)
        open_many(bench, args.open_sessions)
    finally:
        backends.close()
        reset(args.url, create=False)
    print(f"load average at end: {load_average()}")


if __name__ == "__main__":
    main()
