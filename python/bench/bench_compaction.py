"""Compaction (SPEC §16, issue #48): reading a session compacted many times against
once, and one compaction's commit on a long history against a short one, in one run.

    .venv/bin/python -P python/bench/bench_compaction.py [--runs 5] [--repeat 7]
        [--compactions 100] [--per-round 10,100] [--sizes 100000,1000]
        [--stores jsonl,memory]

Sessions are written through ``Session.append`` (no turn open; user and assistant text
messages taking turns, ~100 bytes of text each) on a JSONL store (durability ``none``)
and on the memory store. Cases:

- ``read``: ``store.messages(id)`` of a closed session whose history of
  ``--compactions`` x ``per-round`` messages was compacted ``--compactions`` times, each
  compaction replacing the previous summary and the ``per-round`` messages written since
  (a rolling summary), against the same messages compacted once, at the end; then
  ``per-round`` more messages on both, so both surfaces end as one summary and the same
  ``per-round`` messages. On JSONL each read is a new ``inboxlog.Store(dir)`` and its
  ``messages``, as a worker that has just started pays it; on the memory store the one
  store's ``messages``. Goal: many / once <= 1.5x.
- ``commit``: one compaction on an open session of ``--sizes`` messages (the larger
  against the smaller): a user and an assistant message appended (not timed), then
  ``begin_compaction`` over the last summary (or message) and those two, and ``commit``
  (timed, and its two parts apart). Once with all the messages on the surface, once with
  them compacted every 1,000 into a rolling summary (the surface one summary). Goal:
  flat in the history's size.

Each run times every case (the median of ``--repeat`` calls after one untimed call, the
two sides of a row taking turns); the table gives the median over the runs with the
spread (min-max) and the ratio per run.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import inboxlog

WORDS = "the quick brown fox jumps over the lazy dog " * 2
SUMMARY = f"what was said so far: {WORDS}"
ROLL = 1000
SOURCE = {"kind": "model", "provider": "bench", "model": "m"}


def user(i: int) -> dict[str, Any]:
    return {"id": f"u{i}", "role": "user", "content": f"question {i}: {WORDS}"}


def said(i: int) -> dict[str, Any]:
    text = {"type": "text", "text": f"answer {i}: {WORDS}"}
    message = {"id": f"a{i}", "role": "assistant", "content": [text], "source": SOURCE}
    return {"turn": 1, "step": 1, "message": message}


def talk(session: inboxlog.Session, first: int, n: int) -> int:
    """Appends messages ``first`` .. ``first + n - 1``, user and assistant in turn;
    returns the last one's seq."""
    seq = -1
    for i in range(first, first + n):
        if i % 2 == 0:
            seq = session.append("user/message", user(i))["seq"]
        else:
            seq = session.append("assistant/message", said(i))["seq"]
    return seq


def compact_all(session: inboxlog.Session) -> None:
    """Replaces the whole surface with the summary."""
    surface = session.surface()
    session.begin_compaction(surface[0], surface[-1]).commit(SUMMARY, provider="bench", model="m")


class Stores:
    """The stores of a run: JSONL directories under ``root``, or memory stores."""

    def __init__(self, root: Path) -> None:
        self.root, self.memory = root, inboxlog.Store.memory()

    def writer(self, kind: str, name: str) -> inboxlog.Store:
        return inboxlog.Store(self.root / name, "none") if kind == "jsonl" else self.memory

    def reader(self, kind: str, name: str) -> Callable[[], inboxlog.Store]:
        """A new handle per call on JSONL; the one store in memory."""
        if kind == "jsonl":
            return lambda: inboxlog.Store(self.root / name)
        return lambda: self.memory


Timed = Callable[[], float]


def read_case(stores: Stores, kind: str, rounds: int, per_round: int) -> tuple[Timed, Timed]:
    """``store.messages`` of a session compacted ``rounds`` times, and once."""
    many, once = f"many-{rounds}-{per_round}", f"once-{rounds}-{per_round}"
    with stores.writer(kind, many).create(many) as s:
        for r in range(rounds):
            talk(s, r * per_round, per_round)
            compact_all(s)
        talk(s, rounds * per_round, per_round)
    with stores.writer(kind, once).create(once) as s:
        talk(s, 0, rounds * per_round)
        compact_all(s)
        talk(s, rounds * per_round, per_round)

    def timer(name: str) -> Timed:
        store = stores.reader(kind, name)

        def run() -> float:
            start = time.perf_counter()
            got = store().messages(name)
            took = time.perf_counter() - start
            assert len(got) == per_round + 1, len(got)
            assert got[0]["content"] == [{"type": "text", "text": SUMMARY}]
            return took

        return run

    return timer(many), timer(once)


class CommitCase:
    """An open session of ``size`` messages, its surface all of them (``rolled``: each
    1,000 compacted into a rolling summary, so its surface is one summary); each call
    compacts the last summary (or message) and two new messages."""

    def __init__(self, stores: Stores, kind: str, size: int, rolled: bool) -> None:
        name = f"commit-{size}-{'rolled' if rolled else 'full'}"
        self.session = stores.writer(kind, name).create(name)
        for first in range(0, size, ROLL):
            talk(self.session, first, min(ROLL, size - first))
            if rolled:
                compact_all(self.session)
        self.next, self.last = size, self.session.surface()[-1]
        self.parts: tuple[list[float], list[float]] = ([], [])

    def __call__(self) -> float:
        s, start = self.session, self.last
        end = talk(s, self.next, 2)
        self.next += 2
        clock = time.perf_counter()
        c = s.begin_compaction(start, end)
        begun = time.perf_counter()
        done = c.commit(SUMMARY, provider="bench", model="m")
        ended = time.perf_counter()
        self.last = done["message"]["seq"]
        self.parts[0].append(begun - clock)
        self.parts[1].append(ended - begun)
        return ended - clock

    def close(self) -> None:
        self.session.close()


def median_ms(fn: Timed, repeat: int) -> float:
    fn()
    return statistics.median(fn() for _ in range(repeat)) * 1000


def spread(values: list[float], digits: int = 3) -> str:
    low, mid, high = min(values), statistics.median(values), max(values)
    return f"{mid:.{digits}f} [{low:.{digits}f}-{high:.{digits}f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--compactions", type=int, default=100)
    parser.add_argument("--per-round", default="10,100")
    parser.add_argument("--sizes", default="100000,1000")
    parser.add_argument("--stores", default="jsonl,memory")
    args = parser.parse_args()
    kinds = args.stores.split(",")
    per_rounds = [int(p) for p in args.per_round.split(",")]
    large, small = (int(s) for s in args.sizes.split(","))
    # (case, store, A, B, time A, time B): the ratio is A / B.
    rows: list[tuple[str, str, str, str, Timed, Timed]] = []
    commits: list[tuple[str, str, CommitCase, CommitCase]] = []
    with tempfile.TemporaryDirectory() as tmp:
        stores = Stores(Path(tmp))
        started = time.perf_counter()
        for kind in kinds:
            for per_round in per_rounds:
                many, once = read_case(stores, kind, args.compactions, per_round)
                total = args.compactions * per_round
                rows.append(
                    (
                        f"read, {total:,} msgs + {per_round}",
                        kind,
                        f"{args.compactions} compactions",
                        "1 compaction",
                        many,
                        once,
                    )
                )
            for rolled in (False, True):
                a, b = (
                    CommitCase(stores, kind, large, rolled),
                    CommitCase(stores, kind, small, rolled),
                )
                surface = "surface 1 summary" if rolled else "surface all msgs"
                commits.append((kind, surface, a, b))
                rows.append(
                    (f"commit, {surface}", kind, f"{large:,} msgs", f"{small:,} msgs", a, b)
                )
        print(f"written in {time.perf_counter() - started:.1f} s", flush=True)
        gc.collect()
        results: list[tuple[list[float], list[float]]] = [([], []) for _ in rows]
        for run in range(args.runs):
            for i, (*_, first, second) in enumerate(rows):
                results[i][0].append(median_ms(first, args.repeat))
                results[i][1].append(median_ms(second, args.repeat))
            print(f"run {run + 1} of {args.runs} done", flush=True)
        for *_, a, b in commits:
            a.close()
            b.close()
    print(f"\n{'case':<32} {'store':<7} {'A':<16} {'A ms':>26} {'B':<14} {'B ms':>26} A/B")
    for i, (case, kind, a_name, b_name, _, _) in enumerate(rows):
        a_ms, b_ms = results[i]
        ratios = [a / b for a, b in zip(a_ms, b_ms, strict=True)]
        print(
            f"{case:<32} {kind:<7} {a_name:<16} {spread(a_ms):>26} {b_name:<14} "
            f"{spread(b_ms):>26} {spread(ratios, 2)}"
        )
    print("\ncommit parts, every call (ms): begin_compaction | commit")
    for kind, surface, a, b in commits:
        for size, held in ((large, a), (small, b)):
            begin, commit = ([t * 1000 for t in part] for part in held.parts)
            print(f"  {kind:<7} {surface:<18} {size:>7,} msgs  {spread(begin)} | {spread(commit)}")


if __name__ == "__main__":
    main()
