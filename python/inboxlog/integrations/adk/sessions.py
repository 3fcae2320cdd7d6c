"""ADK's session service on inboxlog: :class:`InboxlogSessionService` keeps ADK's
``BaseSessionService`` contract (google-adk 2.13) over any store, memory, JSONL or
PostgreSQL.

Where things are kept (ids: :mod:`inboxlog.integrations.adk.ids`):

- An ADK session is one log. Its first record, ``adk/session {"app", "user",
  "session", "state", "time"}``, is written with the log itself (a seed, so a log never
  exists without it; a log made by other means, e.g. to post to it before the session
  was created, gets it appended by ``create_session``): the ids as ADK gave them, the
  session-scoped initial state and the creation time in seconds. Each stored event is
  one ``adk/event {"event", "n", "head" | "from"}`` record, the ADK event as
  ``Event.model_dump(mode="json", exclude_none=True)`` with its ``temp:`` keys trimmed,
  the event count and the session's head (ids, time and state after it) or the seq of
  the latest record with one (:mod:`inboxlog.integrations.adk.stored`). Session state
  is the initial state with every event's session-scoped delta applied in log order;
  ``last_update_time`` is the last event's timestamp. The log is only ever appended: a
  read filtered by ``GetSessionConfig`` leaves every record where it is, and an append
  after it continues the whole history.
- **Reads from the end.** A session this service does not hold is read from the store
  without owning it. ``get_session`` with ``num_recent_events`` (alone or with
  ``after_timestamp``) and ``list_sessions`` read its last events (``store.tail``) and
  the records from the latest head on (``store.read``): at most about
  ``stored.HEAD_AFTER + 1`` heads' weight, whatever the history's length. A full
  ``get_session``, or one with ``after_timestamp`` alone, reads the whole log; so does
  any read of a log written before the counts (until a writer appends to it: its first
  event after taking the session carries a head).
- App and user state, shared by many sessions, are logs of their own (``adka.<app>``,
  ``adku.<app>.<user>``) of ``adk/state {"delta", "from", "seq", "state" | "base"}``
  records; the state is the deltas folded in log order, which a record's ``state``
  holds whole (then a reader stops there) or ``base`` names the latest record that
  does, written as a session's head is. **No update is lost**: a writer records only its delta
  (it never rewrites the whole state from a copy it read), and it appends while holding
  the scope log as its one writer (SPEC §7.3, §10.3), so two workers' deltas are
  serialized by the store, each kept whole; the same key written by both ends as the
  later append wrote it, as in ADK's own services. A writer that finds the scope held
  retries after a short pause (the holder appends one record and lets go).
- An event with app or user deltas is appended to the session's log first, then to the
  scopes, each scope record naming the event (``from``: the session's log, ``seq``: the
  event's). A process killed in between is repaired when the session is next taken
  for writing: the last state-bearing record's scope deltas are applied if the scope does
  not name it yet. Never twice, never lost.

**Calls a crash cut off.** ADK stores a model's function calls before its tools run, and
a worker killed inside a tool leaves one without an answer in ADK's history; the log
answers it when it is next opened (SPEC §15.4, the ``tool/result`` the plugin's
``tool/call`` lets repair write). Taking the session for writing gives ADK that answer:
for each function call no event answers and the log has a ``tool/result`` for, one
``adk/event`` of the calling agent with the ``function_response`` (``{"error": text}``
and the result's code as ``error_code``, as ADK seals an aborted run's calls, or
``{"result": text}``). So the next model call sees the call answered, and ADK never runs
it again by itself.

**One writer per session.** ``append_event`` takes the session's log as its writer and
keeps it (reads of a session this service holds come from what it keeps in memory). A
second worker's ``append_event`` on that session is refused with
:class:`inboxlog.LockedError` before anything is written, so two runs can never interleave
one history (google/adk-python#4751). A session object read before another worker
appended is refused with ADK's ``StaleSessionError`` when this service takes the session,
also before writing. Input from a second writer that should reach a running agent (the
user's follow-up while the agent runs) goes to the session's inbox with ``store.post``
instead, which the running turn takes in at its next model call (the plugin,
:mod:`inboxlog.integrations.adk.plugin`): it never makes the runner fail. The service
lets a session go with :meth:`InboxlogSessionService.release` (the plugin does at the end
of each run) or all at :meth:`InboxlogSessionService.close`.

Every call runs its log work in one worker thread (``_common.call``), never on the
event loop, and nothing is tied to one loop: ``Runner.run``'s thread with its own loop
works as ``run_async`` does.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions import _session_util
from google.adk.sessions.base_session_service import (
    BaseSessionService,
    GetSessionConfig,
    ListSessionsResponse,
)
from google.adk.sessions.session import Session
from google.adk.sessions.state import State
from google.genai import types
from typing_extensions import override

import inboxlog
from inboxlog.integrations._common import call
from inboxlog.integrations._driver import answers, result_text
from inboxlog.integrations.adk import ids
from inboxlog.integrations.adk.stored import (
    CREATED,
    EVENT,
    MARKER,
    SCOPE,
    STATE,
    is_error,
    read_recent,
    scope_record,
    scope_state,
    unanswered_calls,
)
from inboxlog.integrations.adk.stored import Stored as _Stored
from inboxlog.integrations.adk.stored import fold as _fold
from inboxlog.types import Event as LogEvent

try:
    from google.adk.errors._stale_session_error import StaleSessionError
except ModuleNotFoundError:  # pragma: no cover - ADK before the error had a module
    StaleSessionError = ValueError  # type: ignore[assignment,misc]

_SCOPE_TRIES = 2000
"""How often a shared-state write tries a scope log another writer holds (each holder
appends one record and lets go) before it gives up with ``LockedError``."""


@dataclass
class _Held:
    """A session this service holds as its writer, with what its log holds."""

    log: inboxlog.Session
    stored: _Stored
    lock: threading.Lock = field(default_factory=threading.Lock)


class InboxlogSessionService(BaseSessionService):
    """ADK's ``BaseSessionService`` on an inboxlog ``store`` (any backend).

    ``log_id(app_name, user_id, session_id)`` names the log of an ADK session when the
    default (:func:`ids.session_id`) will not do, e.g. for logs named by an application
    already: it must give a valid, distinct id for each session (listing then reads the
    first record of every log in the store).

    Safe to share between tasks, threads and event loops of one process; workers in
    other processes share the store. :meth:`release` lets another worker take a session
    this one wrote; :meth:`close` lets all go.
    """

    def __init__(
        self, store: inboxlog.Store, *, log_id: Callable[[str, str, str], str] | None = None
    ) -> None:
        self.store = store
        self._log_id = log_id or ids.session_id
        self._held: dict[str, _Held] = {}
        self._lock = threading.Lock()
        self._deferred: dict[str, str] = {}
        self._on_let_go: dict[str, Callable[[], None]] = {}
        self._deferred_events: dict[tuple[str, str], Event] = {}

    def log_id(self, app_name: str, user_id: str, session_id: str) -> str:
        """The inboxlog id of ADK session ``(app_name, user_id, session_id)``: the id that
        ``store.post``, ``store.decide``, ``inboxlog approve`` and the console know it by,
        so that steering it from elsewhere needs no knowledge of the encoding."""
        return self._log_id(app_name, user_id, session_id)

    # -- create ------------------------------------------------------------------------

    @override
    async def create_session(
        self,
        *,
        app_name: str,
        user_id: str,
        state: dict[str, Any] | None = None,
        session_id: str | None = None,
    ) -> Session:
        session_id = session_id.strip() if session_id else None
        given = session_id is not None
        session_id = session_id or str(uuid.uuid4())
        return await call(self._create, app_name, user_id, session_id, given, state or {})

    def _create(
        self, app: str, user: str, session: str, given: bool, state: dict[str, Any]
    ) -> Session:
        scoped = _session_util.extract_json_safe_state_delta(state)
        now = time.time()
        head: dict[str, Any] = {
            "app": app,
            "user": user,
            "session": session,
            "state": scoped["session"],
            "time": now,
        }
        shared = {
            **{State.APP_PREFIX + k: v for k, v in scoped["app"].items()},
            **{State.USER_PREFIX + k: v for k, v in scoped["user"].items()},
        }
        if shared:
            head["scoped"] = shared
        log_id = self._log_id(app, user, session)
        record: LogEvent = {"type": CREATED, "seq": 0, "time": int(now * 1000), "data": head}
        try:
            self.store.create(log_id, seed=[record]).close()
        except inboxlog.AlreadyExistsError:
            if not given:  # pragma: no cover - a uuid4 taken already
                raise
            # A log made by other means (e.g. to post to it first) becomes the ADK
            # session's when it holds no ADK session yet.
            exists = AlreadyExistsError(f"Session with id {session} already exists.")
            if log_id in self._held or _fold(self.store.inspect(log_id)[1]) is not None:
                raise exists from None
            with self.store.open(log_id) as log:
                if _fold(log.events()) is not None:  # made meanwhile
                    raise exists from None
                log.append(CREATED, head)
        self._share(app, user, shared, log_id, 0)
        stored = _fold([record])
        assert stored is not None
        return self._session(stored, None)

    # -- read --------------------------------------------------------------------------

    @override
    async def get_session(
        self,
        *,
        app_name: str,
        user_id: str,
        session_id: str,
        config: GetSessionConfig | None = None,
    ) -> Session | None:
        session_id = session_id.strip() if session_id else session_id
        return await call(self._get, app_name, user_id, session_id, config)

    def _get(
        self, app: str, user: str, session: str, config: GetSessionConfig | None
    ) -> Session | None:
        recent = None if config is None else config.num_recent_events
        stored = self._read(self._log_id(app, user, session), (app, user, session), recent)
        return None if stored is None else self._session(stored, config)

    def _read(
        self, log_id: str, names: tuple[str, str, str] | None, recent: int | None = None
    ) -> _Stored | None:
        """What session ``log_id`` holds: from memory when this service holds it, else
        read from the store without locking, whole or, given ``recent``, with its last
        ``recent`` events only, read from the end. ``names`` checks the ids a hashed id
        stands for."""
        held = self._held.get(log_id)
        if held is not None:
            with held.lock:
                return held.stored.snapshot()
        try:
            if recent is not None:
                stored = read_recent(self.store, log_id, recent)
            else:
                stored = _fold(self.store.inspect(log_id)[1])
        except inboxlog.NotFoundError:
            return None
        if stored is None or (
            names is not None and (stored.app, stored.user, stored.session) != names
        ):
            return None
        return stored

    def _session(self, stored: _Stored, config: GetSessionConfig | None) -> Session:
        """The ADK session ``stored`` is, its events chosen by ``config``, its state
        merged with the app's and the user's."""
        events = stored.events
        if config is not None:
            if config.num_recent_events is not None:
                events = events[-config.num_recent_events :] if config.num_recent_events else []
            if config.after_timestamp is not None:
                i = len(events)
                while i > 0 and events[i - 1][0] >= config.after_timestamp:
                    i -= 1
                events = events[i:]
        session = Session(
            app_name=stored.app,
            user_id=stored.user,
            id=stored.session,
            state=self._merged(stored, self._app_state(stored.app), None),
            events=[Event.model_validate(data) for _, _, data in events],
            last_update_time=stored.last_update,
        )
        session._storage_update_marker = stored.marker
        return session

    def _merged(
        self, stored: _Stored, app_state: dict[str, Any], user_state: dict[str, Any] | None
    ) -> dict[str, Any]:
        if user_state is None:
            user_state = self._user_state(stored.app, stored.user)
        state = copy.deepcopy(stored.state)
        state.update({State.APP_PREFIX + k: v for k, v in copy.deepcopy(app_state).items()})
        state.update({State.USER_PREFIX + k: v for k, v in copy.deepcopy(user_state).items()})
        return state

    def _scope(self, log_id: str) -> dict[str, Any]:
        try:
            return scope_state(self.store, log_id)
        except inboxlog.NotFoundError:
            return {}

    def _app_state(self, app: str) -> dict[str, Any]:
        return self._scope(ids.app_scope(app))

    def _user_state(self, app: str, user: str) -> dict[str, Any]:
        return self._scope(ids.user_scope(app, user))

    @override
    async def list_sessions(
        self, *, app_name: str, user_id: str | None = None
    ) -> ListSessionsResponse:
        return await call(self._list, app_name, user_id)

    def _list(self, app: str, user: str | None) -> ListSessionsResponse:
        prefix = ids.sessions_prefix(app, user) if self._log_id is ids.session_id else ""
        found: list[_Stored] = []
        for header in self.store.list():
            if header["id"].startswith(prefix):
                stored = self._read(header["id"], None, 0)
                if stored is not None and stored.app == app and user in (None, stored.user):
                    found.append(stored)
        app_state = self._app_state(app)
        users: dict[str, dict[str, Any]] = {}
        sessions = []
        for stored in sorted(found, key=lambda s: (s.last_update, s.user, s.session)):
            if stored.user not in users:
                users[stored.user] = self._user_state(app, stored.user)
            sessions.append(
                Session(
                    app_name=stored.app,
                    user_id=stored.user,
                    id=stored.session,
                    state=self._merged(stored, app_state, users[stored.user]),
                    last_update_time=stored.last_update,
                )
            )
        return ListSessionsResponse(sessions=sessions)

    @override
    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await call(self._user_state, app_name, user_id)

    # -- delete ------------------------------------------------------------------------

    @override
    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        session_id = session_id.strip() if session_id else session_id
        await call(self._delete, self._log_id(app_name, user_id, session_id))

    def _delete(self, log_id: str) -> None:
        """Deletes the log (``LockedError`` while another worker holds it)."""
        self._let_go(log_id)
        with contextlib.suppress(inboxlog.NotFoundError):
            self.store.delete(log_id)

    # -- append ------------------------------------------------------------------------

    @override
    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        return await call(self._append, session, event)

    def _append(self, session: Session, event: Event) -> Event:
        """``append_event``'s work, in one worker-thread call."""
        held = self._take(session)
        log_id = held.log.id
        if event.author == "user" and self._deferred.get(log_id) == event.invocation_id:
            # The run's own message, which the plugin enters at the run's first step:
            # the session object gets it now, the log when it enters.
            del self._deferred[log_id]
            self._deferred_events[(log_id, event.invocation_id)] = event
            self._apply_temp_state(session, event)
            return self._commit_event_to_session(session, self._trim_temp_delta_state(event))
        if self._stored_already(held, event):
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        self._write(held, event.model_dump(mode="json", exclude_none=True))
        session.last_update_time = event.timestamp
        session._storage_update_marker = held.stored.marker
        return self._commit_event_to_session(session, event)

    def _stored_already(self, held: _Held, event: Event) -> bool:
        """Whether ``event`` is stored already, as the in-memory service answers a retried
        append (an equal event of that id)."""
        with held.lock:
            same = [data for _, id, data in held.stored.events if id == event.id]
        return any(Event.model_validate(data) == event for data in same)

    def _take(self, session: Session) -> _Held:
        """The session's log, held as its writer: opened now unless held already (then
        its interrupted state-sharing is finished), after checking that ``session`` is
        no older than the log."""
        log_id = self._log_id(session.app_name, session.user_id, session.id)
        with self._lock:
            held = self._held.get(log_id)
            if held is None:
                try:
                    log = self.store.open(log_id)
                except inboxlog.NotFoundError:
                    raise SessionNotFoundError(f"Session {session.id} not found.") from None
                try:
                    events = log.events()
                    stored = _fold(events)
                    names = (session.app_name, session.user_id, session.id)
                    if stored is None or (stored.app, stored.user, stored.session) != names:
                        raise SessionNotFoundError(f"Session {session.id} not found.")
                    self._check_fresh(session, stored)
                    self._repair(log_id, stored)
                except BaseException:
                    log.close()
                    raise
                held = self._held[log_id] = _Held(log, stored)
                self._answer_cut_off_calls(held, session, events)
            else:
                self._check_fresh(session, held.stored)
        return held

    def _answer_cut_off_calls(
        self, held: _Held, session: Session, events: Sequence[LogEvent]
    ) -> None:
        """Gives ADK the answer to each function call of the session that has none, when
        the log holds one (SPEC §15.4: the ``tool/result`` repair wrote for a call a
        crash cut off, or the tool's own when the worker died before ADK stored it), as
        ADK's own answer to a call: a ``function_response`` event of the calling agent,
        as it seals an aborted invocation's calls. So the next model call sees the call
        answered, and ADK never runs the tool again by itself."""
        with held.lock:
            stored = [data for _, _, data in held.stored.events]
        # A call waiting for a confirmation has ADK's placeholder as its answer; once its
        # turn is no longer parked (cancelled, interrupted), the log's answer is ADK's.
        cut_off = unanswered_calls(stored, placeholders=held.log.parked() is not None)
        found = answers(events) if cut_off else {}
        for call_event, calls in cut_off:
            parts, codes = [], []
            for asked in calls:
                result = found.get(str(asked.get("id")))
                if result is None:
                    continue
                text = result_text(result)
                failed = is_error(result)
                response = {"error": text} if failed else {"result": text}
                answer = types.FunctionResponse(
                    id=asked["id"], name=asked.get("name"), response=response
                )
                parts.append(types.Part(function_response=answer))
                if failed:
                    codes.append(str((result.get("error") or {}).get("code", "TOOL_ERROR")))
            if not parts:
                continue
            event = Event(
                invocation_id=call_event.get("invocation_id", ""),
                author=call_event.get("author", ""),
                branch=call_event.get("branch"),
                isolation_scope=call_event.get("isolation_scope"),
                content=types.Content(role="user", parts=parts),
                error_code=codes[0] if codes else None,
            )
            self._write(held, event.model_dump(mode="json", exclude_none=True))
            self._commit_event_to_session(session, event)
            session.last_update_time = event.timestamp
            session._storage_update_marker = held.stored.marker

    @staticmethod
    def _check_fresh(session: Session, stored: _Stored) -> None:
        marker = session._storage_update_marker
        if marker is not None and marker.startswith(MARKER):
            fresh = marker == stored.marker
        else:  # a session object this service did not make: compare the last event
            last = stored.events[-1][1] if stored.events else None
            fresh = last == (session.events[-1].id if session.events else None)
        if not fresh:
            raise StaleSessionError(
                f"session {session.id} was written since this session object was read: "
                "read it again (get_session) before appending"
            )

    def _repair(self, log_id: str, stored: _Stored) -> None:
        """Applies the last state-bearing record's shared deltas if a killed writer left
        them unapplied (each scope record names the record it came from)."""
        shared = _session_util.extract_state_delta(stored.last_state_delta)
        for scope, delta in (
            (ids.app_scope(stored.app), shared["app"]),
            (ids.user_scope(stored.app, stored.user), shared["user"]),
        ):
            if not delta:
                continue
            try:
                _, events = self.store.inspect(scope)
            except inboxlog.NotFoundError:
                events = []
            if not any(
                e["type"] == STATE
                and e["data"].get("from") == log_id
                and e["data"].get("seq") == stored.last_state_seq
                for e in events
            ):
                self._share_one(
                    scope, stored.app, stored.user, delta, log_id, stored.last_state_seq
                )

    def _write(self, held: _Held, data: dict[str, Any]) -> None:
        """Appends one event to the held log, then its shared deltas to their scopes."""
        with held.lock:
            record, size = held.stored.record(data)
            seq = held.log.append(EVENT, record)["seq"]
            held.stored.apply(seq, record, size)
            stored = held.stored
            delta = dict(stored.last_state_delta) if stored.last_state_seq == seq else {}
        if delta:
            scoped = _session_util.extract_state_delta(delta)
            shared = {
                **{State.APP_PREFIX + k: v for k, v in scoped["app"].items()},
                **{State.USER_PREFIX + k: v for k, v in scoped["user"].items()},
            }
            self._share(stored.app, stored.user, shared, held.log.id, seq)

    def _share(self, app: str, user: str, shared: dict[str, Any], log_id: str, seq: int) -> None:
        """Appends the ``app:`` and ``user:`` keys of ``shared`` to their scopes."""
        scoped = _session_util.extract_state_delta(shared)
        if scoped["app"]:
            self._share_one(ids.app_scope(app), app, None, scoped["app"], log_id, seq)
        if scoped["user"]:
            self._share_one(ids.user_scope(app, user), app, user, scoped["user"], log_id, seq)

    def _share_one(
        self,
        scope: str,
        app: str,
        user: str | None,
        delta: dict[str, Any],
        log_id: str,
        seq: int,
    ) -> None:
        """Appends one delta to a scope log as its writer for that one record, waiting
        while another worker holds it."""
        record = {"delta": delta, "from": log_id, "seq": seq}
        head: dict[str, Any] = {"app": app} if user is None else {"app": app, "user": user}
        for attempt in range(_SCOPE_TRIES):
            try:
                try:
                    log = self.store.open(scope)
                except inboxlog.NotFoundError:
                    first: LogEvent = {
                        "type": SCOPE,
                        "seq": 0,
                        "time": int(time.time() * 1000),
                        "data": head,
                    }
                    try:
                        log = self.store.create(scope, seed=[first])
                    except inboxlog.AlreadyExistsError:
                        continue  # created meanwhile: open it on the next try
            except inboxlog.LockedError:
                if attempt == _SCOPE_TRIES - 1:
                    raise
                time.sleep(0.001 * min(attempt + 1, 20))
                continue
            with log:
                log.append(STATE, scope_record(log, record))
            return

    # -- what the plugin asks ------------------------------------------------------------

    def _defer(self, session: Session, invocation_id: str) -> None:
        """The next user event of ``invocation_id`` is the run's own message: not
        written by ``append_event`` (the plugin enters it at the first step)."""
        log_id = self._log_id(session.app_name, session.user_id, session.id)
        self._deferred[log_id] = invocation_id

    def _deferred_event(self, session: Session, invocation_id: str) -> Event | None:
        """The run's own message ``append_event`` kept out of the log, if any."""
        log_id = self._log_id(session.app_name, session.user_id, session.id)
        self._deferred.pop(log_id, None)
        return self._deferred_events.pop((log_id, invocation_id), None)

    async def _hold(self, session: Session) -> inboxlog.Session:
        """The session's log, held as its writer (taken now if need be)."""
        held = await call(self._take, session)
        return held.log

    def _before_let_go(self, session: Session, fn: Callable[[], None] | None) -> None:
        """``fn`` runs (blocking, the log still held) when the session is let go."""
        log_id = self._log_id(session.app_name, session.user_id, session.id)
        with self._lock:
            if fn is None:
                self._on_let_go.pop(log_id, None)
            else:
                self._on_let_go[log_id] = fn

    def _let_go_now(self, app_name: str, user_id: str, session_id: str) -> None:
        self._let_go(self._log_id(app_name, user_id, session_id))

    # -- letting go --------------------------------------------------------------------

    def writer(self, app_name: str, user_id: str, session_id: str) -> inboxlog.Session | None:
        """The log of a session this service holds as its writer (``None`` when it does
        not): the turn driver writes through it."""
        held = self._held.get(self._log_id(app_name, user_id, session_id))
        return None if held is None else held.log

    async def release(self, *, app_name: str, user_id: str, session_id: str) -> None:
        """Lets the session go, so another worker may write it."""
        await call(self._let_go, self._log_id(app_name, user_id, session_id))

    def _let_go(self, log_id: str) -> None:
        with self._lock:
            held = self._held.pop(log_id, None)
            last_word = self._on_let_go.pop(log_id, None)
        if last_word is not None and held is not None:
            last_word()  # the plugin ends a turn still open (a cancelled run's)
        if held is not None:
            with held.lock:
                held.log.close()

    async def close(self) -> None:
        """Lets every session go."""
        await call(self._close)

    def _close(self) -> None:
        with self._lock:
            held = list(self._held)
        for log_id in held:
            self._let_go(log_id)


__all__ = ["CREATED", "EVENT", "SCOPE", "STATE", "InboxlogSessionService"]
