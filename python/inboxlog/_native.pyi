"""The native engine of :mod:`inboxlog` (private: import from ``inboxlog``)."""

import builtins
from collections.abc import Callable, Iterator, Mapping, Sequence
from os import PathLike
from typing import Any, ClassVar, Final, SupportsIndex, TypeAlias, TypeVar, final, overload

from inboxlog.types import (
    ApprovalAsked,
    ApprovalOutcome,
    Baseline,
    Compacted,
    ConsumedWork,
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

_F = TypeVar("_F", bound=Callable[..., object])
_JSONObject: TypeAlias = Mapping[str, Any]

__all__ = [
    "FORMAT_VERSION",
    "MAX_DEPTH",
    "_ERROR_KINDS",
    "AlreadyDecidedError",
    "AlreadyExistsError",
    "ApprovalsPendingError",
    "BusyError",
    "ClosedError",
    "Compaction",
    "ConflictError",
    "CorruptLogError",
    "DuplicateMessageError",
    "FencedError",
    "Follower",
    "FormatUnsupportedError",
    "Inbox",
    "InboxlogError",
    "InvalidInputError",
    "InvalidSpliceError",
    "LockedError",
    "NotFoundError",
    "ObserverWarning",
    "PoisonedError",
    "ProtocolError",
    "QueueProjection",
    "QueueView",
    "ReentrantError",
    "Session",
    "StorageError",
    "Store",
    "TooLargeError",
    "UnavailableError",
    "_SessionOpen",
    "_StoreOpen",
    "__version__",
    "_json_text",
    "fold_consumed_work",
    "import_reference",
]

__version__: Final[str]
FORMAT_VERSION: Final[int]
"""The on-disk format version this library reads and writes."""
MAX_DEPTH: Final[int]
"""Deepest JSON nesting accepted in data and messages."""
_ERROR_KINDS: Final[tuple[tuple[str, int], ...]]
"""Every error kind of the core as ``(kind, code)``, in code order: the one list the
exception classes are checked against."""

@final
class _StoreOpen:
    """``Store.open``: what it does depends on where it is looked up."""

    @overload
    def __get__(self, instance: None, owner: type[Store] | None = None, /) -> _StoreOpen: ...
    @overload
    def __get__(self, instance: Store, owner: type[Store] | None = None, /) -> _SessionOpen: ...
    def __call__(
        self,
        url_or_path: str | PathLike[str],
        durability: Durability = "sync",
        *,
        schema: str | None = None,
        record_limit: int | None = None,
        max_connections: int | None = None,
    ) -> Store:
        """Opens the store ``url_or_path`` names: ``"memory:"`` for a new store in
        memory, a ``postgresql://`` (or ``postgres://``) URL for the PostgreSQL store,
        anything else for the JSONL directory store at that path (created if missing).
        ``schema`` and ``max_connections`` (the most connections the store holds,
        however many sessions are open; default 8, at least 2) are for PostgreSQL only,
        ``record_limit`` (bytes of one event line) for JSONL and PostgreSQL; an option
        the store has no use for raises :class:`InvalidInputError`."""

@final
class _SessionOpen:
    """``store.open`` looked up on a store."""

    def __call__(self, id: str, takeover: bool = False) -> Session:
        """Opens log ``id`` for writing: replays its inbox, drops a torn tail and closes
        a turn the previous writer left open as ``interrupted``. ``takeover=True`` takes
        the session from a live but stuck owner (PostgreSQL only; the old owner gets
        ``FencedError`` on its next call)."""

@final
class Store:
    """A place that holds session logs.

    ``Store(path, durability)`` is the JSONL directory store (one ``<id>.jsonl`` file
    per session, readable with ``jq``); ``Store.memory()`` keeps logs in memory.
    """

    def __new__(
        cls,
        path: str | PathLike[str],
        durability: Durability = "sync",
        *,
        record_limit: int | None = None,
    ) -> Store:
        """Opens (creating if missing) the directory ``path``.

        ``durability`` is ``"sync"`` (fsync before each call returns), ``"batched"``
        (group commit; ``Session.flush()`` is the barrier) or ``"none"`` (OS buffered).
        ``record_limit`` caps one event line in bytes (default 64 MiB).
        """

    @staticmethod
    def memory() -> Store:
        """A store in process memory (tests, ephemeral agents)."""

    @staticmethod
    def postgres(
        url: str,
        schema: str = "inboxlog",
        durability: str = "sync",
        *,
        record_limit: int | None = None,
        max_connections: int | None = None,
    ) -> Store:
        """The PostgreSQL store at ``url`` (a ``postgresql://`` URL, libpq syntax with
        ``sslmode``): tables in ``schema`` (created on first use), ``durability``
        ``"sync"`` (each call committed before it returns), ``"batched"`` or ``"none"``
        (asynchronous commit; ``flush()`` is the barrier). ``max_connections`` bounds
        the connections the store holds, however many sessions are open (default 8, at
        least 2). Raises ``UnavailableError`` when the server cannot be reached; no
        message shows the password."""

    def create(
        self,
        id: str,
        *,
        cwd: str | None = None,
        origin: str | None = None,
        delegation_depth: int | None = None,
        agent_preset: str | None = None,
        seed: Sequence[_JSONObject] | None = None,
        seed_length: int | None = None,
    ) -> Session:
        """Starts a new log ``id`` (``AlreadyExistsError`` if taken).

        ``seed`` (events of another log, seq from 0) starts it with a copy of them;
        ``seed_length`` is recorded as the header's ``seedLength``, as
        ``delegation_depth`` and ``agent_preset`` are its ``delegationDepth`` and
        ``agentPreset``.
        """

    open: _StoreOpen
    """On the class, ``Store.open(url_or_path, durability="sync", *, schema=None,
    record_limit=None, max_connections=None)`` opens a store of any backend; on a store,
    ``store.open(id, takeover=False)`` opens one of its sessions."""

    def fork(
        self,
        parent_id: str,
        child_id: str,
        *,
        cwd: str | None = None,
        origin: str | None = None,
        delegation_depth: int | None = None,
        agent_preset: str | None = None,
    ) -> Session:
        """Forks ``parent_id`` into ``child_id``: a copy of its whole turns, an empty
        inbox; the parent is unchanged."""

    def inspect(self, id: str) -> tuple[Header, builtins.list[Event]]:
        """Reads log ``id`` as stored, without locking or repairing."""

    def read(self, id: str, since: int = 0) -> builtins.list[Event]:
        """The events of log ``id`` with ``seq >= since`` (none when ``since`` is past
        its end): the same as ``inspect``'s from ``since`` on, read without owning the
        session (no lock, no repair, no write; a writer may be appending meanwhile) and
        at the cost of what it returns (a JSONL log is read backward from its end, a
        PostgreSQL session by one keyed query). Raises ``NotFoundError`` when there is
        no log ``id``."""

    def tail(self, id: str, limit: int, types: Sequence[str] | None = None) -> builtins.list[Event]:
        """The last ``limit`` events of log ``id``, of ``types`` when given, oldest
        first: the last such events of ``inspect``, read as ``read`` reads (without
        owning the session; the cost of what it returns and, with ``types``, of the
        events of other types in between). Raises ``NotFoundError`` when there is no
        log ``id``."""

    def _inspect_lines(self, id: str) -> builtins.list[str]:
        """The core's JSON text of what ``inspect`` reads: the header's, then each
        event's (what ``python -m inboxlog inspect --json`` prints)."""

    def _fold_line(self, id: str) -> str:
        """The core's JSON text of the consumed-work fold of log ``id`` as stored."""

    def verify(self, id: str) -> VerifyReport:
        """Checks log ``id`` exactly as ``open`` would (header, format version, every
        complete record, the turn/step rules, the inbox replay) without locking,
        repairing or writing, and raises what ``open`` would raise.

        The report's ``tornBytes`` and ``openTurn``/``openStep`` are the repairs opening
        would make (``needsRepair``), not errors; ``nextTurn``/``nextStep`` count the
        pending messages. Whether another writer holds the session is not checked.
        """

    def peek(self, id: str) -> Peek:
        """What log ``id`` holds now, read without owning it (no lock, no repair, no
        write; another process may be writing it) and from its checkpoint when the store
        keeps one, so that it costs what follows the checkpoint: ``events`` (the next
        seq), ``tornBytes`` (left as it is), ``openTurn``/``openStep`` (left open, not
        closed) and the inbox as a ``baseline`` for a :class:`QueueProjection`. Raises
        what ``open`` would raise for a log that does not read."""

    def surface(self, id: str) -> Surface:
        """What the model sees in log ``id``, read without owning it (as ``peek``
        reads, from its checkpoint): ``nodes``, the surface's seqs in model-visible
        order, and ``messages``, the messages projected from them (SPEC §15.3)."""

    def messages(self, id: str) -> list[Message]:
        """The messages the model sees in log ``id``: ``surface(id)["messages"]``."""

    def upgrade(self, id: str) -> UpgradeReport:
        """Rewrites log ``id`` in the newest on-disk format, atomically: a JSONL log of
        format version 1 becomes version 2 (every line sealed with a chained CRC-32C);
        a log already in it is checked and left as it is (``from`` is then 2).

        Raises ``LockedError`` while a writer holds it, and what ``open`` would raise
        for a log that does not read (nothing is changed then).
        """

    def list(self) -> builtins.list[Header]:
        """The headers of every stored log, sorted by id."""

    def _list_lines(self) -> builtins.list[str]:
        """The core's JSON text of every stored log's header, sorted by id."""

    def delete(self, id: str) -> None:
        """Deletes log ``id`` for good, durably before it returns.

        Raises ``LockedError`` while a writer (an open session, in this or another
        process) holds it, ``NotFoundError`` when there is none, and
        ``InvalidInputError`` for a bad id. A reader that started first (``inspect``,
        ``fork``) reads the whole log as it was.
        """

    def post(self, id: str, target: Target, message: _JSONObject) -> str:
        """Posts ``message`` to the ``target`` list of session ``id`` from anywhere, open
        or not; returns the post id once the post is durable.

        The session's owner takes it in exactly once, as one ``agent/inbox/spliced``
        event carrying ``"post": <post id>`` (at open, before each ``propose_step``, on
        ``inbox.receive()``); a message it cannot take in (its id already pending)
        becomes one ``agent/inbox/rejected`` event. ``NotFoundError`` when there is no
        session ``id``.
        """

    def move_pending(
        self, id: str, message_id: str, target: Target, index: int | None = None
    ) -> str:
        """Moves the pending message ``message_id`` of session ``id`` to ``index`` of
        ``target`` (counted without it; ``None``: its end) from anywhere, open or not
        (SPEC §17.5); returns the post id once durable. Applied once as one removal
        (``"outcome": "moved"``) and one insertion, or recorded as
        ``agent/inbox/rejected`` (``not_found``, ``invalid_splice``)."""

    def decide(self, id: str, approval_id: str, outcome: ApprovalOutcome) -> str:
        """Decides approval ``approval_id`` of session ``id`` from anywhere, open or not
        (SPEC §17.3); returns the post id once the decision is durable. Its owner takes
        it in exactly once and writes ``approval/decided``; the first decision wins,
        later ones (and unknown ids) are recorded as ``agent/inbox/rejected``."""

    def remove_pending(self, id: str, message_id: str) -> str:
        """Removes the pending message ``message_id`` of session ``id`` from anywhere,
        open or not; returns the post id once the edit is durable.

        The edit travels as a post does: its owner applies it exactly once, in order
        with this store's earlier posts and edits (a post and then its removal apply in
        that order), as ``inbox.remove``: one ``agent/inbox/spliced`` with
        ``"outcome": "canceled"`` carrying ``"post": <post id>``. When the message is
        no longer pending (claimed first, removed, never there) nothing changes and the
        log records one ``agent/inbox/rejected`` event
        ``{"edit": {"op": "remove", "id": ...}, "reason": {...}, "post": ...}`` (kind
        ``not_found``). ``NotFoundError`` when there is no session ``id``;
        ``InvalidInputError`` when ``message_id`` is empty.
        """

    def replace_pending(self, id: str, message_id: str, message: _JSONObject) -> str:
        """Replaces the pending message ``message_id`` of session ``id`` with
        ``message`` (which may have a new id) from anywhere, open or not; returns the
        post id once the edit is durable.

        Applied as ``inbox.replace``, exactly once and in order with this store's
        posts and edits; when ``message_id`` is no longer pending, or the new id is
        pending already, nothing changes and the log records one
        ``agent/inbox/rejected`` event ``{"edit": {"op": "replace", "id": ...,
        "message": ...}, ...}`` (kind ``not_found`` or ``duplicate_message``).
        ``NotFoundError`` when there is no session ``id``.
        """

    def follow(self, id: str, since: int = 0) -> Follower:
        """Follows session ``id`` from seq ``since``: an iterator of its events as they
        are committed, read without owning the session (GIL released while waiting)."""

@final
class Follower:
    """The events of one session from a seq on, as they are committed
    (``Store.follow``); iterating blocks until the next one."""

    @property
    def session(self) -> str:
        """The followed session's id."""

    @property
    def next_seq(self) -> int:
        """The seq of the next event to come: where a new follower resumes."""

    def next(self, timeout: float | None = None) -> Event | None:
        """The next event, waiting at most ``timeout`` seconds (forever when ``None``);
        ``None`` when none came in time."""

    def next_batch(self, timeout: float | None = None) -> list[Event]:
        """Every event committed now, waiting at most ``timeout`` seconds (forever when
        ``None``) for the first; empty when none came in time. One read of the store
        per burst, where ``next`` until ``None`` reads once more to find it ended."""

    def _next_line(self, timeout: float | None = None) -> str | None:
        """``next``, as the core's JSON text of the event."""

    def close(self) -> None:
        """Releases the log; later calls raise ``ClosedError``."""

    def __iter__(self) -> Follower: ...
    def __next__(self) -> Event: ...
    def __enter__(self) -> Follower: ...
    def __exit__(self, *exc: object) -> bool: ...

@final
class Session:
    """One open session: the exclusive writer of a log, its inbox and the step-boundary
    protocol. Safe to use from several threads; a context manager that closes it."""

    @property
    def id(self) -> str:
        """The session id."""

    @property
    def header(self) -> Header:
        """The log's header."""

    @property
    def last_seq(self) -> int | None:
        """Seq of the last event, ``None`` for an empty log."""

    @property
    def current_turn(self) -> int | None:
        """The open turn's number, ``None`` when idle."""

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""

    @property
    def open_report(self) -> OpenReport:
        """What opening found and fixed: ``{"tornBytes": int, "repairedTurn": int | None,
        "repairedCompaction": str | None}`` (bytes of a torn tail dropped; the turn closed
        as interrupted, if any; the compaction ended as interrupted, if any)."""

    @property
    def inbox(self) -> Inbox:
        """The inbox operations of this session."""

    def events(self, since: int = 0) -> list[Event]:
        """The events with ``seq >= since``."""

    def surface(self) -> list[int]:
        """The model-visible surface: the seqs of its events, in the order the model
        sees them (SPEC §15.3)."""

    def messages(self) -> list[Message]:
        """The messages the model sees, in order: a ``user/message``'s data, an
        ``assistant/message``'s or a ``tool/result``'s ``data["message"]`` (an
        ``assistant/message`` with empty content is skipped)."""

    def append(
        self,
        type: str,
        data: Any,
        *,
        ignorable: bool = False,
        surface_op: Any = None,
        source_event_seqs: Sequence[int] | None = None,
    ) -> Event:
        """Appends a host event (any JSON ``data``, kept byte-for-byte); returns it.

        ``surface_op`` and ``source_event_seqs`` become the event's ``surfaceOp`` and
        ``sourceEventSeqs``. Reserved types are refused, except ``user/message``, whose
        data may be any JSON object (an ``id`` is optional there: runtime context
        carries none; only inbox messages need one).
        """

    def flush(self) -> None:
        """Makes everything appended so far durable (the barrier of ``batched``)."""

    def close(self) -> None:
        """Flushes and releases the log; later calls raise ``ClosedError``. Idempotent."""

    def __enter__(self) -> Session: ...
    def __exit__(
        self,
        *_exc: object,
    ) -> bool: ...
    def on_event(self, callback: _F) -> _F:
        """Registers ``callback(event)`` for every committed event; returns it.

        Called synchronously, in commit order, with no lock held. An exception in the
        callback is contained: reported as an :class:`ObserverWarning` before the call
        that committed the event returns (which still succeeds) and kept for
        :meth:`take_observer_failures`. Mutating this session from inside raises
        ``ReentrantError``.
        """

    def on_inbox(self, callback: _F) -> _F:
        """Registers ``callback(notice)`` for every inbox notification; returns it.

        ``notice`` is ``{"type": "agent/inbox/inserted" | "agent/inbox/discarded" |
        "agent/inbox/claimed", "message": m}`` plus ``"turn"`` for a claim. Exceptions
        are contained as in :meth:`on_event`.
        """

    def take_observer_failures(self) -> list[str]:
        """Takes the observer failures recorded since the last call, oldest first.

        One str per failure (each was also warned about when it happened). Only the
        last 64 are kept; when older ones were dropped, the first str says how many.
        """

    def baseline(self, at: int | None = None) -> Baseline:
        """The inbox as of the event at seq ``at`` (default: now), for a
        :class:`QueueProjection`. An ``at`` past the last event raises
        :class:`InvalidInputError` (never clamped)."""

    def open_turn(self, **extra: Any) -> int:
        """Opens the next turn (idle only); returns its number.

        Keyword arguments are host extras kept in the ``turn/start`` data after
        ``turn`` (e.g. ``trigger={"kind": "message"}``); ``turn``, ``step`` and
        ``reason`` are the library's and refused (``InvalidInputError``)."""

    def propose_step(self, *, whole_next_turn: bool = False) -> Proposal:
        """Claims input for the next step: ``{"turn", "step", "messages"}``.

        The turn's first proposal claims the first message of ``next-turn``, or all of
        it with ``whole_next_turn=True`` (a framework run's first step, whose own input
        joined ``next-turn`` behind what was pending); later ones claim ``next-step``."""

    def decide(self, decision: _JSONObject, **extra: Any) -> Decided:
        """The one pre-step decision: ``{"kind": "reject"}`` or
        ``{"kind": "enter", "messages": [...]}`` (the complete final batch).
        Keyword arguments are host extras for the first event written."""

    def end_step(self, outcome: StepOutcome, **extra: Any) -> bool:
        """Ends the open step with ``"continue"``, ``"completed"`` or ``"max-tokens"``;
        returns whether another step must be proposed. Posts waiting in the mailbox
        are taken in first, so steering posted from another process during the last
        step counts, and so does an edit taking pending steering back
        (``Store.remove_pending``); asked at no read's cost when nothing was posted.
        Keyword arguments are host extras for the ``step/end`` data."""

    def step_boundary(
        self, end_step: StepOutcome | None = None, *, whole_next_turn: bool = False
    ) -> StepBoundary | None:
        """A step boundary no pre-step plugin needs to see: ``end_step(end_step)`` (when
        given), ``propose_step(whole_next_turn=...)`` and ``decide({"kind": "enter",
        "messages": <the claimed messages>})`` as one call, written in one durable append
        (one fsync under ``sync``) with the same events as those calls, in their order.

        Returns ``{"proposal", "decided"}``, or ``None`` when ``end_step`` answered that
        no other step is due: then only the step ended and nothing was claimed (close the
        turn next). Posts waiting in the mailbox are taken in between the step's end and
        the claim, as by the separate calls (then written one by one). A call out of
        order raises ``ProtocolError`` as the first separate call would, with nothing
        written. No host extras: use the separate calls for those."""

    def end_step_and_close(self, outcome: StepOutcome) -> TurnEnded | None:
        """``end_step(outcome)`` and, when it answers that no other step is due,
        ``close_turn()``, as one call written in one durable append, with the same events
        (``step/end``, then ``turn/end``). Returns the turn's end, or ``None`` when another
        step must be proposed (steering waits in ``next-step``, posted ones taken in
        first as by ``end_step``, or the step ended with ``"continue"``): then only the
        step ended, and ``close_turn`` would be refused.
        With no step open it raises ``ProtocolError`` as ``end_step`` does, with nothing
        written. No host extras: use the separate calls for those."""

    def close_turn(self, **extra: Any) -> Decided:
        """Ends a concluded turn with no steering pending. Keyword arguments are host
        extras for the ``turn/end`` data."""

    def cancel(
        self, cause: _JSONObject | str | None = None, keep_inbox: bool = False, **extra: Any
    ) -> None:
        """Clears the inbox (unless ``keep_inbox``), then aborts the open turn.

        ``cause`` is ``{"kind": "user" | "parent" | "disposed"}``,
        ``{"kind": "hook", "reason": str}``, a kind name, or ``None`` (user).
        """

    def fail(self, error: _JSONObject, **extra: Any) -> None:
        """Ends the open turn with ``error`` (str ``message`` and ``code``). Keyword
        arguments are host extras for the ``turn/end`` data."""

    def ask_approval(
        self,
        id: str,
        tool_name: str,
        call_id: str | None = None,
        arguments: Any = None,
        reason: str | None = None,
    ) -> None:
        """Asks for a person's approval of a call of ``tool_name`` (SPEC §17.1): writes
        ``approval/asked``. ``call_id`` names a tool call still waiting for its result.
        ``ProtocolError`` with no open turn or a parked one; ``InvalidInputError`` for
        an id asked before."""

    def decide_approval(self, id: str, outcome: ApprovalOutcome) -> None:
        """Decides approval ``id``; a call not allowed is answered ``TOOL_NOT_ALLOWED``.
        An approval not pending is recorded as rejected, then ``AlreadyDecidedError``
        (or ``NotFoundError``) is raised."""

    def pending_approvals(self) -> list[ApprovalAsked]:
        """The approvals waiting for a decision, in the order they were asked."""

    def park(self, state: Any = None) -> None:
        """Parks the open turn on its pending approvals (SPEC §17.2) with ``state`` for
        whoever resumes the run; the turn stays open with no process alive for it."""

    def parked(self) -> ParkedTurn | None:
        """The parked turn (``{"turn", "approvals", "ready"}``), or ``None``."""

    def approvals_ready(self) -> bool:
        """Whether the turn is parked and all its approvals are decided, after taking
        posted decisions in."""

    def resume_parked(self) -> Resumed:
        """Hands the parked run on (``turn/resumed``) and returns what it was parked
        with and the decisions. ``ApprovalsPendingError`` while any is pending,
        ``ProtocolError`` when not parked; nothing is written then."""

    def begin_compaction(self, start: int, end: int) -> Compaction:
        """Starts a compaction of the surface from seq ``start`` through seq ``end``
        (SPEC §16): writes ``compaction/start`` and returns its handle. ``BusyError``
        while one runs; ``ProtocolError`` with a step open, a proposal pending or a
        parked turn; ``InvalidInputError`` for a range not on the surface or one that
        splits a tool call from its result; nothing is written then."""

    def compact(
        self,
        start: int,
        end: int,
        summarize: Callable[[list[Message]], str | list[_JSONObject]],
        *,
        provider: str,
        model: str,
    ) -> Compacted:
        """``begin_compaction``, then ``summarize`` (the shadowed messages; returns a
        str or a list of blocks), then ``commit``. When ``summarize`` raises, the
        compaction ends with the exception's text and the exception propagates."""

    def prune(self, seq: int) -> Event | None:
        """Shortens the ``tool/result`` at ``seq`` on the surface when its text is longer
        than 8,192 code points (first 4,096 and last 1,024 kept around a marker):
        writes ``compaction/prune`` and the new ``tool/result``, returned; ``None`` when
        it is not that long. ``InvalidInputError`` when ``seq`` is not a
        ``tool/result`` on the surface."""

    def running_compaction(self) -> str | None:
        """The ``compactionId`` of the compaction running, or ``None``."""

@final
class Compaction:
    """A compaction running (SPEC §16), until ``commit`` or ``abort`` writes its
    ``compaction/end``; dropped before either, it ends with ``"abandoned"``."""

    @property
    def id(self) -> str:
        """Its ``compactionId``."""

    @property
    def turn(self) -> int | None:
        """The turn that owns it, ``None`` for a manual one."""

    @property
    def range(self) -> tuple[int, int]:
        """``(start, end)``: the seqs of the first and last surface node it replaces."""

    @property
    def shadowed_seqs(self) -> list[int]:
        """The seqs of the surface nodes it replaces, in order."""

    @property
    def shadowed_messages(self) -> list[Message]:
        """The messages it replaces (what to summarize), in order."""

    @property
    def shadowed_token_count(self) -> int:
        """The reference's token estimate of those messages."""

    def commit(
        self,
        summary: str | Sequence[_JSONObject],
        *,
        provider: str,
        model: str,
        usage: _JSONObject | None = None,
    ) -> Compacted:
        """Writes ``compaction/summary``, the summary's ``user/message`` replacing the
        range, and ``compaction/end``. ``ConflictError`` when the surface changed inside
        the range since the start; any failure writes exactly one ``compaction/end``
        with an error."""

    def abort(self, error: str) -> None:
        """Ends it with ``error``: writes ``compaction/end {…, "error"}``."""

@final
class Inbox:
    """The inbox of one session: ``next-turn`` and ``next-step``, message ids unique
    across both. Every change is durable before it is visible."""

    @property
    def next_turn(self) -> QueueView:
        """``next-turn``, as a live read-only view."""

    @property
    def next_step(self) -> QueueView:
        """``next-step``, as a live read-only view."""

    @property
    def has_pending(self) -> bool:
        """Whether either list holds a message."""

    def splice(
        self,
        target: Target,
        start: float,
        delete_count: float,
        inserted: Sequence[_JSONObject] | None = None,
    ) -> list[Message]:
        """JavaScript ``Array.prototype.splice`` on ``target`` (any int or float, NaN
        and ±inf included); returns the removed messages."""

    def append(self, target: Target, message: _JSONObject) -> None:
        """Adds ``message`` at the end of ``target``."""

    def prepend(self, target: Target, message: _JSONObject) -> None:
        """Adds ``message`` at the front of ``target``."""

    def replace(self, id: str, message: _JSONObject) -> bool:
        """Replaces pending message ``id`` (``next-turn`` first); ``False`` if absent."""

    def remove(self, id: str) -> bool:
        """Removes pending message ``id``; ``False`` if absent."""

    def clear(self) -> None:
        """Cancels everything pending: ``next-step`` first, then ``next-turn``."""

    def receive(self) -> int:
        """Takes in the messages posted to this session (``Store.post``); returns how
        many posts it wrote (each a splice, or an ``agent/inbox/rejected`` event)."""

@final
class QueueView(Sequence[Message]):
    """A live, read-only view of one inbox list (``Inbox.next_turn``, ``next_step``).

    A sequence of message dicts that always shows the list as it is now, as
    ``dict.keys()`` shows its dict. ``len``, ``bool`` and ``view[i]`` are O(log n); a
    slice is a plain list, and ``view[:]`` copies the whole list at one instant. It
    equals a list of equal dicts (and another view with equal items), never a tuple,
    and it is unhashable, as a list is; its repr is the list's. Iterating reads the
    list 64 messages at a time by position, as a list iterator walks its list: a
    change made meanwhile shows from the next 64 on and never raises, so to change the
    inbox while walking it, walk a copy (``view[:]``). Reading a view of a closed
    session raises :class:`ClosedError`.
    """

    __hash__: ClassVar[None]  # type: ignore[assignment]

    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, index: SupportsIndex, /) -> Message:
        """``view[i]`` (negative counts from the end) is a dict; ``view[a:b:c]`` a list."""

    @overload
    def __getitem__(self, index: slice, /) -> list[Message]: ...
    def __iter__(self) -> Iterator[Message]: ...
    def __reversed__(self) -> Iterator[Message]: ...
    def __contains__(self, value: object, /) -> bool: ...
    def index(self, value: Any, start: int = 0, stop: int | None = None, /) -> int:
        """The first position of ``value`` from ``start`` up to ``stop`` (exclusive;
        negative counts from the end), as ``list.index``; ``ValueError`` when absent."""

    def count(self, value: Any, /) -> int:
        """How many items equal ``value``."""

    def __eq__(self, other: object, /) -> bool: ...
    def __ne__(self, other: object, /) -> bool: ...

@final
class QueueProjection:
    """A consumer's copy of an inbox, kept equal to the live one by applying later
    ``agent/inbox/spliced`` events (same validation as the live inbox)."""

    def __new__(cls, baseline: _JSONObject | None = None) -> QueueProjection:
        """Starts from ``baseline`` (e.g. ``Session.baseline()``); default: empty."""

    @staticmethod
    def replay(
        events: Sequence[_JSONObject], replay_from: int = 0, upto: int | None = None
    ) -> QueueProjection:
        """Builds it from a log's events from ``replay_from`` (the header's
        ``seedLength``) through seq ``upto`` (all when ``None``). An ``upto`` past
        the last event, or a ``replay_from`` past the end, raises
        :class:`InvalidInputError` (never clamped)."""

    def apply(self, event: _JSONObject) -> None:
        """Applies the next event; events must come in seq order."""

    @property
    def seq(self) -> int | None:
        """The last event applied, ``None`` before any."""

    @property
    def next_turn(self) -> list[Message]:
        """The projected ``next-turn``."""

    @property
    def next_step(self) -> list[Message]:
        """The projected ``next-step``."""

    @property
    def baseline(self) -> Baseline:
        """The projection as a baseline."""

def fold_consumed_work(events: Sequence[_JSONObject]) -> ConsumedWork:
    """Which turn last accounted for pending work (``end``) and whether work was
    canceled unrun after it (``droppedUnrun``)."""

def _json_text(value: object) -> str:
    """The compact JSON text of ``value`` as the core writes it (keys in order,
    non-ASCII characters as they are); ``InvalidInputError`` for NaN or infinities."""

def import_reference(path: str | PathLike[str], store: Store, id: str | None = None) -> Session:
    """Imports the reference harness log at ``path`` (``.jsonl`` or ``.jsonl.zstd``)
    into ``store`` as a new session and returns it, open for writing.

    Packed runs of token deltas become one ``assistant/chunk`` event each; every event
    keeps its source seq. The id is ``id`` when given, else the source's (made a valid
    session id when it is not one). A source that fails the log's checks is refused
    with ``InvalidInputError`` naming its line, and nothing is created; a line or a
    packed run's expansion over 64 MiB, or data nested deeper than 512 levels, raises
    ``TooLargeError`` (memory stays bounded whatever the source); an existing id
    raises ``AlreadyExistsError``. A last turn left open is closed as interrupted
    (``open_report["repairedTurn"]``).
    """

class InboxlogError(Exception):
    """Root of every inboxlog error."""

    kind: str
    """The error kind, e.g. ``"invalid_splice"``."""
    code: int
    """The stable number of the kind, shared with the C ABI."""
    session: str | None
    """The session the error concerns, where known."""
    path: str | None
    """The log file the error concerns, where known."""
    line: int | None
    """The line of the stored log (1 is the header) the error was found on."""
    offset: int | None
    """The byte offset of that line in the file."""
    seq: int | None
    """The seq of the event the error concerns."""

class StorageError(InboxlogError):
    """The OS refused a read, write, fsync or lock (``io``, 1)."""

class CorruptLogError(InboxlogError):
    """A stored log fails validation (``corrupt``, 2)."""

class LockedError(InboxlogError):
    """Another writer holds the session (``locked``, 3)."""

class PoisonedError(InboxlogError):
    """A write or fsync failed earlier; reopen the session (``poisoned``, 4)."""

class NotFoundError(InboxlogError):
    """No such session (``not_found``, 5)."""

class AlreadyExistsError(InboxlogError):
    """A session with that id already exists (``already_exists``, 6)."""

class InvalidSpliceError(InboxlogError):
    """Splice coordinates out of range (``invalid_splice``, 7)."""

class DuplicateMessageError(InboxlogError):
    """A message id is already pending (``duplicate_message``, 8)."""

class ProtocolError(InboxlogError):
    """A step-boundary call out of order (``protocol``, 9)."""

class InvalidInputError(InboxlogError):
    """A bad message, event, id, reason or argument value (``invalid_input``, 10)."""

class FormatUnsupportedError(InboxlogError):
    """A log in another on-disk format version (``format_unsupported``, 11)."""

class TooLargeError(InboxlogError):
    """A record or a JSON nesting over the limits (``too_large``, 12)."""

class ClosedError(InboxlogError):
    """Use of a session after ``close()`` (``closed``, 13)."""

class ReentrantError(InboxlogError):
    """A mutation of a session from inside one of its observers (``reentrant``, 14)."""

class FencedError(InboxlogError):
    """This writer lost ownership of its session to another writer (a takeover);
    nothing of the call was written (``fenced``, 15)."""

class UnavailableError(InboxlogError):
    """The store's server cannot be reached or went away mid-call; the message says
    whether the call committed or that its outcome is unknown (``unavailable``, 16)."""

class BusyError(InboxlogError):
    """A compaction is running; nothing was written (``busy``, 17)."""

class ConflictError(InboxlogError):
    """The surface changed under a compaction; its end with the error was written
    (``conflict``, 18)."""

class ApprovalsPendingError(InboxlogError):
    """Approvals of the turn are still pending (a resume, ``end_step`` or
    ``close_turn``); nothing was written (``approvals_pending``, 19)."""

class AlreadyDecidedError(InboxlogError):
    """A decision for an approval already decided, recorded as rejected
    (``already_decided``, 20)."""

class ObserverWarning(RuntimeWarning):
    """An observer (``on_event``/``on_inbox`` callback) raised: the exception was
    contained and the call that committed the change still succeeded."""
