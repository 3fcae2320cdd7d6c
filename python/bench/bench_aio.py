"""Event-loop lag of ``inboxlog.aio`` under load: 50 sessions append concurrently while a
ticker task measures how late the loop wakes it.

    .venv/bin/python python/bench/bench_aio.py [--quick] [--durability sync|batched|none]

The ticker sleeps 1 ms at a time and records how much later than asked it woke: the
time the loop was kept from running it. With every blocking call on the executor the
lag stays near the loop's own scheduling noise; a blocking call on the loop would show
up as lag of the call's length (an fsync: milliseconds).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time

import inboxlog
import inboxlog.aio

TICK = 0.001


async def ticker(lags: list[float], stop: asyncio.Event) -> None:
    while not stop.is_set():
        asked = time.perf_counter()
        await asyncio.sleep(TICK)
        lags.append(time.perf_counter() - asked - TICK)


async def worker(store: inboxlog.aio.Store, id: str, appends: int) -> None:
    async with await store.create(id) as s:
        for i in range(appends):
            await s.append("assistant/chunk", {"i": i, "text": "token " * 8})
            if i % 10 == 0:
                await s.inbox.append("next-step", {"id": f"{id}-{i}"})


async def run(root: str, durability: str, sessions: int, appends: int) -> None:
    store = inboxlog.aio.Store(root, durability=durability)  # type: ignore[arg-type]
    lags: list[float] = []
    stop = asyncio.Event()
    tick = asyncio.create_task(ticker(lags, stop))
    await asyncio.sleep(0.05)
    idle = list(lags)
    lags.clear()
    start = time.perf_counter()
    await asyncio.gather(*(worker(store, f"s{k}", appends) for k in range(sessions)))
    elapsed = time.perf_counter() - start
    stop.set()
    await tick
    calls = sessions * (appends + appends // 10 + 2)
    ms = sorted(lag * 1000 for lag in lags)
    p99 = ms[int(len(ms) * 0.99) - 1] if ms else 0.0
    print(
        f"inboxlog {inboxlog.__version__}, Python {sys.version.split()[0]}, "
        f"durability {durability}, {sessions} sessions × {appends} appends"
    )
    print(f"calls/s            {calls / elapsed:>10.0f}  ({calls} calls in {elapsed:.2f} s)")
    idle_max = max(idle) * 1000 if idle else 0.0
    print(f"loop lag, idle     max {idle_max:>7.2f} ms")
    print(
        f"loop lag, loaded   max {ms[-1]:>7.2f} ms   p99 {p99:.2f} ms   "
        f"median {statistics.median(ms):.3f} ms   ({len(ms)} ticks)"
    )
    print(
        "reproduce: .venv/bin/python python/bench/bench_aio.py "
        f"--durability {durability}{' --quick' if appends < 200 else ''}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer appends per session")
    parser.add_argument("--durability", default="sync", choices=["sync", "batched", "none"])
    args = parser.parse_args()
    appends = 40 if args.quick else 200
    with tempfile.TemporaryDirectory() as root:
        asyncio.run(run(root, args.durability, 50, appends))


if __name__ == "__main__":
    main()
