"""inboxlog as coroutines, for asyncio agent frameworks (ARCHITECTURE.md#python).

The same surface as :mod:`inboxlog`, with every call that touches a log a coroutine
that runs the blocking native call off the event loop, on an executor thread (the
loop's default executor, or the one given to :class:`Store`); the native calls release
the GIL, so many sessions progress at once while the loop stays responsive::

    store = inboxlog.aio.Store("sessions")
    async with await store.create("s1") as s:
        await s.inbox.append("next-turn", {"id": "m1", "content": "hi"})
        await s.open_turn()
        proposal = await s.propose_step()
        await s.decide({"kind": "enter", "messages": proposal["messages"]})
    async for event in store.follow("s1"):
        ...

Observers registered with ``on_event``/``on_inbox`` run on the executor thread that
made the call (synchronously, before it returns, as in the blocking API); use
``loop.call_soon_threadsafe`` to hand their news to the loop.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Coroutine, Mapping, Sequence
from concurrent.futures import Executor
from os import PathLike
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar, overload

from . import _native
from .types import (
    ApprovalAsked,
    ApprovalOutcome,
    Baseline,
    Compacted,
    Decided,
    Durability,
    Event,
    Header,
    Message,
    OpenReport,
    ParkedTurn,
    Peek,
    Proposal,
    Resumed,
    StepBoundary,
    StepOutcome,
    Surface,
    Target,
    TurnEnded,
    UpgradeReport,
    VerifyReport,
)

__all__ = ["Compaction", "Follower", "Inbox", "Session", "Store"]

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., object])
_JSONObject = Mapping[str, Any]

#: How long one wait of a follower lasts on its executor thread: the bound on how long
#: a cancelled ``async for`` keeps that thread.
_FOLLOW_SLICE = 0.25


class _Runner:
    """Runs blocking calls on an executor, off the running loop."""

    def __init__(self, executor: Executor | None) -> None:
        self.executor = executor

    async def run(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args, **kwargs))


class _OpensStore(Protocol):
    def __call__(
        self,
        url_or_path: str | PathLike[str],
        durability: Durability = "sync",
        *,
        schema: str | None = None,
        record_limit: int | None = None,
        max_connections: int | None = None,
        executor: Executor | None = None,
    ) -> Coroutine[Any, Any, Store]: ...


class _OpensSession(Protocol):
    def __call__(self, id: str, takeover: bool = False) -> Coroutine[Any, Any, Session]: ...


async def _open_store(
    url_or_path: str | PathLike[str],
    durability: Durability = "sync",
    *,
    schema: str | None = None,
    record_limit: int | None = None,
    max_connections: int | None = None,
    executor: Executor | None = None,
) -> Store:
    """Opens the store ``url_or_path`` names, as :meth:`inboxlog.Store.open` does
    (``max_connections`` is for PostgreSQL only)."""
    store = await _Runner(executor).run(
        _native.Store.open,
        url_or_path,
        durability,
        schema=schema,
        record_limit=record_limit,
        max_connections=max_connections,
    )
    return Store.wrap(store, executor=executor)


class _StoreOpen:
    """``Store.open``: on the class, ``await Store.open(url_or_path, ...)`` opens a store
    of any backend; on a store, ``await store.open(id)`` opens one of its sessions."""

    @overload
    def __get__(self, instance: None, owner: type[Store] | None = None) -> _OpensStore: ...
    @overload
    def __get__(self, instance: Store, owner: type[Store] | None = None) -> _OpensSession: ...
    def __get__(
        self, instance: Store | None, owner: type[Store] | None = None
    ) -> _OpensStore | _OpensSession:
        if instance is None:
            return _open_store
        return instance._open_session


class Store:
    """A place that holds session logs, with coroutine methods.

    ``await Store.open(url_or_path, durability)`` opens a store of any backend
    (``"memory:"``, a ``postgresql://`` URL, or a JSONL directory), ``await
    Store.postgres(url, ...)`` the PostgreSQL store, ``Store(path, durability)`` is the
    JSONL directory store, ``Store.memory()`` the memory store, and
    ``Store.wrap(store)`` wraps a blocking :class:`inboxlog.Store`.
    ``executor`` runs the blocking calls (default: the loop's default executor).
    """

    def __init__(
        self,
        path: str | PathLike[str],
        durability: Durability = "sync",
        *,
        record_limit: int | None = None,
        executor: Executor | None = None,
    ) -> None:
        self._store = _native.Store(path, durability, record_limit=record_limit)
        self._run = _Runner(executor)

    @classmethod
    def wrap(cls, store: _native.Store, *, executor: Executor | None = None) -> Store:
        """The coroutine face of a blocking ``store`` (both share the same logs)."""
        self = cls.__new__(cls)
        self._store = store
        self._run = _Runner(executor)
        return self

    @classmethod
    def memory(cls, *, executor: Executor | None = None) -> Store:
        """A store in process memory."""
        return cls.wrap(_native.Store.memory(), executor=executor)

    @classmethod
    async def postgres(
        cls,
        url: str,
        schema: str = "inboxlog",
        durability: Durability = "sync",
        *,
        record_limit: int | None = None,
        max_connections: int | None = None,
        executor: Executor | None = None,
    ) -> Store:
        """The PostgreSQL store at ``url``, connected on the executor; arguments as
        :meth:`inboxlog.Store.postgres` (``max_connections`` bounds the connections
        the store holds, however many sessions are open: default 8, at least 2)."""
        store = await _Runner(executor).run(
            _native.Store.postgres,
            url,
            schema,
            durability,
            record_limit=record_limit,
            max_connections=max_connections,
        )
        return cls.wrap(store, executor=executor)

    @property
    def sync(self) -> _native.Store:
        """The blocking store underneath."""
        return self._store

    async def create(self, id: str, **meta: Any) -> Session:
        """Starts a new log ``id``; keywords as :meth:`inboxlog.Store.create`."""
        return Session(await self._run.run(self._store.create, id, **meta), self._run)

    open = _StoreOpen()

    async def _open_session(self, id: str, takeover: bool = False) -> Session:
        """Opens log ``id`` for writing (replay, repair, posted messages taken in);
        ``takeover`` as :meth:`inboxlog.Store.open`."""
        return Session(await self._run.run(self._store.open, id, takeover), self._run)

    async def fork(self, parent_id: str, child_id: str, **meta: Any) -> Session:
        """Forks ``parent_id`` into ``child_id``."""
        return Session(
            await self._run.run(self._store.fork, parent_id, child_id, **meta), self._run
        )

    async def inspect(self, id: str) -> tuple[Header, list[Event]]:
        """Reads log ``id`` as stored: ``(header, events)``."""
        return await self._run.run(self._store.inspect, id)

    async def read(self, id: str, since: int = 0) -> list[Event]:
        """The events of log ``id`` with ``seq >= since``, without owning it
        (:meth:`inboxlog.Store.read`)."""
        return await self._run.run(self._store.read, id, since)

    async def tail(self, id: str, limit: int, types: Sequence[str] | None = None) -> list[Event]:
        """The last ``limit`` events of log ``id`` (of ``types``), oldest first,
        without owning it (:meth:`inboxlog.Store.tail`)."""
        return await self._run.run(self._store.tail, id, limit, types)

    async def verify(self, id: str) -> VerifyReport:
        """Checks log ``id`` as opening would, changing nothing."""
        return await self._run.run(self._store.verify, id)

    async def surface(self, id: str) -> Surface:
        """``Store.surface``: what the model sees in log ``id``, read without owning it."""
        return await self._run.run(self._store.surface, id)

    async def messages(self, id: str) -> list[Message]:
        """``Store.messages``: the messages the model sees in log ``id``."""
        return await self._run.run(self._store.messages, id)

    async def peek(self, id: str) -> Peek:
        """What log ``id`` holds now, read without owning it, from its checkpoint."""
        return await self._run.run(self._store.peek, id)

    async def upgrade(self, id: str) -> UpgradeReport:
        """Rewrites log ``id`` in the newest on-disk format, atomically."""
        return await self._run.run(self._store.upgrade, id)

    async def list(self) -> list[Header]:
        """The headers of every stored log, sorted by id."""
        return await self._run.run(self._store.list)

    async def delete(self, id: str) -> None:
        """Deletes log ``id`` for good."""
        await self._run.run(self._store.delete, id)

    async def post(self, id: str, target: Target, message: _JSONObject) -> str:
        """Posts ``message`` to session ``id`` from anywhere; returns the post id."""
        return await self._run.run(self._store.post, id, target, message)

    async def move_pending(
        self, id: str, message_id: str, target: Target, index: int | None = None
    ) -> str:
        """Moves the pending message ``message_id`` of session ``id``; returns the post id
        (:meth:`inboxlog.Store.move_pending`)."""
        return await self._run.run(self._store.move_pending, id, message_id, target, index)

    async def decide(self, id: str, approval_id: str, outcome: ApprovalOutcome) -> str:
        """Decides approval ``approval_id`` of session ``id`` from anywhere; returns the
        post id (:meth:`inboxlog.Store.decide`)."""
        return await self._run.run(self._store.decide, id, approval_id, outcome)

    async def remove_pending(self, id: str, message_id: str) -> str:
        """Removes the pending message ``message_id`` of session ``id`` from anywhere;
        returns the post id (:meth:`inboxlog.Store.remove_pending`)."""
        return await self._run.run(self._store.remove_pending, id, message_id)

    async def replace_pending(self, id: str, message_id: str, message: _JSONObject) -> str:
        """Replaces the pending message ``message_id`` of session ``id`` with
        ``message`` from anywhere; returns the post id
        (:meth:`inboxlog.Store.replace_pending`)."""
        return await self._run.run(self._store.replace_pending, id, message_id, message)

    def follow(self, id: str, since: int = 0) -> Follower:
        """An async iterator of session ``id``'s events from seq ``since`` as they are
        committed (``async for event in store.follow(id)``)."""
        return Follower(self._store, id, since, self._run)

    def __repr__(self) -> str:
        return f"<inboxlog.aio {self._store!r}>"


class Follower:
    """The events of one session from a seq on, as an async iterator.

    The follower opens on first use; each wait runs on the executor in slices of
    ``_FOLLOW_SLICE`` seconds, so cancelling the ``async for`` frees its thread soon.
    """

    def __init__(self, store: _native.Store, id: str, since: int, run: _Runner) -> None:
        self._store = store
        self._id = id
        self._since = since
        self._run = run
        self._follower: _native.Follower | None = None

    async def _open(self) -> _native.Follower:
        if self._follower is None:
            self._follower = await self._run.run(self._store.follow, self._id, self._since)
        return self._follower

    @property
    def next_seq(self) -> int:
        """The seq of the next event to come: where a new follower resumes."""
        return self._since if self._follower is None else self._follower.next_seq

    # The blocking Follower.next with its `timeout`, awaited: one signature for both.
    async def next(self, timeout: float | None = None) -> Event | None:  # noqa: ASYNC109
        """The next event, waiting at most ``timeout`` seconds (forever when ``None``);
        ``None`` when none came in time."""
        follower = await self._open()
        if timeout is not None:
            return await self._run.run(follower.next, timeout)
        while True:
            event = await self._run.run(follower.next, _FOLLOW_SLICE)
            if event is not None:
                return event

    # The blocking Follower.next_batch with its `timeout`, awaited.
    async def next_batch(self, timeout: float | None = None) -> list[Event]:  # noqa: ASYNC109
        """Every event committed now, waiting at most ``timeout`` seconds (forever when
        ``None``) for the first, in slices as :meth:`next` waits; empty when none came
        in time."""
        follower = await self._open()
        if timeout is not None:
            return await self._run.run(follower.next_batch, timeout)
        while True:
            batch = await self._run.run(follower.next_batch, _FOLLOW_SLICE)
            if batch:
                return batch

    async def aclose(self) -> None:
        """Releases the log."""
        if self._follower is not None:
            await self._run.run(self._follower.close)

    def __aiter__(self) -> Follower:
        return self

    async def __anext__(self) -> Event:
        event = await self.next()
        assert event is not None
        return event

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class Inbox:
    """A session's inbox with coroutine methods (``await s.inbox.append(...)``)."""

    def __init__(self, inbox: _native.Inbox, run: _Runner) -> None:
        self._inbox = inbox
        self._run = run

    # A copy, not the live view the blocking `Inbox` gives: every read of a view takes
    # the session lock, which must happen on the executor, never on the event loop.

    async def next_turn(self) -> list[Message]:
        """A copy of ``next-turn``, taken at one instant."""
        return await self._run.run(lambda: self._inbox.next_turn[:])

    async def next_step(self) -> list[Message]:
        """A copy of ``next-step``, taken at one instant."""
        return await self._run.run(lambda: self._inbox.next_step[:])

    async def has_pending(self) -> bool:
        """Whether either list holds a message."""
        return await self._run.run(lambda: self._inbox.has_pending)

    async def splice(
        self,
        target: Target,
        start: float,
        delete_count: float,
        inserted: Sequence[_JSONObject] | None = None,
    ) -> list[Message]:
        """JavaScript ``splice`` on ``target``; returns the removed messages."""
        return await self._run.run(self._inbox.splice, target, start, delete_count, inserted)

    async def append(self, target: Target, message: _JSONObject) -> None:
        """Adds ``message`` at the end of ``target``."""
        await self._run.run(self._inbox.append, target, message)

    async def prepend(self, target: Target, message: _JSONObject) -> None:
        """Adds ``message`` at the front of ``target``."""
        await self._run.run(self._inbox.prepend, target, message)

    async def replace(self, id: str, message: _JSONObject) -> bool:
        """Replaces pending message ``id``; ``False`` if absent."""
        return await self._run.run(self._inbox.replace, id, message)

    async def remove(self, id: str) -> bool:
        """Removes pending message ``id``; ``False`` if absent."""
        return await self._run.run(self._inbox.remove, id)

    async def clear(self) -> None:
        """Cancels everything pending."""
        await self._run.run(self._inbox.clear)

    async def receive(self) -> int:
        """Takes in the messages posted to this session; returns how many it wrote."""
        return await self._run.run(self._inbox.receive)


class Session:
    """One open session with coroutine methods; ``async with`` closes it."""

    def __init__(self, session: _native.Session, run: _Runner) -> None:
        self._session = session
        self._run = run
        self.inbox = Inbox(session.inbox, run)

    @property
    def sync(self) -> _native.Session:
        """The blocking session underneath."""
        return self._session

    @property
    def id(self) -> str:
        """The session id."""
        return self._session.id

    @property
    def header(self) -> Header:
        """The log's header."""
        return self._session.header

    @property
    def open_report(self) -> OpenReport:
        """What opening found and fixed."""
        return self._session.open_report

    async def last_seq(self) -> int | None:
        """Seq of the last event, ``None`` for an empty log."""
        return await self._run.run(lambda: self._session.last_seq)

    async def events(self, since: int = 0) -> list[Event]:
        """The events with ``seq >= since``."""
        return await self._run.run(self._session.events, since)

    async def surface(self) -> list[int]:
        """``Session.surface``: the surface's seqs in model-visible order."""
        return await self._run.run(self._session.surface)

    async def messages(self) -> list[Message]:
        """``Session.messages``: the messages the model sees, in order."""
        return await self._run.run(self._session.messages)

    async def append(self, type: str, data: Any, **envelope: Any) -> Event:
        """Appends a host event; envelope keywords as :meth:`inboxlog.Session.append`."""
        return await self._run.run(self._session.append, type, data, **envelope)

    async def flush(self) -> None:
        """Makes everything appended so far durable."""
        await self._run.run(self._session.flush)

    async def close(self) -> None:
        """Flushes and releases the log."""
        await self._run.run(self._session.close)

    async def baseline(self, at: int | None = None) -> Baseline:
        """The inbox as of the event at seq ``at`` (default: now)."""
        return await self._run.run(self._session.baseline, at)

    def on_event(self, callback: _F) -> _F:
        """Registers ``callback(event)``; it runs on the executor thread of the call."""
        return self._session.on_event(callback)

    def on_inbox(self, callback: _F) -> _F:
        """Registers ``callback(notice)``; it runs on the executor thread of the call."""
        return self._session.on_inbox(callback)

    async def open_turn(self, **extra: Any) -> int:
        """Opens the next turn; returns its number."""
        return await self._run.run(self._session.open_turn, **extra)

    async def propose_step(self, *, whole_next_turn: bool = False) -> Proposal:
        """Takes posted messages in, then claims input for the next step (all of
        ``next-turn`` at the turn's first proposal with ``whole_next_turn=True``)."""
        return await self._run.run(self._session.propose_step, whole_next_turn=whole_next_turn)

    async def decide(self, decision: _JSONObject, **extra: Any) -> Decided:
        """The one pre-step decision."""
        return await self._run.run(self._session.decide, decision, **extra)

    async def end_step(self, outcome: StepOutcome, **extra: Any) -> bool:
        """Ends the open step; returns whether another step must be proposed."""
        return await self._run.run(self._session.end_step, outcome, **extra)

    async def step_boundary(
        self, end_step: StepOutcome | None = None, *, whole_next_turn: bool = False
    ) -> StepBoundary | None:
        """Ends the owed step (when ``end_step`` is given), claims and enters the claim
        unchanged, in one durable write (:meth:`inboxlog.Session.step_boundary`)."""
        return await self._run.run(
            self._session.step_boundary, end_step, whole_next_turn=whole_next_turn
        )

    async def end_step_and_close(self, outcome: StepOutcome) -> TurnEnded | None:
        """Ends the open step and, when no other step is due, the turn, in one durable
        write (:meth:`inboxlog.Session.end_step_and_close`)."""
        return await self._run.run(self._session.end_step_and_close, outcome)

    async def close_turn(self, **extra: Any) -> Decided:
        """Ends a concluded turn."""
        return await self._run.run(self._session.close_turn, **extra)

    async def cancel(
        self, cause: _JSONObject | str | None = None, keep_inbox: bool = False, **extra: Any
    ) -> None:
        """Clears the inbox (unless ``keep_inbox``), then aborts the open turn."""
        await self._run.run(self._session.cancel, cause, keep_inbox, **extra)

    async def fail(self, error: _JSONObject, **extra: Any) -> None:
        """Ends the open turn with ``error``."""
        await self._run.run(self._session.fail, error, **extra)

    async def ask_approval(
        self,
        id: str,
        tool_name: str,
        call_id: str | None = None,
        arguments: Any = None,
        reason: str | None = None,
    ) -> None:
        """``Session.ask_approval``: writes ``approval/asked``."""
        await self._run.run(self._session.ask_approval, id, tool_name, call_id, arguments, reason)

    async def decide_approval(self, id: str, outcome: ApprovalOutcome) -> None:
        """``Session.decide_approval``: writes ``approval/decided``."""
        await self._run.run(self._session.decide_approval, id, outcome)

    async def pending_approvals(self) -> list[ApprovalAsked]:
        """``Session.pending_approvals``."""
        return await self._run.run(self._session.pending_approvals)

    async def park(self, state: Any = None) -> None:
        """``Session.park``: parks the open turn on its pending approvals."""
        await self._run.run(self._session.park, state)

    async def parked(self) -> ParkedTurn | None:
        """``Session.parked``."""
        return await self._run.run(self._session.parked)

    async def approvals_ready(self) -> bool:
        """``Session.approvals_ready``."""
        return await self._run.run(self._session.approvals_ready)

    async def resume_parked(self) -> Resumed:
        """``Session.resume_parked``: hands the parked run on."""
        return await self._run.run(self._session.resume_parked)

    async def begin_compaction(self, start: int, end: int) -> Compaction:
        """``Session.begin_compaction``: writes ``compaction/start``."""
        handle = await self._run.run(self._session.begin_compaction, start, end)
        return Compaction(handle, self._run)

    async def compact(
        self,
        start: int,
        end: int,
        summarize: Callable[[list[Message]], Any],
        *,
        provider: str,
        model: str,
    ) -> Compacted:
        """``Session.compact``; ``summarize`` may be a plain function or a coroutine
        function (a model call). When it raises, the compaction ends with the
        exception's text and the exception propagates."""
        handle = await self.begin_compaction(start, end)
        try:
            summary = summarize(handle.shadowed_messages)
            if asyncio.iscoroutine(summary) or isinstance(summary, asyncio.Future):
                summary = await summary
        except BaseException as e:
            await handle.abort(f"{type(e).__qualname__}: {e}")
            raise
        return await handle.commit(summary, provider=provider, model=model)

    async def prune(self, seq: int) -> Event | None:
        """``Session.prune``: shortens a long ``tool/result``."""
        return await self._run.run(self._session.prune, seq)

    async def running_compaction(self) -> str | None:
        """``Session.running_compaction``."""
        return await self._run.run(self._session.running_compaction)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"<inboxlog.aio {self._session!r}>"


class Compaction:
    """A compaction running (``Session.begin_compaction``), with coroutine
    ``commit`` and ``abort``."""

    def __init__(self, handle: _native.Compaction, run: _Runner) -> None:
        self._handle = handle
        self._run = run

    @property
    def sync(self) -> _native.Compaction:
        """The blocking handle underneath."""
        return self._handle

    @property
    def id(self) -> str:
        """Its ``compactionId``."""
        return self._handle.id

    @property
    def turn(self) -> int | None:
        """The turn that owns it, ``None`` for a manual one."""
        return self._handle.turn

    @property
    def range(self) -> tuple[int, int]:
        """``(start, end)`` of the range it replaces."""
        return self._handle.range

    @property
    def shadowed_seqs(self) -> list[int]:
        """The seqs it replaces, in order."""
        return self._handle.shadowed_seqs

    @property
    def shadowed_messages(self) -> list[Message]:
        """The messages it replaces, in order."""
        return self._handle.shadowed_messages

    @property
    def shadowed_token_count(self) -> int:
        """The reference's token estimate of those messages."""
        return self._handle.shadowed_token_count

    async def commit(
        self,
        summary: str | Sequence[_JSONObject],
        *,
        provider: str,
        model: str,
        usage: _JSONObject | None = None,
    ) -> Compacted:
        """``Compaction.commit``."""
        return await self._run.run(
            self._handle.commit, summary, provider=provider, model=model, usage=usage
        )

    async def abort(self, error: str) -> None:
        """``Compaction.abort``."""
        await self._run.run(self._handle.abort, error)

    def __repr__(self) -> str:
        return f"<inboxlog.aio {self._handle!r}>"
