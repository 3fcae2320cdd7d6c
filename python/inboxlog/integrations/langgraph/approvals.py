"""LangChain's ``HumanInTheLoopMiddleware`` on inboxlog approvals (SPEC §17.4).

The graph's own checkpoint (held by :class:`InboxlogSaver`) keeps each interrupt the
middleware raised, as LangGraph keeps it; this module maps those interrupts onto the log:

- :func:`park` (when the interrupted run's saver lets the thread go, or the next run on
  it starts): for each gated tool call, ``tool/call`` (unless the call's tool wrapper
  wrote it), ``approval/asked`` (id ``hitl-<turn>-<call id>``, the interrupt's
  description as its reason), then ``turn/parked`` with the interrupts as its state.
- :func:`answers` (at the start of the next run, from the saver's ``get_tuple``): the
  parked turn is resumed (:meth:`Turn.resume`, ``ApprovalsPendingError`` while any is
  pending) and each decision becomes the interrupt's answer, written as LangGraph's own
  ``__resume__`` write of the interrupted task: ``approve`` for ``allowed-once``,
  ``reject`` otherwise (the log answered that call ``TOOL_NOT_ALLOWED`` already).
  Interrupts whose calls were decided without a resume (the parked turn cancelled, or
  interrupted by a crash, which decides its approvals ``cancelled``) are answered the
  same way, so their tools never run.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langgraph.types import Interrupt

import inboxlog
from inboxlog.integrations._driver import Turn
from inboxlog.types import ApprovalOutcome, Event

INTERRUPT = "__interrupt__"
"""LangGraph's write channel of a task's interrupts."""
RESUME = "__resume__"
"""LangGraph's write channel for the answer of a task's interrupts."""

WHY = {
    "rejected": "A person rejected this tool call; it was not run.",
    "cancelled": "The approval of this tool call was cancelled; it was not run.",
    "unavailable": "No one could be asked to approve this tool call; it was not run.",
}


def pending(
    writes: Sequence[tuple[str, str, Any]], messages: Sequence[BaseMessage]
) -> list[dict[str, Any]]:
    """The ``HumanInTheLoopMiddleware`` interrupts among a checkpoint's pending ``writes``
    that have no answer yet, each ``{"task", "id", "mode", "calls": [{"callId",
    "name", "args", "description"}]}`` (``mode`` ``batched`` or ``per_call``); the
    calls of a batched one are matched, in order, to the tool calls of the last model
    response among ``messages``."""
    answered = {task for task, channel, _ in writes if channel == RESUME}
    last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
    found: list[dict[str, Any]] = []
    for task, channel, value in writes:
        if channel != INTERRUPT or task in answered:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if not isinstance(item, Interrupt) or not isinstance(item.value, Mapping):
                continue
            calls = _calls(item.value, last)
            if calls is not None:
                mode = "per_call" if item.value.get("type") == "tool_approval" else "batched"
                found.append({"task": task, "id": item.id, "mode": mode, "calls": calls})
    return found


def _calls(value: Mapping[str, Any], last: AIMessage | None) -> list[dict[str, Any]] | None:
    """The calls an interrupt's value asks about; ``None`` when it is not the
    middleware's (a tool's own ``interrupt()``, say)."""
    if value.get("type") == "tool_approval" and isinstance(value.get("tool_call_id"), str):
        return [
            {
                "callId": value["tool_call_id"],
                "name": value.get("name", ""),
                "args": value.get("args", {}),
                "description": value.get("description", ""),
            }
        ]
    requests = value.get("action_requests")
    if not isinstance(requests, list) or "review_configs" not in value:
        return None
    calls: list[dict[str, Any]] = []
    candidates = list(last.tool_calls) if last is not None else []
    for request in requests:
        at = next(
            (
                n
                for n, c in enumerate(candidates)
                if c["name"] == request.get("name") and c["args"] == request.get("args")
            ),
            None,
        )
        if at is None or not candidates[at].get("id"):
            return None  # not the last response's calls: leave it to the framework
        call = candidates[at]
        candidates = candidates[at + 1 :]
        calls.append(
            {
                "callId": call["id"],
                "name": call["name"],
                "args": call["args"],
                "description": request.get("description", ""),
            }
        )
    return calls


def park(
    turn: Turn, interrupts: list[dict[str, Any]], dispatched: set[str], answered: set[str]
) -> None:
    """Asks for each call of ``interrupts`` (its ``tool/call`` first unless
    ``dispatched`` holds it; none for a call the log ``answered``, after a crash) and
    parks ``turn`` with them as the framework's state."""
    for interrupt in interrupts:
        for call in interrupt["calls"]:
            id = call["callId"]
            if id in answered:
                continue
            if id not in dispatched:
                arguments = json.dumps(call["args"], ensure_ascii=False)
                turn.calling(id, call["name"], arguments)
                dispatched.add(id)
            call["approval"] = f"hitl-{turn.number}-{id}"
            reason = call["description"] or None
            turn.ask(call["approval"], call["name"], id, call["args"], reason)
    turn.park({"interrupts": interrupts, "calls": sorted(dispatched)})


def decision(outcome: ApprovalOutcome | None) -> dict[str, Any]:
    """The middleware's decision for an inboxlog outcome."""
    if outcome == "allowed-once":
        return {"type": "approve"}
    return {"type": "reject", "message": WHY.get(outcome or "", WHY["cancelled"])}


def answer(interrupt: Mapping[str, Any], outcomes: Mapping[str, ApprovalOutcome | None]) -> Any:
    """The resume value of one interrupt, given each call's outcome by call id."""
    decisions = [decision(outcomes.get(c["callId"])) for c in interrupt["calls"]]
    return decisions[0] if interrupt["mode"] == "per_call" else {"decisions": decisions}


def resume(log: inboxlog.Session) -> tuple[Turn, list[dict[str, Any]], dict[str, Any]] | None:
    """The parked run, handed on to this worker (:meth:`Turn.resume`): the turn, the
    interrupts it was parked on, and each task's answer. ``None`` when the turn is not
    parked on the middleware's interrupts."""
    parked = log.parked()
    if parked is None:
        return None
    resumed = Turn.resume(log)  # ApprovalsPendingError while any is pending
    assert resumed is not None
    turn, state, decisions = resumed
    interrupts: list[dict[str, Any]] = (state or {}).get("interrupts", [])
    outcomes = {
        c["callId"]: decisions.get(c.get("approval", "")) for i in interrupts for c in i["calls"]
    }
    return turn, interrupts, {i["task"]: answer(i, outcomes) for i in interrupts}


def decided_calls(events: Sequence[Event]) -> dict[str, ApprovalOutcome]:
    """The outcome of the last decided approval of each call the log asked about."""
    asked: dict[str, str] = {}  # approval id -> call id
    out: dict[str, ApprovalOutcome] = {}
    for event in events:
        data = event["data"]
        if event["type"] == "approval/asked" and data.get("callId"):
            asked[data["id"]] = data["callId"]
        elif event["type"] == "approval/decided" and data.get("id") in asked:
            out[asked[data["id"]]] = data["outcome"]
    return out


__all__ = ["RESUME", "answer", "decided_calls", "decision", "park", "pending", "resume"]
