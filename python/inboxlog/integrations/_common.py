"""What every framework integration shares (SPEC §12): the errors a step boundary
raises, opening a framework's conversation as a session, a turn's ``error`` reason, and
running a blocking log call from a coroutine. Private: each integration re-exports the
public names, which are the same classes everywhere."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, TypeVar

import inboxlog

_T = TypeVar("_T")


class TurnEndedError(Exception):
    """The step boundary ended the turn, so the run stopped before its next model call.

    ``turn`` is the turn, ``reason`` its ``turn/end`` reason (e.g. ``{"kind":
    "completed"}`` when the plugins entered no input at all).
    """

    def __init__(self, turn: int, reason: dict[str, Any]) -> None:
        super().__init__(f"turn {turn} ended at a step boundary: {reason.get('kind')}")
        self.turn = turn
        self.reason = reason


class StepRejectedError(TurnEndedError):
    """A pre-step plugin rejected the step: the turn ended ``blocked`` and the model was
    not called with the rejected input."""


def open_or_create(store: inboxlog.Store, id: str) -> inboxlog.Session:
    """Opens session ``id`` as its writer, creating it when it does not exist (also when
    another process creates it meanwhile)."""
    try:
        return store.open(id)
    except inboxlog.NotFoundError:
        pass
    try:
        return store.create(id)
    except inboxlog.AlreadyExistsError:  # created meanwhile by another process
        return store.open(id)


def error_reason(error: BaseException) -> dict[str, str]:
    """The ``{"message", "code"}`` a turn that ``error`` ended records."""
    return {"message": str(error) or type(error).__name__, "code": type(error).__name__}


async def call(fn: Callable[..., _T], *args: Any) -> _T:
    """Runs a blocking log call in a worker thread and waits for its outcome even when
    the caller is cancelled meanwhile (then re-raises the cancellation), so a durable
    change is never left half-observed: a cancelled run still knows what it wrote."""
    task = asyncio.ensure_future(asyncio.to_thread(fn, *args))
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as error:
            cancelled = cancelled or error
    if cancelled is not None:
        task.exception()  # retrieved, so asyncio does not report it as lost
        raise cancelled
    return task.result()
