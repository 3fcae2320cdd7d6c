"""``events()`` and ``open`` of two builds of the package, in one process, taking turns.

    .venv/bin/python python/bench/ab_read.py BEFORE AFTER [--events N] [--rounds R]

BEFORE and AFTER are directories each holding an ``inboxlog`` package with its built
``_native`` module (a copy of ``python/inboxlog`` after ``maturin develop --release``).
Both are imported side by side (as ``inboxlog_before`` and ``inboxlog_after``); each
reads its own copy of one log of N events (default 200,000, the mix of
``bench_calls.py``: a small dict per event, plus one event in ten with a string that
needs escapes), and the two take turns R times (default 15): ``session.events()``,
then ``Store.open`` of the log. Taking turns within one process makes the machine's
noise weigh on both alike, which separate runs on a busy machine cannot. Prints the
best and the median of each side, after/before of each, and the median of the rounds'
own after/before (the two runs of a round are next to each other in time).
"""

from __future__ import annotations

import argparse
import functools
import gc
import importlib.util
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any


def load(name: str, directory: str) -> ModuleType:
    """The package `directory/inboxlog`, imported under `name`."""
    init = os.path.join(directory, "inboxlog", "__init__.py")
    spec = importlib.util.spec_from_file_location(
        name, init, submodule_search_locations=[os.path.dirname(init)]
    )
    if spec is None or spec.loader is None:
        sys.exit(f"ab_read: no inboxlog package in {directory}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def timed(run: Callable[[], object]) -> float:
    """Seconds `run` takes, after a collection."""
    gc.collect()
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--events", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    sides = {
        "before": load("inboxlog_before", args.before),
        "after": load("inboxlog_after", args.after),
    }
    root = tempfile.mkdtemp(prefix="inboxlog-ab-read-")
    try:
        written = os.path.join(root, "written")
        os.makedirs(written)
        with sides["after"].Store(written, durability="none").create("log") as s:
            for i in range(args.events):
                data: dict[str, Any] = {"text": "hello world token", "index": i}
                if i % 10 == 0:
                    data["note"] = 'a "quoted"\nline é'
                s.append("assistant/chunk", data)
        stores: dict[str, Any] = {}
        for name, module in sides.items():
            os.makedirs(os.path.join(root, name))
            shutil.copy(os.path.join(written, "log.jsonl"), os.path.join(root, name))
            stores[name] = module.Store(os.path.join(root, name), durability="none")
        sessions = {name: store.open("log") for name, store in stores.items()}
        first = {name: s.events() for name, s in sessions.items()}
        assert first["before"] == first["after"], "the two builds read different events"
        del first
        times: dict[str, dict[str, list[float]]] = {
            "events()": {name: [] for name in sides},
            "open": {name: [] for name in sides},
        }

        def reopen(name: str) -> None:
            sessions[name] = stores[name].open("log")

        for _ in range(args.rounds):
            for name in sides:
                times["events()"][name].append(timed(sessions[name].events))
            for name in sides:
                sessions[name].close()
                times["open"][name].append(timed(functools.partial(reopen, name)))
        for s in sessions.values():
            s.close()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(f"Python {sys.version.split()[0]}, {args.events:,} events, {args.rounds} rounds each")
    print(f"{'call':<10}{'side':<8}{'best':>12}{'median':>12}   (µs per event)")
    for call, by_side in times.items():
        for name, samples in by_side.items():
            best, median = min(samples), statistics.median(samples)
            per = 1e6 / args.events
            print(f"{call:<10}{name:<8}{best * per:>12.3f}{median * per:>12.3f}")
        ratio_best = min(by_side["after"]) / min(by_side["before"])
        ratio_median = statistics.median(by_side["after"]) / statistics.median(by_side["before"])
        print(f"{call:<10}{'after/before':<14}{ratio_best:>6.3f}{ratio_median:>12.3f}")
        # Each round's two runs are next to each other in time: the median of their
        # ratios is the figure least moved by a load that comes and goes.
        pairs = [a / b for a, b in zip(by_side["after"], by_side["before"], strict=False)]
        paired = statistics.median(pairs)
        print(f"{call:<10}{'median of the rounds, after/before':<36}{paired:>8.3f}")


if __name__ == "__main__":
    main()
