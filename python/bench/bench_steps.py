"""What one step of each framework integration costs: a run of two model calls (the
weather tool, then an answer) through the integration, its framework's real package and
a scripted model that answers at once, so the time is the framework's and the log's.

    .venv/bin/python python/bench/bench_steps.py [--runs 30] [--only NAME ...]

Each run is one turn of a new session on a JSONL store (durability ``none``: the fsync
is left out, so what is measured is the integration's own work per step: the step
boundary, and since the conversation (SPEC §15.5) the model's response, the tool call
and its result written as events). It prints, per integration, the median and the
10th to 90th percentile of the run's time divided by its two steps, over ``--runs`` runs
after two untimed ones.

To compare two builds, run it once with each on ``PYTHONPATH`` (a wheel installed with
``pip install --target DIR``) and divide: docs/benchmarks.md has the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "integrations"))

from adapters import ADAPTERS, Script, say, tool

import inboxlog


async def one_run(store: inboxlog.Store, name: str, n: int) -> float:
    script = Script(tool("Paris"), say("Sunny in Paris."))
    start = time.perf_counter()
    await ADAPTERS[name].run(store, f"{name.replace('_', '-')}-{n}", "Weather in Paris?", script)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--only", nargs="*", default=sorted(ADAPTERS))
    args = parser.parse_args()
    logging.disable(logging.WARNING)  # ADK warns that the scripted model reports no usage
    print(f"inboxlog from {Path(inboxlog.__file__).parent}")
    with tempfile.TemporaryDirectory() as root:
        store = inboxlog.Store(Path(root) / "logs", durability="none")
        for name in args.only:
            for n in range(2):
                asyncio.run(one_run(store, name, -1 - n))
            per_step = sorted(
                asyncio.run(one_run(store, name, n)) / 2 * 1000 for n in range(args.runs)
            )
            deciles = statistics.quantiles(per_step, n=10)
            print(
                f"{name:14} {statistics.median(per_step):7.2f} ms/step "
                f"(p10 {deciles[0]:.2f}, p90 {deciles[-1]:.2f})"
            )


if __name__ == "__main__":
    main()
