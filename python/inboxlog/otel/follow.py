"""Following sessions live and exporting each turn as it ends (SPEC §18, §11.2).

Each followed session has one store follower and one :class:`TraceBuilder`, which
holds the open turn's spans only (never its events) and the ids and insertion times
of the messages pending in its inbox: memory is bounded by one turn and the inbox, not
by the history. A :class:`FollowState` file keeps, per session, the seq after the last
turn exported; a follower started again with it reads the log from seq 0 for the
inbox's state but exports only the turns that start from there. A turn exported just
before a crash, and not yet noted, goes out again with the same ids.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from .. import Follower, NotFoundError, Store
from .export import Sender, builder_for
from .spans import SpanRecord, TraceBuilder


class FollowState:
    """The seq after the last exported turn of each session, in a JSON file
    (``{"session id": seq, ...}``, replaced atomically on each change), or in memory
    only when ``path`` is ``None``."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = None if path is None else Path(path)
        self.seqs: dict[str, int] = {}
        if self.path is not None and self.path.exists():
            loaded = json.loads(self.path.read_text(encoding="utf-8"))
            if not isinstance(loaded, dict) or not all(
                isinstance(v, int) and not isinstance(v, bool) for v in loaded.values()
            ):
                raise ValueError(f"{self.path} is not a trace state file ({{id: seq}})")
            self.seqs = {str(k): v for k, v in loaded.items()}

    def get(self, session: str) -> int:
        """Where the export of ``session`` resumes (0: from its first turn)."""
        return self.seqs.get(session, 0)

    def set(self, session: str, seq: int) -> None:
        """Notes that every turn of ``session`` before ``seq`` was exported."""
        self.seqs[session] = seq
        if self.path is None:
            return
        part = self.path.with_name(f".{self.path.name}.part")
        part.write_text(json.dumps(self.seqs, sort_keys=True), encoding="utf-8")
        os.replace(part, self.path)


class _Followed:
    __slots__ = ("builder", "follower")

    def __init__(self, builder: TraceBuilder, follower: Follower) -> None:
        self.builder = builder
        self.follower = follower


def follow(
    store: Store,
    sender: Sender,
    sessions: Sequence[str] | None = None,
    *,
    state: FollowState | None = None,
    stop: threading.Event | None = None,
    poll: float = 0.2,
    rescan: float = 1.0,
    on_trace: Callable[[str, list[SpanRecord]], None] | None = None,
) -> None:
    """Exports the turns of ``sessions`` (every session of the store, new ones
    included, when ``None``) as each ends, until ``stop`` is set.

    First the turns already stored (from ``state``'s seq on), then each turn within
    ``poll`` seconds of its ``turn/end``, plus the export's own time. ``on_trace`` is
    called with the session id and the spans after each trace went out. Raises
    :class:`~inboxlog.otel.ExportError` when the exporter fails (the state then still
    names that turn as not exported, so a restart sends it)."""
    state = state if state is not None else FollowState()
    stop = stop if stop is not None else threading.Event()
    followed: dict[str, _Followed] = {}
    scanned = float("-inf")

    def add(session: str) -> None:
        try:
            builder = builder_for(store, session, since=state.get(session))
            followed[session] = _Followed(builder, store.follow(session, since=0))
        except NotFoundError:
            pass

    if sessions is not None:
        for session in sessions:
            builder = builder_for(store, session, since=state.get(session))
            followed[session] = _Followed(builder, store.follow(session, since=0))
    try:
        while not stop.is_set():
            if sessions is None and time.monotonic() - scanned >= rescan:
                scanned = time.monotonic()
                for header in store.list():
                    if header["id"] not in followed:
                        add(header["id"])
            # One session: wait on its follower; several: look at each, then pause.
            wait = poll if len(followed) == 1 else 0.0
            busy = False
            for session, one in list(followed.items()):
                try:
                    chunk = one.follower.next_batch(wait)
                except NotFoundError:
                    one.follower.close()
                    del followed[session]
                    continue
                busy = busy or bool(chunk)
                for event in chunk:
                    spans = one.builder.feed(event)
                    if spans:
                        sender.send(spans)
                        if on_trace is not None:
                            on_trace(session, spans)
                        state.set(session, one.builder.resume_seq)
            if not busy and len(followed) != 1:
                stop.wait(poll)
    finally:
        for one in followed.values():
            one.follower.close()
