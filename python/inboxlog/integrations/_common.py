"""What every framework integration shares (SPEC §12): the errors a step boundary
raises, opening a framework's conversation as a session, a turn's ``error`` reason, and
running a blocking log call from a coroutine. Private: each integration re-exports the
public names, which are the same classes everywhere."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar, cast

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
    change is never left half-observed: a cancelled run still knows what it wrote.

    ``fn`` runs in a copy of the caller's context (as with ``asyncio.to_thread``) on one
    of this module's worker threads, which hands the outcome back with one wake-up of
    the caller's event loop: cheaper than ``asyncio.to_thread``'s executor, whose
    futures and callbacks cost about as much again as a quick log call.
    """
    return cast("_T", await start(fn, *args).outcome())


def start(fn: Callable[..., Any], *args: Any) -> Job:
    """Starts :func:`call`'s work now and returns it unawaited: the caller goes on while
    the worker runs it, and ``await job.outcome()`` later waits for it as ``call`` does."""
    job = Job(asyncio.get_running_loop(), fn, args)
    _POOL.submit(job)
    return job


class Job:
    """One blocking call: what to run, where its outcome goes, and the outcome. The
    outcome's fields are written by the worker before it wakes the loop and read on the
    loop only after ``settled``, which only the loop sets."""

    __slots__ = ("args", "context", "error", "fn", "loop", "result", "settled", "waiter")

    def __init__(self, loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], args: Any) -> None:
        self.loop = loop
        self.fn = fn
        self.args = args
        self.context = contextvars.copy_context()
        self.waiter: asyncio.Future[None] = loop.create_future()
        self.settled = False
        self.result: Any = None
        self.error: BaseException | None = None

    async def outcome(self) -> Any:
        """Waits (on the loop) for the call to end, also through a cancellation of the
        caller, which is re-raised after; returns its result or raises its error."""
        cancelled: asyncio.CancelledError | None = None
        while not self.settled:
            try:
                await self.waiter
            except asyncio.CancelledError as error:
                cancelled = cancelled or error
                if not self.settled:  # the waiter was cancelled: wait on a fresh one
                    self.waiter = self.loop.create_future()
        if cancelled is not None:
            raise cancelled
        if self.error is not None:
            failure, self.error = self.error, None  # no cycle through the traceback's frames
            raise failure
        return self.result

    def run(self) -> None:
        """Runs the call (on a worker thread), keeping its outcome for the loop."""
        try:
            self.result = self.context.run(self.fn, *self.args)
        except BaseException as error:
            self.error = error
        self.fn = self.args = self.context = None  # type: ignore[assignment]

    def hand_back(self) -> None:
        """Wakes the loop to take the outcome (once the worker is free for the next)."""
        with contextlib.suppress(RuntimeError):  # a closed loop: nobody waits for it
            self.loop.call_soon_threadsafe(self.settle)

    def settle(self) -> None:
        """On the loop: the outcome is in; wakes the caller."""
        self.settled = True
        if not self.waiter.done():
            self.waiter.set_result(None)


class _Worker:
    """A worker thread's mailbox: the job handed to it, and the lock it sleeps on until
    one is (released by the submitter, as a binary semaphore)."""

    __slots__ = ("job", "wake")

    def __init__(self) -> None:
        self.job: Job | None = None
        self.wake = threading.Lock()
        self.wake.acquire()


class _Pool:
    """Daemon worker threads, started as needed: a job never waits behind a busy worker
    while fewer than ``limit`` threads run (as many as ``asyncio.to_thread``'s default
    executor would start), and it goes to the worker that went idle last, so the calls
    of a run keep to one warm thread. Past ``limit``, jobs wait in a backlog that the
    workers take from as they finish."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.after_fork()

    @property
    def threads(self) -> int:
        """The worker threads started so far."""
        return self._threads

    def submit(self, job: Job) -> None:
        """Hands ``job`` to the worker idle last, else to a new one, else to the backlog."""
        with self._lock:
            if self._idle:
                worker = self._idle.pop()
            elif self._threads < self.limit:
                self._threads += 1
                worker = _Worker()
                threading.Thread(
                    target=self._work, args=(worker,), name="inboxlog-call", daemon=True
                ).start()
            else:
                self._backlog.append(job)
                return
        worker.job = job
        worker.wake.release()

    def _work(self, worker: _Worker) -> None:
        while True:
            worker.wake.acquire()
            job, worker.job = worker.job, None
            while job is not None:
                job.run()
                # Idle before the caller hears of the outcome, so that a call it makes
                # next finds this worker rather than starting another.
                with self._lock:
                    following = self._backlog.popleft() if self._backlog else None
                    if following is None:
                        self._idle.append(worker)
                job.hand_back()
                job = following

    def after_fork(self) -> None:
        """Starts with no worker (also in a forked child, where none survived)."""
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []
        self._backlog: collections.deque[Job] = collections.deque()
        self._threads = 0


_POOL = _Pool(min(32, (os.cpu_count() or 1) + 4))
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_POOL.after_fork)
