"""One benchmark script run against two builds of the package, taking turns.

    .venv/bin/python python/bench/ab.py BEFORE AFTER [--rounds N] -- SCRIPT [ARGS...]

BEFORE and AFTER are directories each holding an ``inboxlog`` package with its built
``_native`` module (a copy of ``python/inboxlog`` after ``maturin develop --release``).
SCRIPT (e.g. ``python/bench/bench_calls.py``) runs N times against each, alternating
BEFORE, AFTER, BEFORE, …, in a scratch directory so that the source package does not
shadow the build; the machine's noise then weighs on both sides alike. Every run's
output is printed under a line naming its side and round.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile


def main() -> None:
    argv = sys.argv[1:]
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        sys.exit("usage: ab.py BEFORE AFTER [--rounds N] -- SCRIPT [ARGS...]")
    split = argv.index("--")
    command = argv[split + 1 :]
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("before", help="directory holding the baseline inboxlog package")
    parser.add_argument("after", help="directory holding the changed inboxlog package")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each side (2)")
    args = parser.parse_args(argv[:split])
    script = os.path.abspath(command[0])
    sides = [("before", os.path.abspath(args.before)), ("after", os.path.abspath(args.after))]
    with tempfile.TemporaryDirectory(prefix="inboxlog-ab-") as scratch:
        for round_ in range(1, args.rounds + 1):
            for name, path in sides:
                print(f"== {name} ({path}), round {round_}: {' '.join(command)}", flush=True)
                env = dict(os.environ, PYTHONPATH=path)
                subprocess.run(
                    [sys.executable, script, *command[1:]], cwd=scratch, env=env, check=True
                )


if __name__ == "__main__":
    main()
