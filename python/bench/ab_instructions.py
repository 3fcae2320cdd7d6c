"""Instructions per event of ``session.events()`` for two builds of the package, counted
by valgrind (cachegrind), which a busy machine does not disturb as it does timings.

    .venv/bin/python python/bench/ab_instructions.py BEFORE AFTER [--events N]

BEFORE and AFTER are directories each holding an ``inboxlog`` package with its built
``_native`` module (as for ``ab.py``). A log of N events (default 20,000: a small dict
each, one in ten with a string that needs escapes) is written once; each side then
opens it and calls ``events()`` once, and again three times, under
``valgrind --tool=cachegrind --cache-sim=no`` with ``PYTHONHASHSEED=0`` (so that dict
probing is the same in every run). The difference of the two counts, halved, is what
one ``events()`` costs; the single run less that is the interpreter's start, the
import and ``open``. A third run that imports the package and stops there is taken
from that to give what ``open`` costs, per event of the log. Needs valgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Run under valgrind: open the log with the package in argv[1] and read it argv[3] times
# (a negative count: import the package only).
READ = """
import importlib.util, os, sys
directory, root, reads = sys.argv[1], sys.argv[2], int(sys.argv[3])
init = os.path.join(directory, "inboxlog", "__init__.py")
spec = importlib.util.spec_from_file_location(
    "inboxlog", init, submodule_search_locations=[os.path.dirname(init)]
)
module = importlib.util.module_from_spec(spec)
sys.modules["inboxlog"] = module
spec.loader.exec_module(module)
if reads < 0:
    sys.exit(0)
session = module.Store(root, durability="none").open("log")
for _ in range(reads):
    session.events()
session.close()
"""


def instructions(directory: str, root: str, reads: int, scratch: str) -> int:
    """Instructions run by a process that opens the log and reads it `reads` times."""
    result = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            "-c",
            READ,
            directory,
            root,
            str(reads),
        ],
        cwd=scratch,
        env=dict(os.environ, PYTHONHASHSEED="0"),
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", result.stderr)
    if found is None:
        sys.exit(f"ab_instructions: no count from valgrind:\n{result.stderr}")
    return int(found[1].replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("ab_instructions: valgrind not found (apt-get install valgrind)")
    sides = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    root = tempfile.mkdtemp(prefix="inboxlog-ab-instructions-")
    try:
        write = f"""
import sys
sys.path.insert(0, {sides["after"]!r})
import inboxlog
with inboxlog.Store({root!r}, durability="none").create("log") as s:
    for i in range({args.events}):
        data = {{"text": "hello world token", "index": i}}
        if i % 10 == 0:
            data["note"] = 'a "quoted"\\nline é'
        s.append("assistant/chunk", data)
"""
        subprocess.run([sys.executable, "-c", write], cwd=root, check=True)
        per_event: dict[str, float] = {}
        print(f"Python {sys.version.split()[0]}, {args.events:,} events")
        print(
            f"{'side':<8}{'events(), per event':>22}{'start+import+open':>20}"
            f"{'open, per event':>18}"
        )
        open_per_event: dict[str, float] = {}
        for name, directory in sides.items():
            imported = instructions(directory, root, -1, root)
            once = instructions(directory, root, 1, root)
            thrice = instructions(directory, root, 3, root)
            read = (thrice - once) / 2
            per_event[name] = read / args.events
            open_per_event[name] = (once - read - imported) / args.events
            print(
                f"{name:<8}{per_event[name]:>22,.0f}{once - read:>20,.0f}"
                f"{open_per_event[name]:>18,.0f}"
            )
        ratio = per_event["after"] / per_event["before"]
        print(f"after/before, events(): {ratio:.3f}")
        ratio = open_per_event["after"] / open_per_event["before"]
        print(f"after/before, open: {ratio:.3f}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
