"""What an ADK session's log holds, and how it is read back: the record types, the
session as folded from its records (:class:`Stored`), and the read of a session's last
events from the end of its log (:func:`read_recent`).

An ``adk/event`` record is ``{"event", "n", "head" | "from"}``: the ADK event, the count
``n`` of ``adk/event`` records up to and including this one, and either ``head``, the
session as the created record gives it (``{"app", "user", "session", "time"}``) with the
session-scoped state after this event as ``state``, or ``from``, the seq of the latest
record that carries one (an ``adk/event`` with ``head``, or the ``adk/session`` record).
The session's state is the state of the record ``from`` names with the session-scoped
deltas of the events after it folded in, and ``n`` is the revision marker: so the last
events and the records from the last ``head`` on answer ``get_session`` with
``num_recent_events``, not the whole log. A writer stores ``head`` once the bytes of the
events stored since the last one reach :data:`HEAD_AFTER` times that head's size (and
in its first event after taking the session), so the records from ``from`` on are at
most about ``HEAD_AFTER + 1`` heads (plus what other writers of the session's log, the
plugin's turns and the posts, add between them), and the heads add at most
``1 / HEAD_AFTER`` to what the events take. Records written before ``n`` existed have
neither field: a log whose last event lacks ``n`` is folded whole.

The shared state's logs are read the same way (:func:`scope_state`): an ``adk/state``
record also carries ``state``, the scope's whole state after it, once the records since
the last one with a state weigh ``HEAD_AFTER`` times that state, else ``base``, that
record's seq (the ``adk/scope`` record counts as the empty state); its writer holds the
log while it works it out (:func:`scope_record`).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.sessions import _session_util

import inboxlog
from inboxlog.types import Event as LogEvent

CREATED = "adk/session"
"""The first record of an ADK session's log: ``{"app", "user", "session", "state",
"time"}``."""
EVENT = "adk/event"
"""One stored ADK event: ``{"event": <Event as JSON>, "n": N, "head": {...} | "from":
seq}`` (``n``, ``head`` and ``from``: see the module doc; absent in older logs)."""
SCOPE = "adk/scope"
"""The first record of a shared state log: ``{"app"[, "user"]}``."""
STATE = "adk/state"
"""One delta of shared state: ``{"delta": {...}, "from": <session log id>, "seq": N}``."""

HEAD_AFTER = 4
"""A writer stores the session's ``head`` in an event once the events stored since the
last head weigh this many times that head (JSON bytes)."""
MARKER = "inboxlog:"
"""The prefix of the revision marker a session object carries (then the event count)."""


def _size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


def session_delta(event: dict[str, Any]) -> dict[str, Any]:
    """The session-scoped part of a stored event's state delta."""
    delta = (event.get("actions") or {}).get("state_delta")
    return _session_util.extract_state_delta(delta)["session"] if delta else {}


@dataclass
class Stored:
    """One ADK session as its log holds it: ids, session-scoped state, and each event's
    timestamp, id and JSON, in order (the last ones only after :func:`read_recent`)."""

    app: str
    user: str
    session: str
    created: float
    state: dict[str, Any]
    events: list[tuple[float, str, dict[str, Any]]] = field(default_factory=list)
    skipped: int = 0
    """Events of the log before ``events`` (not read)."""
    updated: float | None = None
    """The last event's timestamp when ``events`` may not hold it."""
    last_state_seq: int = 0
    """The seq of the last record with app or user deltas (0: the created record)."""
    last_state_delta: dict[str, Any] = field(default_factory=dict)
    head_seq: int = 0
    """The seq of the latest record that carries the session's head."""
    since_head: int = 0
    """The JSON bytes of the events stored after that record."""
    head_size: int = 0
    """The JSON bytes of that head (0: the next event stores one)."""

    @property
    def last_update(self) -> float:
        """``last_update_time``: the last event's timestamp, else the creation time."""
        if self.events:
            return self.events[-1][0]
        return self.created if self.updated is None else self.updated

    @property
    def count(self) -> int:
        """How many events the log holds."""
        return self.skipped + len(self.events)

    @property
    def marker(self) -> str:
        """The storage revision a session object read from this state carries."""
        return f"{MARKER}{self.count}"

    def snapshot(self) -> Stored:
        """A copy that later appends leave as it is."""
        return dataclasses.replace(self, state=dict(self.state), events=list(self.events))

    def record(self, event: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """The ``adk/event`` record data a writer appends for ``event`` next, and the
        event's size (then :meth:`apply` both with its seq)."""
        data: dict[str, Any] = {"event": event, "n": self.count + 1}
        size = _size(event)
        if self.head_size and self.since_head + size < HEAD_AFTER * self.head_size:
            data["from"] = self.head_seq
            return data, size
        data["head"] = {
            "app": self.app,
            "user": self.user,
            "session": self.session,
            "time": self.created,
            "state": {**self.state, **session_delta(event)},
        }
        return data, size

    def apply(self, seq: int, data: dict[str, Any], size: int | None = None) -> None:
        """Folds one ``adk/event`` record in (``size``: its event's, when known)."""
        event = data["event"]
        self.events.append((float(event.get("timestamp", 0.0)), str(event.get("id", "")), event))
        delta = (event.get("actions") or {}).get("state_delta")
        if delta:
            scoped = _session_util.extract_state_delta(delta)
            self.state.update(scoped["session"])
            if scoped["app"] or scoped["user"]:
                self.last_state_seq = seq
                self.last_state_delta = delta
        if "head" in data:
            self.head_seq, self.since_head = seq, 0
            self.head_size = _size(data["head"])
        else:
            self.since_head += (_size(event) if size is None else size) if self.head_size else 0


def unanswered_calls(
    events: Sequence[dict[str, Any]], *, placeholders: bool = True
) -> list[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The function calls among stored ADK ``events`` (as JSON) that no later event
    answers (a ``function_response`` with its id), with the event that made them, in
    order. Calls without an id are left out (nothing could answer them by id), and so
    are long-running ones (ADK waits for their answer from elsewhere). Without
    ``placeholders``, ADK's placeholder for a call waiting for its confirmation is no
    answer."""
    answered = {
        part["function_response"].get("id")
        for event in events
        for part in (event.get("content") or {}).get("parts") or ()
        if part.get("function_response")
        and (
            placeholders
            or part["function_response"].get("id")
            not in ((event.get("actions") or {}).get("requested_tool_confirmations") or {})
        )
    }
    found = []
    for event in events:
        calls = [
            part["function_call"]
            for part in (event.get("content") or {}).get("parts") or ()
            if part.get("function_call") and part["function_call"].get("id") not in answered
        ]
        waits = set(event.get("long_running_tool_ids") or ())
        calls = [c for c in calls if c.get("id") and c["id"] not in waits]
        if calls:
            found.append((event, calls))
    return found


def is_error(result: dict[str, Any]) -> bool:
    """Whether a ``tool/result``'s data says its call failed (``isError``)."""
    return any(
        isinstance(block, dict) and block.get("type") == "tool-result" and block.get("isError")
        for block in (result.get("message") or {}).get("content") or ()
    )


def _start(seq: int, head: dict[str, Any]) -> Stored:
    return Stored(
        app=head["app"],
        user=head["user"],
        session=head["session"],
        created=float(head["time"]),
        state=dict(head["state"]),
        head_seq=seq,
    )


def fold(events: Sequence[LogEvent]) -> Stored | None:
    """The ADK session a log's events hold (``None``: not an ADK session's log). The
    next event it is the writer of stores a head (``head_size`` 0)."""
    start = next((i for i, e in enumerate(events) if e["type"] == CREATED), None)
    if start is None:
        return None
    stored = _start(events[start]["seq"], events[start]["data"])
    stored.last_state_delta = dict(events[start]["data"].get("scoped") or {})
    for event in events[start + 1 :]:
        if event["type"] == EVENT:
            stored.apply(event["seq"], event["data"])
    stored.head_size = stored.since_head = 0
    return stored


def fold_scope(events: Sequence[LogEvent]) -> dict[str, Any]:
    """A shared state log's state: its deltas in log order."""
    state: dict[str, Any] = {}
    for event in events:
        if event["type"] == STATE:
            state.update(event["data"]["delta"])
    return state


def _scope_from(records: Sequence[LogEvent]) -> tuple[dict[str, Any], int, int] | None:
    """The state a shared state log's ``records`` hold when the first is a base (the
    ``adk/scope`` record, or an ``adk/state`` with ``state``), with the base's size and
    the bytes of the deltas after it; ``None`` when it is not."""
    first = records[0] if records else None
    if first is not None and first["type"] == SCOPE:
        state: dict[str, Any] = {}
    elif first is not None and first["type"] == STATE and "state" in first["data"]:
        state = dict(first["data"]["state"])
    else:
        return None
    size, since = _size(state), 0
    for record in records[1:]:
        if record["type"] == STATE:
            state.update(record["data"]["delta"])
            since += _size(record["data"])
    return state, size, since


def scope_record(log: inboxlog.Session, record: dict[str, Any]) -> dict[str, Any]:
    """The ``adk/state`` record ``record`` (``delta``, ``from``, ``seq``) as the writer
    of the shared state log ``log`` appends it: with ``state``, the whole state after
    it, once the records since the last one with a state weigh :data:`HEAD_AFTER` times
    that state (or when the log has none yet), else with ``base``, that record's seq."""
    delta = record["delta"]
    last = log.events(log.last_seq or 0)[-1:]
    base = last[0]["seq"] if last and last[0]["type"] == SCOPE else None
    if last and last[0]["type"] == STATE:
        data = last[0]["data"]
        base = last[0]["seq"] if "state" in data else data.get("base")
    found = None if base is None else _scope_from(log.events(int(base)))
    if found is None or found[2] + _size(record) >= HEAD_AFTER * found[1]:
        state = fold_scope(log.events()) if found is None else found[0]
        return {**record, "state": {**state, **delta}}
    return {**record, "base": base}


def scope_state(store: inboxlog.Store, log_id: str) -> dict[str, Any]:
    """A shared state log's state, read from its end without owning it: the last record
    and, when it does not hold the state, the records from its ``base`` on (a log
    written before the bases is read whole). Raises ``NotFoundError`` when there is no
    log ``log_id``."""
    last = store.tail(log_id, 1)
    data = last[0]["data"] if last and last[0]["type"] == STATE else None
    if data is not None and "state" in data:
        return dict(data["state"])
    if data is not None and "base" in data:
        records = [e for e in store.read(log_id, int(data["base"])) if e["seq"] <= last[0]["seq"]]
        found = _scope_from(records)
        if found is not None and records[0]["seq"] == data["base"]:
            return found[0]
    return fold_scope(store.inspect(log_id)[1])


def _last_events(store: inboxlog.Store, log_id: str, want: int) -> list[LogEvent]:
    """The last ``want`` ``adk/event`` records of log ``log_id`` (fewer when it holds
    fewer), oldest first: its last records of any type, four times as many while too
    few of them are events. (``store.tail`` with ``types`` answers the same, but on
    PostgreSQL its typed query grows with the session's length.)"""
    limit = want + 4
    while True:
        records = store.tail(log_id, limit)
        events = [e for e in records if e["type"] == EVENT]
        if len(events) >= want or len(records) < limit:
            return events[-want:]
        limit *= 4


def read_recent(store: inboxlog.Store, log_id: str, recent: int) -> Stored | None:
    """Session ``log_id`` with its last ``recent`` events, read from the end of its log
    without owning it: the last events (``store.tail``) and, when the latest head is
    older than them, the records from it on (``store.read``). A log without the counts
    (written before them) or without events is read whole. ``None``: not an ADK
    session's log. Raises ``NotFoundError`` when there is no log ``log_id``."""
    tail = _last_events(store, log_id, max(recent, 1))
    last = tail[-1] if tail else None
    if last is None or "n" not in last["data"]:
        return fold(store.inspect(log_id)[1])
    data = last["data"]
    head_seq = last["seq"] if "head" in data else int(data["from"])
    if tail[0]["seq"] <= head_seq:
        records = [e for e in tail if e["seq"] >= head_seq]
    else:
        records = [e for e in store.read(log_id, since=head_seq) if e["seq"] <= last["seq"]]
    first = records[0] if records else None
    if first is None or first["seq"] != head_seq:
        return fold(store.inspect(log_id)[1])  # a pointer that does not hold: read it all
    if first["type"] == CREATED:
        stored = _start(head_seq, first["data"])
    elif first["type"] == EVENT and "head" in first["data"]:
        stored = _start(head_seq, first["data"]["head"])
    else:
        return fold(store.inspect(log_id)[1])
    for record in records[1:]:
        if record["type"] == EVENT:
            stored.state.update(session_delta(record["data"]["event"]))
    for record in tail[-recent:] if recent else ():
        event = record["data"]["event"]
        stored.events.append((float(event.get("timestamp", 0.0)), str(event.get("id", "")), event))
    stored.skipped = int(data["n"]) - len(stored.events)
    stored.updated = float(data["event"].get("timestamp", 0.0))
    return stored
