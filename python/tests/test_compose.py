"""The pre-step composer (ARCHITECTURE.md#pre-step-composer), sync and async."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import pytest
from conftest import m

import inboxlog
from inboxlog.types import Decision, Proposal

PROPOSAL: Proposal = {"turn": 1, "step": 1, "messages": [m("a"), m("b")]}


def test_no_listeners_enters_the_claim() -> None:
    decision = inboxlog.pre_step(PROPOSAL, [])
    assert decision == {"kind": "enter", "messages": [m("a"), m("b")]}
    assert decision["kind"] == "enter" and decision["messages"] is not PROPOSAL["messages"]


def test_listeners_run_in_order_around_next() -> None:
    trace: list[str] = []

    def outer(p: Proposal, next: Callable[[], Decision]) -> Decision:
        trace.append("outer in")
        d = next()
        trace.append("outer out")
        return d

    def rewrite(p: Proposal, next: Callable[[], Decision]) -> Decision:
        trace.append("rewrite")
        d = next()
        assert d["kind"] == "enter"
        return {"kind": "enter", "messages": [m("ctx"), *d["messages"][1:]]}

    decision = inboxlog.pre_step(PROPOSAL, [outer, rewrite])
    assert decision == {"kind": "enter", "messages": [m("ctx"), m("b")]}
    assert trace == ["outer in", "rewrite", "outer out"]


def test_a_reject_stops_the_chain() -> None:
    later: list[int] = []

    def guard(p: Proposal, next: Callable[[], Decision]) -> Decision:
        return {"kind": "reject"}

    def never(p: Proposal, next: Callable[[], Decision]) -> Decision:
        later.append(1)
        return next()

    assert inboxlog.pre_step(PROPOSAL, [guard, never]) == {"kind": "reject"}
    assert later == []


def test_an_exception_propagates_and_the_host_fails_the_turn(session: inboxlog.Session) -> None:
    def broken(p: Proposal, next: Callable[[], Decision]) -> Decision:
        raise RuntimeError("plugin crashed")

    session.inbox.append("next-turn", m("a"))
    session.open_turn()
    proposal = session.propose_step()
    with pytest.raises(RuntimeError, match="plugin crashed"):
        inboxlog.pre_step(proposal, [broken])
    session.fail({"message": "plugin crashed", "code": "E_PLUGIN"})
    assert session.events()[-1]["data"]["reason"]["kind"] == "error"


def test_async_listeners() -> None:
    async def slow_context(p: Proposal, next: Callable[[], Awaitable[Decision]]) -> Decision:
        await asyncio.sleep(0)
        d = await next()
        if d["kind"] != "enter":
            return d
        return {"kind": "enter", "messages": [*d["messages"], m("late")]}

    def sync_pass(p: Proposal, next: Callable[[], Awaitable[Decision]]) -> Awaitable[Decision]:
        return next()

    def sync_reject(p: Proposal, next: Callable[[], Awaitable[Decision]]) -> Decision:
        return {"kind": "reject"}

    decision = asyncio.run(inboxlog.pre_step_async(PROPOSAL, [sync_pass, slow_context]))
    assert decision == {"kind": "enter", "messages": [m("a"), m("b"), m("late")]}
    assert asyncio.run(inboxlog.pre_step_async(PROPOSAL, [slow_context, sync_reject])) == {
        "kind": "reject"
    }
    assert asyncio.run(inboxlog.pre_step_async(PROPOSAL, [])) == {
        "kind": "enter",
        "messages": [m("a"), m("b")],
    }


def test_async_exception_propagates() -> None:
    async def broken(p: Proposal, next: Callable[[], Awaitable[Decision]]) -> Decision:
        raise KeyError("x")

    with pytest.raises(KeyError):
        asyncio.run(inboxlog.pre_step_async(PROPOSAL, [broken]))
