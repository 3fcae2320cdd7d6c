"""The JSON shapes of the console's API (SPEC §14.1), read through
inboxlog's public blocking API and written through :mod:`inboxlog.aio`. Every read
here blocks: the app runs them on its executor, never on the event loop; the
mutations are coroutines whose store call (and its fsync) runs there too.

Reading a session never opens it (that would take its writer's lock). A session's fold
(its header, last seq, open turn, queues, pending approvals, parked turn and latest
events) starts from ``store.peek``
(the state from the log's checkpoint, read without owning it) and ``store.tail`` (its
latest events), so a first page load costs what follows the checkpoint and what it
shows, not the session's history; it is kept between requests and brought up to date
by a ``store.follow`` standing at its end, so a later load reads only what was committed
since. Older pages are read with short-lived followers, and the inbox as of an earlier
event with a :class:`~inboxlog.QueueProjection` fed the events before it.
"""

from __future__ import annotations

import bisect
import json
import threading
from collections import OrderedDict, deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import inboxlog
import inboxlog.aio
from inboxlog.types import (
    ApprovalAsked,
    ApprovalOutcome,
    Baseline,
    Event,
    Header,
    ParkedTurn,
    Target,
)

from .limits import Limits

#: ``limit`` of a sessions page when none is given, and the most one page holds.
SESSIONS_LIMIT = (100, 1000)
#: ``limit`` of an events page when none is given, and the most one page holds.
EVENTS_LIMIT = (500, 1000)
#: Sessions whose fold is kept between requests (least recently used dropped first).
FOLDS_KEPT = 64
#: A fold keeps the inbox as of every this many events, so a baseline at an earlier
#: seq replays at most this many events.
SNAPSHOT_EVERY = 1024
#: A fold keeps at most this many of the latest events (one page at the largest
#: ``limit``), and at most ``Limits.history_bytes`` of them.
RECENT = 1000

#: The HTTP status of each error kind (SPEC §14.1); a kind not listed is the server's
#: own failure (500).
STATUS = {
    "invalid_input": 400,
    "invalid_splice": 400,
    "protocol": 400,
    "not_found": 404,
    "locked": 409,
    "already_exists": 409,
    "duplicate_message": 409,
    "too_large": 413,
    "unavailable": 503,
}

_TARGETS: tuple[Target, ...] = ("next-turn", "next-step")
_SPLICED = "agent/inbox/spliced"
_CONTEXT = ("session", "path", "line", "offset", "seq")


def error_body(error: inboxlog.InboxlogError) -> dict[str, Any]:
    """The §8 error object of ``error``: ``code``, ``kind``, ``message`` and whatever
    context it carries (``session``, ``path``, ``line``, ``offset``, ``seq``)."""
    body: dict[str, Any] = {"code": error.code, "kind": error.kind, "message": str(error)}
    for key in _CONTEXT:
        value = getattr(error, key, None)
        if value is not None:
            body[key] = value
    return body


def status_of(error: inboxlog.InboxlogError) -> int:
    """The HTTP status that answers ``error``."""
    return STATUS.get(error.kind, 500)


def invalid(message: str) -> inboxlog.InvalidInputError:
    """An ``invalid_input`` error saying ``message`` (a bad query or body)."""
    return inboxlog.InvalidInputError(message)


def count(value: str | None, name: str, default: int | None, clamp: int | None) -> int | None:
    """The non-negative integer of query parameter ``name`` (``default`` when absent),
    clamped to ``clamp``; ``invalid_input`` when it is not one."""
    if value is None:
        return default
    if not value.isascii() or not value.isdigit() or len(value) > 16:
        raise invalid(f"{name} must be a non-negative integer, not {value[:40]!r}")
    n = int(value)
    if clamp is not None and n < 1:
        raise invalid(f"{name} must be at least 1")
    return n if clamp is None else min(n, clamp)


def target_of(value: object) -> Target:
    """``value`` as a target list name; ``invalid_input`` for anything else."""
    for target in _TARGETS:
        if value == target:
            return target
    raise invalid('"target" must be "next-turn" or "next-step"')


def message_of(body: Mapping[str, Any], key: str = "message") -> dict[str, Any]:
    """The message object under ``key`` of ``body``; ``invalid_input`` when missing."""
    message = body.get(key)
    if not isinstance(message, dict):
        raise invalid(f'"{key}" must be a message (a JSON object)')
    return message


def id_of(body: Mapping[str, Any]) -> str:
    """The message id under ``"id"`` of ``body``; ``invalid_input`` when missing."""
    value = body.get("id")
    if not isinstance(value, str):
        raise invalid('"id" must be the pending message\'s id (a string)')
    return value


def sessions(store: inboxlog.Store, after: str | None, limit: int) -> dict[str, Any]:
    """One page of headers in id order: those after id ``after``, at most ``limit``;
    ``next`` is the ``after`` of the next page, ``None`` at the end."""
    headers = store.list()
    ids = [h["id"] for h in headers]
    start = 0 if after is None else bisect.bisect_right(ids, after)
    page = headers[start : start + limit]
    more = start + limit < len(headers)
    return {"sessions": page, "next": page[-1]["id"] if more and page else None}


def read(store: inboxlog.Store, id: str, since: int, limit: int | None) -> Iterator[Event]:
    """The committed events of session ``id`` with seq ≥ ``since``, at most ``limit``
    (all when ``None``), as one short-lived follower reads them."""
    with store.follow(id, since) as follower:
        n = 0
        while limit is None or n < limit:
            event = follower.next(0)
            if event is None:
                return
            n += 1
            yield event


def events(store: inboxlog.Store, id: str, since: int, limit: int) -> dict[str, Any]:
    """A page of session ``id``'s events from seq ``since``: at most ``limit``, ``next``
    the seq after them when another follows, else ``None``."""
    page = list(read(store, id, since, limit + 1))
    more = len(page) > limit
    del page[limit:]
    return {"events": page, "next": page[-1]["seq"] + 1 if more and page else None}


def _baseline(seq: int | None, projection: inboxlog.QueueProjection) -> Baseline:
    return {"seq": seq, "next_turn": projection.next_turn, "next_step": projection.next_step}


@dataclass
class _Fold:
    """What the console knows of one session, as of the event before ``next_seq``."""

    header: Header
    next_seq: int = 0
    open_turn: int | None = None
    #: A follower standing at ``next_seq``, kept open: bringing the fold up to date
    #: reads only what was committed since (a JSONL log is not read from its start).
    follower: inboxlog.Follower | None = None
    #: The latest events (at most ``RECENT``, ``history`` bytes of JSON): a session's
    #: latest page without a read.
    recent: deque[Event] = field(default_factory=deque)
    #: The JSON size of each of ``recent``, and their sum.
    sizes: deque[int] = field(default_factory=deque)
    kept: int = 0
    history: int = Limits.history_bytes
    projection: inboxlog.QueueProjection = field(default_factory=inboxlog.QueueProjection)
    #: The inbox as of every ``SNAPSHOT_EVERY``-th seq.
    snapshots: list[Baseline] = field(default_factory=list)
    #: The ``approval/asked`` data of the approvals not yet decided, in order (§17.1).
    approvals: list[ApprovalAsked] = field(default_factory=list)
    #: The parked turn, as ``store.peek`` gives it (§17.2).
    parked: ParkedTurn | None = None

    def apply(self, event: Event) -> None:
        seq = event["seq"]
        # Only splices change the inbox (the fold keeps the seq itself), and a fork's
        # seeded events replay nothing: its inbox starts empty (SPEC §6).
        if event["type"] == _SPLICED and seq >= self.header.get("seedLength", 0):
            self.projection.apply(event)
        if event["type"] == "turn/start":
            self.open_turn = cast(int, event["data"]["turn"])
        elif event["type"] == "turn/end":
            self.open_turn = None
        self.approve(event)
        self.next_seq = seq + 1
        self.keep(event)
        if seq % SNAPSHOT_EVERY == SNAPSHOT_EVERY - 1:
            self.snapshots.append(self.baseline())

    def approve(self, event: Event) -> None:
        """Folds an approval event (§17.1, §17.2) into the pending ones and the parked
        turn; a turn's end leaves neither."""
        kind, data = event["type"], event["data"]
        if kind == "approval/asked":
            self.approvals.append(cast(ApprovalAsked, data))
        elif kind == "approval/decided":
            self.approvals = [a for a in self.approvals if a["id"] != data["id"]]
        elif kind == "turn/parked":
            self.parked = {
                "turn": data["turn"],
                "approvals": list(data["approvals"]),
                "ready": False,
            }
        elif kind == "turn/resumed":
            self.parked = None
        elif kind == "turn/end":
            self.parked = None
            self.approvals = []
        else:
            return
        if self.parked is not None:
            pending = {a["id"] for a in self.approvals}
            ready = not pending.intersection(self.parked["approvals"])
            self.parked = {**self.parked, "ready": ready}

    def keep(self, event: Event) -> None:
        """Keeps ``event`` as the latest, forgetting the oldest past the bounds."""
        if self.history <= 0:
            return
        size = len(json.dumps(event, ensure_ascii=False, separators=(",", ":")).encode())
        self.recent.append(event)
        self.sizes.append(size)
        self.kept += size
        while self.recent and (len(self.recent) > RECENT or self.kept > self.history):
            self.recent.popleft()
            self.kept -= self.sizes.popleft()

    def baseline(self) -> Baseline:
        return _baseline(self.next_seq - 1 if self.next_seq else None, self.projection)

    def close(self) -> None:
        if self.follower is not None:
            self.follower.close()
            self.follower = None


class Reader:
    """The reads of one store that keep state between requests: the fold of each
    recently seen session, its latest events bounded in bytes per session and in
    total (``limits``). Safe to use from several threads."""

    def __init__(self, store: inboxlog.Store, limits: Limits | None = None) -> None:
        self.store = store
        self.limits = limits or Limits()
        self._folds: OrderedDict[str, _Fold] = OrderedDict()
        self._lock = threading.Lock()
        self._session_locks: dict[str, threading.Lock] = {}

    def _session_lock(self, id: str) -> threading.Lock:
        with self._lock:
            return self._session_locks.setdefault(id, threading.Lock())

    def _start(self, id: str) -> _Fold:
        """A new fold of session ``id``: its state from ``store.peek`` and its latest
        events from ``store.tail`` (those the peek covers: the follower takes the rest)."""
        peek = self.store.peek(id)
        fold = _Fold(peek["header"], next_seq=peek["events"], history=self.limits.history_bytes)
        fold.open_turn = peek["openTurn"]
        fold.approvals = list(peek["approvals"])
        fold.parked = peek["parked"]
        fold.projection = inboxlog.QueueProjection(peek["baseline"])
        if peek["baseline"]["seq"] is not None:
            # The inbox as of an earlier event replays from the closest snapshot before.
            fold.snapshots.append(peek["baseline"])
        for event in self.store.tail(id, RECENT):
            if event["seq"] < fold.next_seq:
                fold.keep(event)
        return fold

    def fold(self, id: str) -> _Fold:
        """Session ``id``'s fold brought up to its last committed event. A log deleted
        since (and perhaps created again under the same id) fails its follower's next
        read with ``NotFoundError`` (SPEC §11.2), and is folded anew."""
        with self._session_lock(id):
            with self._lock:
                fold = self._folds.pop(id, None)
            try:
                if fold is not None:
                    try:
                        self._extend(fold)
                    except inboxlog.NotFoundError:
                        # Deleted meanwhile (and perhaps created again): fold anew.
                        fold.close()
                        fold = None
                if fold is None:
                    fold = self._start(id)
                    self._extend(fold)
            except BaseException:
                if fold is not None:
                    fold.close()
                raise
            with self._lock:
                self._folds[id] = fold
                kept = sum(f.kept for f in self._folds.values())
                while len(self._folds) > 1 and (
                    len(self._folds) > FOLDS_KEPT or kept > self.limits.histories_bytes
                ):
                    oldest = self._folds.popitem(last=False)[1]
                    kept -= oldest.kept
                    oldest.close()
            return fold

    def release(self, id: str) -> None:
        """Forgets session ``id``'s fold (no client follows it any more); the next
        request folds it anew from its checkpoint."""
        with self._session_lock(id):
            with self._lock:
                fold = self._folds.pop(id, None)
            if fold is not None:
                fold.close()

    def held(self) -> dict[str, int]:
        """The bytes of latest events kept, by session."""
        with self._lock:
            return {id: fold.kept for id, fold in self._folds.items()}

    def _extend(self, fold: _Fold) -> None:
        """Folds the events committed since ``fold`` was last brought up to date."""
        if fold.follower is None:
            fold.follower = self.store.follow(fold.header["id"], fold.next_seq)
        while batch := fold.follower.next_batch(0):
            for event in batch:
                fold.apply(event)

    def events(self, id: str, since: int, limit: int) -> dict[str, Any]:
        """A page of session ``id``'s events from seq ``since`` (see :func:`events`),
        from the fold's latest events when it holds them."""
        fold = self.fold(id)
        with self._session_lock(id):
            recent = list(fold.recent)
            end = fold.next_seq
        if (recent and recent[0]["seq"] <= since) or since >= end:
            page = [e for e in recent if e["seq"] >= since][:limit]
            more = bool(page) and page[-1]["seq"] + 1 < end
            return {"events": page, "next": page[-1]["seq"] + 1 if more else None}
        return events(self.store, id, since, limit)

    def summary(self, id: str) -> dict[str, Any]:
        """``{"header","lastSeq","openTurn","baseline","approvals","parked"}`` of session
        ``id``: ``approvals`` the pending ones (``approval/asked`` data, in order) and
        ``parked`` the parked turn (``{"turn","approvals","ready"}`` or ``None``), as
        ``store.peek`` gives them, all as of ``lastSeq``."""
        fold = self.fold(id)
        with self._session_lock(id):
            baseline = fold.baseline()
            return {
                "header": fold.header,
                "lastSeq": baseline["seq"],
                "openTurn": fold.open_turn,
                "baseline": baseline,
                "approvals": list(fold.approvals),
                "parked": fold.parked,
            }

    def baseline(self, id: str, at: int | None) -> Baseline:
        """The inbox of session ``id`` as of the event at seq ``at`` (at the end when
        ``None``); ``invalid_input`` for an ``at`` past the last event."""
        fold = self.fold(id)
        with self._session_lock(id):
            end = fold.baseline()
            if at is None or at == end["seq"]:
                return end
            if end["seq"] is None or at > end["seq"]:
                raise invalid(f"at {at} is past the last event of session {id!r}")
            snapshots = [s for s in fold.snapshots if s["seq"] is not None and s["seq"] <= at]
        start = snapshots[-1] if snapshots else None
        partial = _Fold(fold.header, history=0)
        if start is not None:
            partial.projection = inboxlog.QueueProjection(start)
            partial.next_seq = cast(int, start["seq"]) + 1
        for event in read(self.store, id, partial.next_seq, at + 1 - partial.next_seq):
            partial.apply(event)
        return partial.baseline()


async def post(store: inboxlog.aio.Store, id: str, body: Mapping[str, Any]) -> dict[str, str]:
    """``store.post`` of ``{"target","message"}`` (SPEC §11.1)."""
    target, message = target_of(body.get("target")), message_of(body)
    return {"post": await store.post(id, target, message)}


async def remove(store: inboxlog.aio.Store, id: str, body: Mapping[str, Any]) -> dict[str, str]:
    """``store.remove_pending`` of ``{"id"}`` (SPEC §11.3)."""
    return {"post": await store.remove_pending(id, id_of(body))}


async def replace(store: inboxlog.aio.Store, id: str, body: Mapping[str, Any]) -> dict[str, str]:
    """``store.replace_pending`` of ``{"id","message"}`` (SPEC §11.3)."""
    message_id, message = id_of(body), message_of(body)
    return {"post": await store.replace_pending(id, message_id, message)}


#: The largest index a move takes: a safe integer (SPEC §3.4), exact in any JSON reader.
MAX_INDEX = 2**53 - 1


async def move(store: inboxlog.aio.Store, id: str, body: Mapping[str, Any]) -> dict[str, str]:
    """``store.move_pending`` of ``{"id","target","index"?}`` (SPEC §17.5)."""
    message_id, target, index = id_of(body), target_of(body.get("target")), body.get("index")
    if index is not None and (
        not isinstance(index, int) or isinstance(index, bool) or not 0 <= index <= MAX_INDEX
    ):
        raise invalid('"index" must be a non-negative safe integer when given')
    return {"post": await store.move_pending(id, message_id, target, index)}


_OUTCOMES = ("allowed-once", "rejected", "cancelled", "unavailable")


async def decide(store: inboxlog.aio.Store, id: str, body: Mapping[str, Any]) -> dict[str, str]:
    """``store.decide`` of ``{"id","outcome"}`` (SPEC §17.3)."""
    approval_id, outcome = body.get("id"), body.get("outcome")
    if not isinstance(approval_id, str):
        raise invalid('"id" must be the approval\'s id (a string)')
    if outcome not in _OUTCOMES:
        raise invalid('"outcome" must be one of ' + ", ".join(f'"{o}"' for o in _OUTCOMES))
    return {"post": await store.decide(id, approval_id, cast(ApprovalOutcome, outcome))}


__all__ = [
    "EVENTS_LIMIT",
    "SESSIONS_LIMIT",
    "Reader",
    "decide",
    "error_body",
    "events",
    "move",
    "post",
    "remove",
    "replace",
    "sessions",
    "status_of",
]
