"""Operator commands for inboxlog's stored logs.

    python -m inboxlog list    ROOT              one line per session (from headers only)
    python -m inboxlog inspect ROOT ID [--json]  the log as stored (no lock, no repair)
    python -m inboxlog verify  ROOT [ID ...]     run every check opening runs (header and
                                                 version, each record, turn/step rules, inbox
                                                 replay) without lock, repair or write
    python -m inboxlog repair  ROOT ID           open for writing: drop a torn tail, close
                                                 an interrupted turn; never drops or rewrites
                                                 a complete record
    python -m inboxlog delete  ROOT ID           remove a session for good (refused while a
                                                 writer holds it)
    python -m inboxlog import  ROOT FILE [--id ID]
                                                 a reference harness log (.jsonl or
                                                 .jsonl.zstd) as a new session; prints
                                                 its id and event count

ROOT is a JSONL store's directory, or a postgresql:// (or postgres://) URL for the
PostgreSQL store, whose tables live in the schema given by --schema (default inboxlog).

verify prints one line per session. A log that opens, on stdout:
    ID: ok, N events, P pending, droppedUnrun=false
with, when opening it for writing will repair it (not an error; `repair` does it now):
    ...; open will repair: drop B torn byte(s), close interrupted turn T
A log that opening would refuse, on stderr, located from the error's attributes:
    ID: REFUSED (KIND) at PATH line L, byte B, seq S: MESSAGE
"ok" means the session will open; whether another writer holds it now is not checked.

Exit status: 0 when all is well (for verify: every log opens, repairs included), 1 when a
log is refused (the message names the file, line, byte offset and seq) or a call is (a
delete of a locked or absent session), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence

from . import InboxlogError, Store, fold_consumed_work, import_reference


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


def _where(e: InboxlogError) -> str:
    """`` at PATH line L, byte B, seq S``: the parts of the error's location it knows."""
    place = e.path
    if place is None and e.session is not None:
        place = f"session {e.session}"
    parts = [
        f"{name} {value}"
        for name, value in (("line", e.line), ("byte", e.offset), ("seq", e.seq))
        if value is not None
    ]
    where = " ".join(p for p in (place, ", ".join(parts)) if p)
    return f" at {where}" if where else ""


def _verify(store: Store, args: argparse.Namespace) -> int:
    ids = args.ids or [h["id"] for h in store.list()]
    failed = 0
    for session_id in ids:
        try:
            report = store.verify(session_id)
            # The fold needs the events themselves; verify passed, so they read back.
            _, events = store.inspect(session_id)
        except InboxlogError as e:
            print(f"{session_id}: REFUSED ({e.kind}){_where(e)}: {e}", file=sys.stderr)
            failed += 1
            continue
        fold = fold_consumed_work(events)
        pending = report["nextTurn"] + report["nextStep"]
        repairs = []
        if report["tornBytes"]:
            repairs.append(f"drop {report['tornBytes']} torn byte(s)")
        if report["openTurn"] is not None:
            repairs.append(f"close interrupted turn {report['openTurn']}")
        print(
            f"{session_id}: ok, {report['events']} events, {pending} pending, "
            f"droppedUnrun={str(fold['droppedUnrun']).lower()}"
            + (f"; open will repair: {', '.join(repairs)}" if repairs else "")
        )
    return 1 if failed else 0


def _repair(store: Store, args: argparse.Namespace) -> int:
    with store.open(args.id) as session:
        report = session.open_report
    torn, turn = report["tornBytes"], report["repairedTurn"]
    print(f"{args.id}: dropped {torn} torn byte(s)", end="")
    print(f", closed interrupted turn {turn}" if turn is not None else ", no open turn")
    return 0


def _delete(store: Store, args: argparse.Namespace) -> int:
    store.delete(args.id)
    print(f"{args.id}: deleted")
    return 0


def _import(store: Store, args: argparse.Namespace) -> int:
    with import_reference(args.file, store, id=args.id) as session:
        last = session.last_seq
        count = 0 if last is None else last + 1
        turn = session.open_report["repairedTurn"]
        print(f"{session.id}: imported {count} events from {args.file}", end="")
        print(f", closed interrupted turn {turn}" if turn is not None else "")
    return 0


def _store(root: str, schema: str) -> Store:
    """The store ROOT names: a PostgreSQL URL, or a JSONL directory."""
    if root.startswith(("postgresql://", "postgres://")):
        return Store.postgres(root, schema=schema, durability="sync")
    return Store(root, durability="sync")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m inboxlog", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, fn, helptext in [
        ("list", _list, "list sessions"),
        ("inspect", _inspect, "print a log as stored"),
        ("verify", _verify, "check logs as opening would, changing nothing"),
        ("repair", _repair, "drop a torn tail and close an interrupted turn"),
        ("delete", _delete, "remove a session for good"),
        ("import", _import, "import a reference harness log as a new session"),
    ]:
        sub = commands.add_parser(name, help=helptext)
        sub.add_argument("root", help="the store's directory, or a postgresql:// URL")
        sub.add_argument(
            "--schema",
            default="inboxlog",
            help="the PostgreSQL schema of the tables (with a URL ROOT; default inboxlog)",
        )
        sub.set_defaults(run=fn)
        if name in ("inspect", "repair", "delete"):
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
        return int(args.run(_store(args.root, args.schema), args))
    except InboxlogError as e:
        print(f"inboxlog: {e.kind}: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
