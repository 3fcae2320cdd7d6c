"""inboxlog: append-only session logs for AI agents with a durable two-queue inbox.

The log is the only truth; each session's inbox (``next-turn`` and ``next-step``) is
replayed from it when the session opens. Messages, events, headers and decisions are
plain dicts and lists. The engine is Rust (``inboxlog._native``); file I/O and fsync
run with the GIL released.

    store = inboxlog.Store("sessions")        # or inboxlog.Store.memory()
    with store.create("s1") as s:
        s.inbox.append("next-turn", {"id": "m1", "role": "user", "content": "hi"})
        turn = s.open_turn()
        proposal = s.propose_step()
        s.decide(inboxlog.pre_step(proposal, plugins))
"""

from __future__ import annotations

from . import types
from ._compose import AsyncListener, Listener, pre_step, pre_step_async
from ._native import (
    FORMAT_VERSION,
    MAX_DEPTH,
    AlreadyDecidedError,
    AlreadyExistsError,
    ApprovalsPendingError,
    BusyError,
    ClosedError,
    Compaction,
    ConflictError,
    CorruptLogError,
    DuplicateMessageError,
    FencedError,
    Follower,
    FormatUnsupportedError,
    Inbox,
    InboxlogError,
    InvalidInputError,
    InvalidSpliceError,
    LockedError,
    NotFoundError,
    ObserverWarning,
    PoisonedError,
    ProtocolError,
    QueueProjection,
    QueueView,
    ReentrantError,
    Session,
    StorageError,
    Store,
    TooLargeError,
    UnavailableError,
    __version__,
    fold_consumed_work,
    import_reference,
)

__all__ = [
    "FORMAT_VERSION",
    "MAX_DEPTH",
    "AlreadyDecidedError",
    "AlreadyExistsError",
    "ApprovalsPendingError",
    "AsyncListener",
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
    "Listener",
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
    "__version__",
    "fold_consumed_work",
    "import_reference",
    "pre_step",
    "pre_step_async",
    "types",
]
