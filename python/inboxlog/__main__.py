"""Operator commands for inboxlog's JSONL logs.

    python -m inboxlog list    ROOT              one line per session (from headers only)
    python -m inboxlog inspect ROOT ID [--json]  the log as stored (no lock, no repair)
    python -m inboxlog verify  ROOT [ID ...]     check every complete record (§1.3, §3.4)
    python -m inboxlog repair  ROOT ID           open for writing: drop a torn tail, close
                                                 an interrupted turn; never drops or rewrites
                                                 a complete record
    python -m inboxlog import  ROOT FILE [--id ID]
                                                 a reference harness log (.jsonl or
                                                 .jsonl.zstd) as a new session; prints
                                                 its id and event count

Exit status: 0 when all is well, 1 when a log is refused (the message names the file,
line, byte offset and seq), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from . import InboxlogError, QueueProjection, Store, fold_consumed_work, import_reference


def _list(store: Store, _: argparse.Namespace) -> int:
    for header in store.list():
        lineage = f" parent={header['parentSession']}" if "parentSession" in header else ""
        print(f"{header['id']}\tcreatedAt={header['createdAt']}{lineage}")
    return 0


def _inspect(store: Store, args: argparse.Namespace) -> int:
    header, events = store.inspect(args.id)
    if args.json:
        print(json.dumps(header, separators=(",", ":")))
        for event in events:
            print(json.dumps(event, separators=(",", ":")))
        return 0
    print(f"session {header['id']}: {len(events)} events, format version {header['version']}")
    for event in events:
        print(f"{event['seq']:>8}  {event['type']:<24} {json.dumps(event['data'])[:80]}")
    return 0


def _verify(store: Store, args: argparse.Namespace) -> int:
    ids = args.ids or [h["id"] for h in store.list()]
    failed = 0
    for session_id in ids:
        try:
            header, events = store.inspect(session_id)
            projection = QueueProjection.replay(events, replay_from=header.get("seedLength", 0))
        except InboxlogError as e:
            print(f"{session_id}: REFUSED ({e.kind}): {e}", file=sys.stderr)
            failed += 1
            continue
        fold = fold_consumed_work(events)
        pending = len(projection.next_turn) + len(projection.next_step)
        print(
            f"{session_id}: ok, {len(events)} events, {pending} pending, "
            f"droppedUnrun={str(fold['droppedUnrun']).lower()}"
        )
    return 1 if failed else 0


def _repair(store: Store, args: argparse.Namespace) -> int:
    with store.open(args.id) as session:
        report = session.open_report
    torn, turn = report["torn_bytes"], report["repaired_turn"]
    print(f"{args.id}: dropped {torn} torn byte(s)", end="")
    print(f", closed interrupted turn {turn}" if turn is not None else ", no open turn")
    return 0


def _import(store: Store, args: argparse.Namespace) -> int:
    with import_reference(args.file, store, id=args.id) as session:
        last = session.last_seq
        count = 0 if last is None else last + 1
        turn = session.open_report["repaired_turn"]
        print(f"{session.id}: imported {count} events from {args.file}", end="")
        print(f", closed interrupted turn {turn}" if turn is not None else "")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m inboxlog", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, fn, helptext in [
        ("list", _list, "list sessions"),
        ("inspect", _inspect, "print a log as stored"),
        ("verify", _verify, "check logs without changing them"),
        ("repair", _repair, "drop a torn tail and close an interrupted turn"),
        ("import", _import, "import a reference harness log as a new session"),
    ]:
        sub = commands.add_parser(name, help=helptext)
        sub.add_argument("root", help="the store's directory")
        sub.set_defaults(run=fn)
        if name in ("inspect", "repair"):
            sub.add_argument("id", help="session id")
        if name == "inspect":
            sub.add_argument("--json", action="store_true", help="JSONL out: header, then events")
        if name == "verify":
            sub.add_argument("ids", nargs="*", help="session ids (default: all)")
        if name == "import":
            sub.add_argument("file", help="the reference log (.jsonl or .jsonl.zstd)")
            sub.add_argument("--id", help="session id (default: the log's own)")
    args = parser.parse_args(argv)
    try:
        return int(args.run(Store(args.root, durability="sync"), args))
    except InboxlogError as e:
        print(f"inboxlog: {e.kind}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
