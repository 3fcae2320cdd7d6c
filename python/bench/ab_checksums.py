"""Instructions per event of opening a log and of a ``none``-durability append through
the wheel, for a build before JSONL format version 2 (reading a version 1 log) and one
after it (reading the same events as a version 2 log, checksums and all), counted by
valgrind (cachegrind), which a busy machine does not disturb as it does timings.

    .venv/bin/python python/bench/ab_checksums.py BEFORE AFTER [--events N]

BEFORE and AFTER are directories each holding an ``inboxlog`` package with its built
``_native`` module (as for ``ab.py``). A log of N events (default 20,000: a small dict
each, one in ten with a string that needs escapes) is written by AFTER; BEFORE reads a
copy with each line's checksum taken off and the header's version 1 (issue #40). Each
side then opens its log once and not at all, and appends N events and none, under
``valgrind --tool=cachegrind --cache-sim=no`` with ``PYTHONHASHSEED=0``; the
differences, per event, are what one event of ``open`` and one ``append`` cost. Needs
valgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

# Run under valgrind: the package in argv[1], the store in argv[2]; "open" opens the
# log argv[4] times (0 or 1), "append" appends argv[4] events to a new session.
RUN = """
import importlib.util, os, sys
directory, root, mode, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
init = os.path.join(directory, "inboxlog", "__init__.py")
spec = importlib.util.spec_from_file_location(
    "inboxlog", init, submodule_search_locations=[os.path.dirname(init)]
)
module = importlib.util.module_from_spec(spec)
sys.modules["inboxlog"] = module
spec.loader.exec_module(module)
store = module.Store(root, durability="none")
if mode == "open":
    for _ in range(n):
        store.open("log").close()
else:
    with store.create("w%d" % n) as s:
        for i in range(n):
            s.append("assistant/chunk", {"text": "hello world token", "index": i})
"""


def instructions(directory: str, root: str, mode: str, n: int) -> int:
    """Instructions run by a process doing `mode` `n` times."""
    result = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            "-c",
            RUN,
            directory,
            root,
            mode,
            str(n),
        ],
        cwd=root,
        env=dict(os.environ, PYTHONHASHSEED="0"),
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", result.stderr)
    if found is None:
        sys.exit(f"ab_checksums: no count from valgrind:\n{result.stderr}")
    return int(found[1].replace(",", ""))


def version_1(source: str, target: str) -> None:
    """The version 2 log `source` as version 1 at `target`: each line without its
    `synced` and checksum, the header's version 1 (core/FORMAT.md#checksums-version-2)."""
    with open(source, encoding="utf-8") as f, open(target, "w", encoding="utf-8") as g:
        for k, line in enumerate(f):
            line = line.rstrip("\n")
            line = line[: line.rfind(',"synced":' if k else ',"crc32c":')] + "}"
            if k == 0:
                line = line.replace('"version":2,', '"version":1,', 1)
            g.write(line + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        sys.exit("ab_checksums: valgrind not found (apt-get install valgrind)")
    n = args.events
    sides = {"before": os.path.abspath(args.before), "after": os.path.abspath(args.after)}
    base = tempfile.mkdtemp(prefix="inboxlog-ab-checksums-")
    roots = {side: os.path.join(base, side) for side in sides}
    try:
        for root in roots.values():
            os.makedirs(root)
        write = f"""
import sys
sys.path.insert(0, {sides["after"]!r})
import inboxlog
with inboxlog.Store({roots["after"]!r}, durability="none").create("log") as s:
    for i in range({n}):
        data = {{"text": "hello world token", "index": i}}
        if i % 10 == 0:
            data["note"] = 'a "quoted"\\nline é'
        s.append("assistant/chunk", data)
"""
        subprocess.run([sys.executable, "-c", write], check=True)
        version_1(
            os.path.join(roots["after"], "log.jsonl"), os.path.join(roots["before"], "log.jsonl")
        )
        print(f"Python {sys.version.split()[0]}, {n:,} events")
        cost: dict[str, tuple[float, float]] = {}
        for side, directory in sides.items():
            root = roots[side]
            opened = instructions(directory, root, "open", 1) - instructions(
                directory, root, "open", 0
            )
            appended = instructions(directory, root, "append", n) - instructions(
                directory, root, "append", 0
            )
            cost[side] = (opened / n, appended / n)
            print(
                f"{side:<7} open {cost[side][0]:>8,.0f} instructions/event"
                f"   append {cost[side][1]:>8,.0f} instructions/call"
            )
        print(
            f"after/before: open {cost['after'][0] / cost['before'][0]:.3f},"
            f" append {cost['after'][1] / cost['before'][1]:.3f}"
        )
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
