"""``inboxlog trace STORE [ID] --endpoint URL [--follow] [--state FILE]`` (SPEC §18).

Without ``--follow``: every ended turn of ID (of every session without ID) goes to the
endpoint, one line per session on stdout (``ID: T trace(s), S span(s) from E events``),
and the command ends. With ``--follow``: the same, then each turn as it ends, one line
per trace (``ID seq N: S span(s)``), until interrupted. ``--state FILE`` notes what was
exported, so that the command started again with it goes on from there.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from .. import Store
from .export import ExportError, Sender, export_session, otlp_exporter
from .follow import FollowState, follow
from .spans import SpanRecord


def run(store: Store, args: argparse.Namespace) -> int:
    """Runs the command; 0 when every trace went out, 1 when the exporter failed."""
    sender = Sender(otlp_exporter(args.endpoint))
    try:
        state = FollowState(args.state)
    except ValueError as e:
        print(f"inboxlog trace: {e}", file=sys.stderr)
        return 2
    ids = [args.id] if args.id is not None else None
    try:
        if args.follow:

            def said(session: str, spans: list[SpanRecord]) -> None:
                print(f"{session} seq {spans[0].attributes['inboxlog.seq']}: {len(spans)} span(s)")
                sys.stdout.flush()

            with contextlib.suppress(KeyboardInterrupt):
                follow(store, sender, ids, state=state, on_trace=said)
            return 0
        for session in ids if ids is not None else [h["id"] for h in store.list()]:
            report = export_session(store, session, sender, since=state.get(session))
            state.set(session, report.resume_seq)
            print(
                f"{session}: {report.traces} trace(s), {report.spans} span(s) "
                f"from {report.events} events"
            )
        return 0
    except ExportError as e:
        print(f"inboxlog trace: {args.endpoint}: {e}", file=sys.stderr)
        return 1
    finally:
        sender.close()
