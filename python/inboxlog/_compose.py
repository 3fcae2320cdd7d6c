"""The pre-step composer (ARCHITECTURE.md#pre-step-composer): plugins as middleware around one
decision."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable

from .types import Decision, Proposal

Next = Callable[[], Decision]
Listener = Callable[[Proposal, Next], Decision]
AsyncNext = Callable[[], Awaitable[Decision]]
AsyncListener = Callable[[Proposal, AsyncNext], Decision | Awaitable[Decision]]


def pre_step(proposal: Proposal, listeners: Iterable[Listener]) -> Decision:
    """Runs ``listener(proposal, next) -> decision`` middleware in order.

    The innermost ``next()`` returns ``{"kind": "enter", "messages": proposal["messages"]}``
    (a fresh list). A listener may return ``next()``'s result unchanged, a rewritten
    enter, or ``{"kind": "reject"}`` (then later listeners do not run). An exception
    propagates to the caller, who then calls ``Session.fail``.
    """
    chain = list(listeners)

    def run(i: int) -> Decision:
        if i == len(chain):
            return {"kind": "enter", "messages": list(proposal["messages"])}
        return chain[i](proposal, lambda: run(i + 1))

    return run(0)


async def pre_step_async(proposal: Proposal, listeners: Iterable[AsyncListener]) -> Decision:
    """Like :func:`pre_step` for coroutine listeners: ``next()`` returns an awaitable.

    A listener may be ``async def`` or a plain function; a plain one that wants the
    inner decision returns ``next()`` itself (it is awaited here).
    """
    chain = list(listeners)

    async def run(i: int) -> Decision:
        if i == len(chain):
            return {"kind": "enter", "messages": list(proposal["messages"])}
        result = chain[i](proposal, lambda: run(i + 1))
        if inspect.isawaitable(result):
            return await result
        return result

    return await run(0)


__all__ = ["AsyncListener", "AsyncNext", "Listener", "Next", "pre_step", "pre_step_async"]
