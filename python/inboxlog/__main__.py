"""Operator commands for inboxlog's stored logs (``inboxlog`` or ``python -m inboxlog``).

    python -m inboxlog list    ROOT [--json]     one line per session (from headers only)
    python -m inboxlog inspect ROOT ID [--json]  the log as stored (no lock, no repair)
    python -m inboxlog verify  ROOT [ID ...]     run every check opening runs (header and
                                                 version, each record, turn/step rules, inbox
                                                 replay) without lock, repair or write
    python -m inboxlog repair  ROOT ID [--upgrade]
                                                 open for writing: drop a torn tail, close
                                                 an interrupted turn; never drops or rewrites
                                                 an intact record; --upgrade then rewrites a
                                                 format version 1 log as version 2 (with
                                                 checksums), atomically
    python -m inboxlog delete  ROOT ID           remove a session for good (refused while a
                                                 writer holds it)
    python -m inboxlog import  ROOT FILE [--id ID]
                                                 a reference harness log (.jsonl or
                                                 .jsonl.zstd) as a new session; prints
                                                 its id and event count
    python -m inboxlog tail    ROOT ID [-f] [--json] [--since N]
                                                 the events from seq N, one per line; with
                                                 -f, follow them as they are committed
    python -m inboxlog fold    ROOT ID [--json]  the consumed-work fold of the log
    python -m inboxlog transcript ROOT ID [--json]
                                                 what the model sees next (the surface's
                                                 messages): role, text, tool calls with
                                                 their arguments, results; --json the
                                                 {"nodes","messages"} object
    python -m inboxlog post    ROOT ID MESSAGE [--target T]
                                                 post a message (JSON, or - for stdin) to
                                                 a session, open or not; prints the post id
    python -m inboxlog post    ROOT ID --remove MID
    python -m inboxlog post    ROOT ID --replace MID MESSAGE
                                                 remove or replace the pending message MID
                                                 of a session, open or not, as a post:
                                                 prints the post id (an edit that finds
                                                 MID no longer pending is recorded as
                                                 rejected in the log)
    python -m inboxlog approve ROOT ID APPROVAL_ID [--reject]
                                                 decide a tool call waiting for approval,
                                                 from anywhere, exactly once: allowed once
                                                 (or rejected); prints the post id
    python -m inboxlog compact ROOT ID --range S:E --summary TEXT [--provider P --model M]
                                                 replace the surface from seq S through
                                                 seq E with the summary TEXT (a manual
                                                 compaction, no turn open; the session is
                                                 opened for writing); --provider and
                                                 --model default to "manual"
    python -m inboxlog trace   ROOT [ID] --endpoint URL [--follow] [--state FILE]
                                                 the sessions (or ID) as OpenTelemetry
                                                 traces over OTLP/HTTP (needs the extra
                                                 inboxlog[otel]); --follow exports each
                                                 turn as it ends; --state resumes there
    python -m inboxlog serve   ROOT [--host 127.0.0.1] [--port 8765] [--token T]
                               [--allow-host NAME[:PORT]]... [--read-only]
                               [--client-bytes N] [--clients-bytes N] [--page-bytes N]
                               [--history-bytes N] [--histories-bytes N] [--stall S]
                                                 the web console and its JSON + SSE API
                                                 (needs the extra inboxlog[console]); the
                                                 token also from INBOXLOG_TOKEN; a bind
                                                 off loopback is refused without one;
                                                 the bounds of what it holds of events
                                                 (docs/ARCHITECTURE.md#console)

ROOT is a JSONL store's directory, or a postgresql:// (or postgres://) URL for the
PostgreSQL store, whose tables live in the schema given by --schema (default inboxlog).
A ROOT that starts like a URL (a scheme and ":", or "postgres//") is taken as one, so
a mistyped URL is refused without its password instead of naming a directory; write a
directory named like that as ./NAME.

verify prints one line per session. A log that opens, on stdout:
    ID: ok, N events, P pending, droppedUnrun=false
with, when opening it for writing will repair it (not an error; `repair` does it now):
    ...; open will repair: drop B torn byte(s), answer C tool call(s), close interrupted turn T
then, one per line, the events the conversation's rules name (not errors either: the
first 100 of each kind): a surface op that breaks them (kept off the surface), or an
assistant/message, tool/call or tool/result of an older shape than an append takes now:
      seq S: kept off the surface: WHY
      seq S: an older shape: WHY
A log that opening would refuse, on stderr, located from the error's attributes:
    ID: REFUSED (KIND) at PATH line L, byte B, seq S: MESSAGE
"ok" means the session will open; whether another writer holds it now is not checked.
verify stops at the first refused log; on a terminal it shows its progress on stderr.

``--json`` prints the core's own JSON text, one value per line: the header and the
events as the library spells them (byte for byte the lines of a version 1 JSONL log, a
version 2 line without its checksum; numbers and key order as stored), the same bytes
the C library hands out; the other lines show values as the core writes them too:
compact, non-ASCII characters as they are. Times
are shown in ISO 8601 UTC (``2026-12-01T10:58:33.000Z``); ``--json`` prints them as
stored, Unix milliseconds. Output into a pipe that closes early (``| head``) ends the
command quietly with status 141, as a Unix tool killed by SIGPIPE.

Exit status: 0 when all is well (for verify: every log opens, repairs included), 1 when a
log is refused (the message names the file, line, byte offset and seq) or a call is (a
delete of a locked or absent session), 2 for a usage error.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import NoReturn

from . import FORMAT_VERSION, InboxlogError, Store, fold_consumed_work, import_reference
from ._native import _json_text
from .types import ApprovalOutcome, Event, Message

_EXAMPLES = {
    "list": "example:\n  inboxlog list sessions/",
    "inspect": "example:\n  inboxlog inspect sessions/ s1 --json | jq .type",
    "verify": "examples:\n  inboxlog verify sessions/\n  inboxlog verify sessions/ s1 s2",
    "repair": "examples:\n  inboxlog repair sessions/ s1\n  inboxlog repair sessions/ s1 --upgrade",
    "delete": "example:\n  inboxlog delete sessions/ s1",
    "import": "example:\n  inboxlog import sessions/ run.jsonl.zstd --id s9",
    "tail": (
        "examples:\n  inboxlog tail sessions/ s1 --since 100\n"
        "  inboxlog tail -f --json sessions/ s1"
    ),
    "fold": "example:\n  inboxlog fold sessions/ s1 --json",
    "transcript": (
        "examples:\n  inboxlog transcript sessions/ s1\n  inboxlog transcript sessions/ s1 --json"
    ),
    "approve": (
        "examples:\n  inboxlog approve sessions/ s1 approval-7\n"
        "  inboxlog approve sessions/ s1 approval-7 --reject"
    ),
    "compact": (
        'example:\n  inboxlog compact sessions/ s1 --range 0:41 --summary "Set up the repo."'
    ),
    "trace": (
        "examples:\n  inboxlog trace sessions/ s1 --endpoint http://localhost:4318/v1/traces\n"
        "  inboxlog trace sessions/ --endpoint http://localhost:4318/v1/traces --follow "
        "--state trace.json"
    ),
    "serve": (
        "examples:\n  inboxlog serve sessions/\n"
        "  INBOXLOG_TOKEN=s3cret inboxlog serve sessions/ --host 0.0.0.0 --allow-host box.lan"
    ),
    "post": (
        "examples:\n"
        '  inboxlog post sessions/ s1 \'{"id":"m7","role":"user","content":"hi"}\'\n'
        '  echo \'{"id":"m8"}\' | inboxlog post sessions/ s1 - --target next-step\n'
        "  inboxlog post sessions/ s1 --remove m7\n"
        '  inboxlog post sessions/ s1 --replace m7 \'{"id":"m7","content":"hello"}\''
    ),
}


_URL_LIKE = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:|postgres(ql)?//", re.IGNORECASE)


def _looks_like_url(arg: str) -> bool:
    """Whether ``arg`` starts like a URL (``scheme:``, or ``postgres//`` mistyped)."""
    return _URL_LIKE.match(arg) is not None


def _store(where: str, schema: str | None) -> Store:
    """The store a command names (``Store.open``): a PostgreSQL URL, ``memory:``, or a
    JSONL directory. Anything else that starts like a URL goes to the PostgreSQL URL
    parser, whose refusal never shows a password (#27), rather than becoming a
    directory named after it."""
    if _looks_like_url(where) and not where.startswith(("postgresql://", "postgres://", "memory:")):
        return Store.postgres(where, schema=schema or "inboxlog", durability="sync")
    return Store.open(where, durability="sync", schema=schema)


def _time(ms: int) -> str:
    """Unix milliseconds as ISO 8601 UTC with milliseconds; the number itself when no
    calendar date has it (past year 9999)."""
    try:
        moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    except (OverflowError, ValueError, OSError):
        return str(ms)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error never quotes an argument that may carry a password
    (one that starts like a URL, or holds an ``@``): it is shown as ``***`` (#27)."""

    secret_args: Sequence[str] = ()

    def error(self, message: str) -> NoReturn:
        for arg in sorted(self.secret_args, key=len, reverse=True):
            message = message.replace(repr(arg), "'***'").replace(arg, "***")
        super().error(message)


def _excerpt(value: object) -> str:
    """The first 80 characters of `value`'s JSON text as the core writes it."""
    return _json_text(value)[:80]


def _list(store: Store, args: argparse.Namespace) -> int:
    if args.json:
        for line in store._list_lines():
            print(line)
        return 0
    for header in store.list():
        lineage = f" parent={header['parentSession']}" if "parentSession" in header else ""
        print(f"{header['id']}\tcreatedAt={_time(header['createdAt'])}{lineage}")
    return 0


def _inspect(store: Store, args: argparse.Namespace) -> int:
    if args.json:
        for line in store._inspect_lines(args.id):
            print(line)
        return 0
    header, events = store.inspect(args.id)
    print(
        f"session {header['id']}: {len(events)} events, format version {header['version']}, "
        f"created {_time(header['createdAt'])}"
    )
    for event in events:
        print(_line(event))
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


def _progress(done: int, total: int, session_id: str) -> None:
    """``verify i/n ID`` on one terminal line, only when stderr is a terminal."""
    if sys.stderr.isatty():
        sys.stderr.write(f"\r\033[Kverify {done}/{total} {session_id}")
        if done == total:
            sys.stderr.write("\r\033[K")
        sys.stderr.flush()


def _verify(store: Store, args: argparse.Namespace) -> int:
    ids = args.ids or [h["id"] for h in store.list()]
    for done, session_id in enumerate(ids):
        _progress(done, len(ids), session_id)
        try:
            report = store.verify(session_id)
            # The fold needs the events themselves; verify passed, so they read back.
            _, events = store.inspect(session_id)
        except InboxlogError as e:
            _progress(len(ids), len(ids), session_id)
            print(f"{session_id}: REFUSED ({e.kind}){_where(e)}: {e}", file=sys.stderr)
            return 1
        fold = fold_consumed_work(events)
        pending = report["nextTurn"] + report["nextStep"]
        repairs = []
        if report["tornBytes"]:
            repairs.append(f"drop {report['tornBytes']} torn byte(s)")
        if report["openTurn"] is not None:
            if report["pendingToolCalls"]:
                repairs.append(f"answer {report['pendingToolCalls']} tool call(s)")
            repairs.append(f"close interrupted turn {report['openTurn']}")
        print(
            f"{session_id}: ok, {report['events']} events, {pending} pending, "
            f"droppedUnrun={str(fold['droppedUnrun']).lower()}"
            + (f"; open will repair: {', '.join(repairs)}" if repairs else ""),
            flush=True,
        )
        # Not errors (the log opens): what the conversation's rules say of older events.
        for finding in report["offSurface"]:
            print(f"  seq {finding['seq']}: kept off the surface: {finding['why']}")
        for finding in report["olderShapes"]:
            print(f"  seq {finding['seq']}: an older shape: {finding['why']}")
    _progress(len(ids), len(ids), "")
    return 0


def _repair(store: Store, args: argparse.Namespace) -> int:
    # Opening trusts the log's checkpoint for what lies before it; an operator's repair
    # checks every record first, as verify does, and changes nothing on a refusal.
    store.verify(args.id)
    with store.open(args.id) as session:
        report = session.open_report
    torn, turn = report["tornBytes"], report["repairedTurn"]
    print(f"{args.id}: dropped {torn} torn byte(s)", end="")
    print(f", closed interrupted turn {turn}" if turn is not None else ", no open turn")
    if args.upgrade:
        up = store.upgrade(args.id)
        if up["from"] == FORMAT_VERSION:
            print(f"{args.id}: already format version {FORMAT_VERSION}, nothing to upgrade")
        else:
            print(
                f"{args.id}: upgraded from format version {up['from']} to {FORMAT_VERSION}, "
                f"{up['events']} events"
            )
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


def _line(event: Event) -> str:
    return f"{event['seq']:>8}  {event['type']:<24} {_excerpt(event['data'])}"


def _tail(store: Store, args: argparse.Namespace) -> int:
    # Without -f: what is stored now, then stop; with -f: wait for more.
    timeout = None if args.follow else 0
    with store.follow(args.id, since=args.since) as follower:

        def next_line() -> str | None:
            if args.json:
                return follower._next_line(timeout)
            event = follower.next(timeout)
            return None if event is None else _line(event)

        try:
            line = next_line()
            while line is not None:
                print(line, flush=args.follow)
                line = next_line()
        except KeyboardInterrupt:
            pass
    return 0


def _text(content: object) -> str:
    """The text of a message's content: a string as it is, else its text blocks."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            str(b.get("text", ""))
            for b in content
            if isinstance(b, dict) and b.get("type") in ("text", "reasoning")
        )
    return ""


def _transcript_lines(message: Message) -> list[str]:
    """One message of the surface as a person reads it."""
    content = message.get("content")
    blocks = [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []
    results = [b for b in blocks if b.get("type") == "tool-result"]
    if results:
        lines = []
        for r in results:
            mark = " ERROR" if r.get("isError") else ""
            lines.append(f"tool {r.get('toolCallId')}{mark}: {_text(r.get('content'))}")
        return lines
    role = str(message.get("role", "user"))
    lines = []
    for b in blocks:
        if b.get("type") == "reasoning":
            lines.append(f"{role} (reasoning): {b.get('text', '')}")
        elif b.get("type") == "text":
            lines.append(f"{role}: {b.get('text', '')}")
        elif b.get("type") == "tool-call":
            lines.append(f"{role} calls {b.get('name')}({b.get('arguments')}) [{b.get('id')}]")
    if not blocks:
        lines.append(f"{role}: {_text(content)}")
    return lines


def _transcript(store: Store, args: argparse.Namespace) -> int:
    surface = store.surface(args.id)
    if args.json:
        print(_json_text(surface))
        return 0
    for message in surface["messages"]:
        for line in _transcript_lines(message):
            print(line)
    return 0


def _fold(store: Store, args: argparse.Namespace) -> int:
    if args.json:
        print(store._fold_line(args.id))
        return 0
    _, events = store.inspect(args.id)
    fold = fold_consumed_work(events)
    end = fold["end"]
    if end is None:
        print(f"{args.id}: no turn accounted for work yet", end="")
    else:
        reason = end["data"]["reason"]["kind"]
        turn = end["data"]["turn"]
        print(f"{args.id}: turn {turn} accounted for work ({reason}, seq {end['seq']})", end="")
    print(f", droppedUnrun={str(fold['droppedUnrun']).lower()}")
    return 0


def _post(store: Store, args: argparse.Namespace) -> int:
    edit = (
        "--remove" if args.remove is not None else "--replace" if args.replace is not None else None
    )
    usage = None
    if args.remove is not None and args.replace is not None:
        usage = "--remove and --replace edit one message each: give one of them"
    elif edit is not None and args.target is not None:
        usage = f"--target is for a new message; {edit} edits one where it waits"
    elif edit is not None and args.message is not None:
        usage = f"{edit} takes no MESSAGE after it"
    elif edit is None and args.message is None:
        usage = "MESSAGE is required (a JSON object, or - for stdin)"
    if usage is not None:
        print(f"inboxlog post: {usage}", file=sys.stderr)
        return 2
    if args.remove is not None:
        print(store.remove_pending(args.id, args.remove))
        return 0
    given = args.message if args.replace is None else args.replace[1]
    text = sys.stdin.read() if given == "-" else given
    try:
        message = json.loads(text)
    except ValueError as e:
        print(f"inboxlog post: the message is not JSON: {e}", file=sys.stderr)
        return 2
    if not isinstance(message, dict):
        print("inboxlog post: the message must be a JSON object", file=sys.stderr)
        return 2
    if args.replace is not None:
        print(store.replace_pending(args.id, args.replace[0], message))
    else:
        print(store.post(args.id, args.target or "next-turn", message))
    return 0


def _approve(store: Store, args: argparse.Namespace) -> int:
    """Decides an approval from anywhere (SPEC §17.3); prints the post id."""
    outcome: ApprovalOutcome = "rejected" if args.reject else "allowed-once"
    print(store.decide(args.id, args.approval_id, outcome))
    return 0


def _compact(store: Store, args: argparse.Namespace) -> int:
    """A manual compaction (SPEC §16): the range S:E replaced by the summary text."""
    start, sep, end = args.range.partition(":")
    if not sep or not start.isdigit() or not end.isdigit():
        print(
            f"inboxlog compact: --range must be S:E (two seqs), not {args.range!r}", file=sys.stderr
        )
        return 2
    with store.open(args.id) as session:
        compaction = session.begin_compaction(int(start), int(end))
        done = compaction.commit(args.summary, provider=args.provider, model=args.model)
    print(
        f"{args.id}: compacted {start}..{end} ({len(compaction.shadowed_seqs)} surface "
        f"node(s)) into seq {done['message']['seq']} ({done['compactionId']})"
    )
    return 0


def _trace(store: Store, args: argparse.Namespace) -> int:
    try:
        from .otel.cli import run
    except ImportError as e:
        print(
            f"inboxlog trace needs the otel extra ({e}): pip install 'inboxlog[otel]'",
            file=sys.stderr,
        )
        return 1
    return run(store, args)


def _serve_refusal(args: argparse.Namespace) -> str | None:
    """Why ``serve`` must not start with these arguments, or ``None``."""
    from .console.security import check_token, is_loopback, parse_host

    if args.token is not None:
        try:
            check_token(args.token)
        except ValueError as e:
            return str(e)
    elif not is_loopback(args.host):
        return (
            f"refusing to listen on {args.host}, which is not a loopback address, without "
            "a token: anyone who can reach it could read and steer every session. Give "
            "--token T (or INBOXLOG_TOKEN), or bind 127.0.0.1"
        )
    if not 0 <= args.port < 65536:
        return f"--port {args.port} is not a port"
    for host in args.allow_host:
        try:
            parse_host(host)
        except ValueError as e:
            return f"--allow-host: {e}"
    return None


def _serve(store: Store, args: argparse.Namespace) -> int:
    try:
        from .console import app, serve
        from .console.security import bound_hosts
    except ImportError as e:
        print(
            f"inboxlog serve needs the console extra ({e}): pip install 'inboxlog[console]'",
            file=sys.stderr,
        )
        return 1
    import logging
    import socket

    from .console import Limits

    given = {f.replace("-", "_"): getattr(args, f.replace("-", "_")) for f in _LIMITS}
    try:
        limits = Limits(**{k: v for k, v in given.items() if v is not None})
    except ValueError as e:
        print(f"inboxlog serve: {e}", file=sys.stderr)
        return 2
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host.strip("[]"), args.port))
        # Listening before the banner: a client that reads it may connect at once.
        sock.listen(2048)
    except OSError as e:
        print(f"inboxlog serve: cannot listen on {args.host}:{args.port}: {e}", file=sys.stderr)
        return 1
    port = sock.getsockname()[1]
    hosts = bound_hosts(args.host.strip("[]"), port) + list(args.allow_host)
    console = app(
        store, token=args.token, read_only=args.read_only, allowed_hosts=hosts, limits=limits
    )
    server = serve.server(console, log_level="info", timeout_graceful_shutdown=5)
    # The access log shows each request's path; a ?token= in it is shown as ***.
    logging.getLogger("uvicorn.access").addFilter(_hide_token)
    name = f"[{args.host.strip('[]')}]" if family == socket.AF_INET6 else args.host
    print(
        f"inboxlog console on http://{name}:{port}/ over {store!r}"
        + (" (read-only)" if args.read_only else "")
        + (" (token required)" if args.token else ""),
        file=sys.stderr,
        flush=True,
    )
    # Ctrl-C comes back as KeyboardInterrupt after the server's own graceful shutdown.
    with contextlib.suppress(KeyboardInterrupt):
        server.run(sockets=[sock])
    return 0


#: ``serve``'s flags of the console's bounds (``inboxlog.console.Limits``).
_LIMITS: dict[str, type] = {
    **dict.fromkeys(
        ["client-bytes", "clients-bytes", "page-bytes", "history-bytes", "histories-bytes"], int
    ),
    "stall": float,
}

_TOKEN_QUERY = re.compile(r"([?&]token=)[^&\s]*")


def _hide_token(record: object) -> bool:
    """A logging filter that hides the value of a ``token`` query parameter."""
    args = getattr(record, "args", None)
    if isinstance(args, tuple):
        record.args = tuple(  # type: ignore[attr-defined]
            _TOKEN_QUERY.sub(r"\1***", a) if isinstance(a, str) else a for a in args
        )
    return True


def main(argv: Sequence[str] | None = None) -> int:
    args_given = sys.argv[1:] if argv is None else list(argv)
    # Every parser (the subcommands' too, made by add_subparsers with this class) hides them.
    _Parser.secret_args = [a for a in args_given if _looks_like_url(a) or "@" in a]
    parser = _Parser(prog="inboxlog", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, fn, helptext in [
        ("list", _list, "list sessions"),
        ("inspect", _inspect, "print a log as stored"),
        ("verify", _verify, "check logs as opening would, changing nothing"),
        ("repair", _repair, "drop a torn tail and close an interrupted turn"),
        ("delete", _delete, "remove a session for good"),
        ("import", _import, "import a reference harness log as a new session"),
        ("tail", _tail, "print a log's events; -f follows them as they are committed"),
        ("fold", _fold, "the consumed-work fold of a log"),
        ("transcript", _transcript, "what the model sees next: the surface's messages"),
        ("post", _post, "post a message to a session, or edit its pending input"),
        ("approve", _approve, "allow (or --reject) a tool call waiting for approval"),
        ("compact", _compact, "replace a range of the surface with a summary"),
        ("trace", _trace, "export sessions as OpenTelemetry traces (OTLP/HTTP)"),
        ("serve", _serve, "serve the web console and its API over the store"),
    ]:
        sub = commands.add_parser(
            name,
            help=helptext,
            description=helptext,
            epilog=_EXAMPLES[name],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        sub.add_argument("root", help="the store's directory, or a postgresql:// URL")
        sub.add_argument(
            "--schema",
            default=None,
            help="the PostgreSQL schema of the tables (with a URL ROOT; default inboxlog)",
        )
        sub.set_defaults(run=fn)
        if name in (
            "inspect",
            "repair",
            "delete",
            "tail",
            "fold",
            "post",
            "transcript",
            "approve",
            "compact",
        ):
            sub.add_argument("id", help="session id")
        if name == "compact":
            sub.add_argument(
                "--range", required=True, metavar="S:E", help="the first and last seq replaced"
            )
            sub.add_argument("--summary", required=True, help="the summary's text")
            sub.add_argument(
                "--provider", default="manual", help='who summarized (default "manual")'
            )
            sub.add_argument("--model", default="manual", help='the model (default "manual")')
        if name == "approve":
            sub.add_argument("approval_id", help="the approval's id (approval/asked data id)")
            sub.add_argument(
                "--reject", action="store_true", help="reject the call instead of allowing it once"
            )
        if name == "tail":
            sub.add_argument("-f", "--follow", action="store_true", help="wait for new events")
            sub.add_argument("--json", action="store_true", help="one JSON event per line")
            sub.add_argument("--since", type=int, default=0, help="first seq (default 0)")
        if name == "fold":
            sub.add_argument("--json", action="store_true", help="the fold as JSON")
        if name == "transcript":
            sub.add_argument(
                "--json", action="store_true", help='the {"nodes","messages"} object as JSON'
            )
        if name == "repair":
            sub.add_argument(
                "--upgrade",
                action="store_true",
                help="then rewrite a format version 1 log as version 2 (with checksums)",
            )
        if name == "post":
            sub.add_argument(
                "message", nargs="?", help="the message as a JSON object, or - for stdin"
            )
            sub.add_argument(
                "--target",
                choices=["next-turn", "next-step"],
                default=None,
                help="the list it goes to (default next-turn)",
            )
            sub.add_argument(
                "--remove", metavar="MID", help="remove the pending message MID instead"
            )
            sub.add_argument(
                "--replace",
                nargs=2,
                metavar=("MID", "MESSAGE"),
                help="replace the pending message MID with MESSAGE (JSON, or - for stdin) instead",
            )
        if name == "inspect":
            sub.add_argument("--json", action="store_true", help="JSONL out: header, then events")
        if name == "list":
            sub.add_argument("--json", action="store_true", help="one JSON header per line")
        if name == "verify":
            sub.add_argument("ids", nargs="*", help="session ids (default: all)")
        if name == "trace":
            sub.add_argument("id", nargs="?", help="session id (default: every session)")
            sub.add_argument("--endpoint", required=True, help="the OTLP/HTTP traces URL")
            sub.add_argument("--follow", action="store_true", help="export each turn as it ends")
            sub.add_argument("--state", help="a file noting what was exported, to resume from")
        if name == "serve":
            sub.add_argument(
                "--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)"
            )
            sub.add_argument(
                "--port", type=int, default=8765, help="port to bind (default 8765; 0: any free)"
            )
            sub.add_argument(
                "--token",
                default=os.environ.get("INBOXLOG_TOKEN") or None,
                help="the token every request must carry (default: INBOXLOG_TOKEN)",
            )
            sub.add_argument(
                "--allow-host",
                action="append",
                default=[],
                metavar="NAME[:PORT]",
                help="another Host the console answers (a name alone: any port)",
            )
            sub.add_argument("--read-only", action="store_true", help="refuse every mutation")
            for flag, kind in _LIMITS.items():
                sub.add_argument(f"--{flag}", type=kind, help=f"the console's {flag} bound")
        if name == "import":
            sub.add_argument("file", help="the reference log (.jsonl or .jsonl.zstd)")
            sub.add_argument("--id", help="session id (default: the log's own)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        refusal = _serve_refusal(args)
        if refusal is not None:
            print(f"inboxlog serve: {refusal}", file=sys.stderr)
            return 2
    try:
        return int(args.run(_store(args.root, args.schema), args))
    except InboxlogError as e:
        print(f"inboxlog: {e.kind}: {e}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return _reader_gone()


def _reader_gone() -> int:
    """The reader of stdout closed the pipe (``| head``): stop quietly, as a Unix tool
    that SIGPIPE ends. stdout goes to /dev/null so that the interpreter's last flush
    at exit finds nothing to complain about."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return 128 + 13


if __name__ == "__main__":
    sys.exit(main())
