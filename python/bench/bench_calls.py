"""The two calls a host makes most, each beside its pure-Python baseline in the same run.

    .venv/bin/python python/bench/bench_calls.py [--quick]

``append``: ``session.append(type, small_dict)`` on a JSONL store with durability
``"none"`` (one write per call), against ``json.dumps`` of the same envelope (compact
separators, ``ensure_ascii=False``, ``allow_nan=False``, as ``bench_inbox.py`` writes it)
and one ``os.write`` per call. ``events``: ``session.events()`` over ~200,000 stored
events, against reading the file and ``json.loads`` of each line.

Each figure is the best of a few runs, the two sides taking turns, so the machine's
noise weighs on both alike: read the speed-ups more than the times.

Then two parts of an append that no implementation of it can skip, timed alone: a
call into the wheel (reading ``session.last_seq``), and building the two dicts
``append`` returns (the event, around a copy of its data), in Python.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import inboxlog

TYPE = "assistant/chunk"
DATA = {"text": "hello world token", "index": 42}
REPEATS = 5


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def now() -> int:
    return time.time_ns() // 1_000_000


def best_of(wheel: Callable[[], None], pure: Callable[[], None]) -> tuple[float, float]:
    """The fastest of `REPEATS` runs of each, in seconds, the two taking turns."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(REPEATS):
        for side, run in zip(times, (wheel, pure), strict=True):
            gc.collect()
            start = time.perf_counter()
            run()
            side.append(time.perf_counter() - start)
    return min(times[0]), min(times[1])


def bench_append(root: str, calls: int) -> tuple[float, float]:
    """µs per call: the wheel's append, then `json.dumps` + `os.write`."""
    session = inboxlog.Store(root, durability="none").create("calls")
    fd = os.open(os.path.join(root, "pure.jsonl"), os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    seq = 0

    def wheel() -> None:
        for _ in range(calls):
            session.append(TYPE, DATA)

    def pure() -> None:
        nonlocal seq
        for _ in range(calls):
            line = dumps({"type": TYPE, "seq": seq, "time": now(), "data": DATA}) + "\n"
            os.write(fd, line.encode())
            seq += 1

    try:
        w, p = best_of(wheel, pure)
    finally:
        os.close(fd)
        session.close()
    return w / calls * 1e6, p / calls * 1e6


def bench_events(root: str, events: int) -> tuple[float, float]:
    """µs per event: the wheel's `events()`, then reading the file and `json.loads`."""
    store = inboxlog.Store(root, durability="none")
    session = store.create("log")
    for _ in range(events):
        session.append(TYPE, DATA)
    path = os.path.join(root, "log.jsonl")

    def read_lines() -> list[Any]:
        with open(path, encoding="utf-8") as f:
            next(f)  # the header
            return [json.loads(line) for line in f]

    assert session.events() == read_lines()

    def wheel() -> None:
        session.events()

    def pure() -> None:
        read_lines()

    try:
        w, p = best_of(wheel, pure)
    finally:
        session.close()
    return w / events * 1e6, p / events * 1e6


def bench_floor(root: str, calls: int) -> tuple[float, float]:
    """µs per call: reading a property of a session, and building an event dict."""
    session = inboxlog.Store(root, durability="none").create("floor")

    def read() -> None:
        for _ in range(calls):
            session.last_seq  # noqa: B018 - the call is what is measured

    def build() -> None:
        for seq in range(calls):
            {"type": TYPE, "seq": seq, "time": seq, "data": DATA.copy()}

    try:
        w, p = best_of(read, build)
    finally:
        session.close()
    return w / calls * 1e6, p / calls * 1e6


def main() -> None:
    quick = "--quick" in sys.argv
    calls = 20_000 if quick else 200_000
    events = 20_000 if quick else 200_000
    root = tempfile.mkdtemp(prefix="inboxlog-bench-")
    try:
        for name in ("append", "events", "floor"):
            os.makedirs(os.path.join(root, name))
        append = bench_append(os.path.join(root, "append"), calls)
        read = bench_events(os.path.join(root, "events"), events)
        call, dicts = bench_floor(os.path.join(root, "floor"), calls)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    rows = [
        ("append, durability none", *append, 3.0),
        (f"events(), {events:,} events", *read, 2.0),
    ]

    print(f"inboxlog {inboxlog.__version__}, Python {sys.version.split()[0]}")
    header = f"{'call':<30}{'wheel':>11}{'pure Python':>14}{'speed-up':>10}{'target':>9}"
    print(header)
    for name, w, p, target in rows:
        verdict = "met" if p / w >= target else "not met"
        print(
            f"{name:<30}{w:>8.2f} µs{p:>11.2f} µs{p / w:>9.2f}×"
            f"{'≥ ' + format(target, 'g') + '×':>9} {verdict}"
        )
    print("(µs per call for append, per event for events())")
    print(
        f"inside every append: a call into the wheel {call:.3f} µs, "
        f"the returned dicts {dicts:.3f} µs"
    )


if __name__ == "__main__":
    main()
