"""ADK's tool confirmation as inboxlog approvals (SPEC §17.4), for
:class:`~inboxlog.integrations.adk.InboxlogPlugin`.

A tool that needs a person's confirmation (``FunctionTool(..., require_confirmation=True)``,
or one calling ``tool_context.request_confirmation(...)``) answers its call with a
placeholder and ADK emits an ``adk_request_confirmation`` function call (long-running)
naming the original call. The plugin maps it onto the log:

- the placeholder is no answer: the call keeps its ``tool/call`` and no ``tool/result``;
- each ``adk_request_confirmation`` call is asked as ``approval/asked``: its id is the
  approval's id, its ``originalFunctionCall`` the call asked about, the confirmation's
  ``hint`` the reason (:func:`ask`);
- the run ends with its turn parked (``turn/parked``), the confirmation calls kept as ADK's
  JSON in the park's state (:func:`park_state`); the turn stays open;
- ADK's confirmation response (a user message of ``adk_request_confirmation`` function
  responses, ``{"confirmed": bool}``) is a decision (:func:`decide`): ``allowed-once`` or
  ``rejected``. Decisions posted from anywhere else (``store.decide``, ``inboxlog
  approve``, the console) count the same; the first one taken in wins;
- the next run of the session (any new message, :data:`~.plugin.CONTINUE` included, on
  any worker) resumes the parked run through ``resume_parked`` and hands ADK the log's
  decisions as its own confirmation response (:func:`decision_event`), so ADK runs each
  tool again only when its decision was ``allowed-once``; a call not allowed is already
  answered ``TOOL_NOT_ALLOWED`` by the log, and ADK's own rejection writes no second
  result. While any approval is pending the run raises
  :class:`inboxlog.ApprovalsPendingError` and writes nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import Any

from google.adk.events.event import Event
from google.adk.tools.tool_confirmation import ToolConfirmation
from google.genai import types

import inboxlog
from inboxlog.integrations._driver import Turn
from inboxlog.types import ApprovalOutcome

CONFIRMATION = "adk_request_confirmation"
"""The name of ADK's confirmation function call (and of the user's response to it)."""


def requests(event: Event) -> list[types.FunctionCall]:
    """The ``adk_request_confirmation`` calls of ``event``."""
    return [c for c in event.get_function_calls() if c.name == CONFIRMATION and c.id]


def responses(content: types.Content | None) -> dict[str, dict[str, Any]] | None:
    """The confirmation responses a user message carries, by confirmation call id;
    ``None`` when it carries anything else (text, other function responses)."""
    parts = content.parts or [] if content is not None else []
    found: dict[str, dict[str, Any]] = {}
    for part in parts:
        answer = part.function_response
        if answer is None or answer.name != CONFIRMATION or not answer.id:
            return None
        found[answer.id] = dict(answer.response or {})
    return found or None


def ask(turn: Turn, request: types.FunctionCall) -> str:
    """Asks ``request`` (an ``adk_request_confirmation`` call) as ``approval/asked``;
    returns the id of the call it is about."""
    args = request.args or {}
    original = args.get("originalFunctionCall") or {}
    hint = (args.get("toolConfirmation") or {}).get("hint") or None
    assert request.id is not None
    call_id = str(original.get("id") or "")
    turn.ask(request.id, str(original.get("name") or ""), call_id, original.get("args"), hint)
    return call_id


def park_state(invocation_id: str, asked: Sequence[types.FunctionCall]) -> dict[str, Any]:
    """What the park keeps for ADK: the invocation and its confirmation calls, as ADK's
    JSON."""
    return {
        "invocation": invocation_id,
        "requests": [c.model_dump(mode="json", exclude_none=True) for c in asked],
    }


def asked_calls(state: Mapping[str, Any] | None) -> list[str]:
    """The ids of the calls a parked run asked about (:func:`park_state`'s)."""
    found = []
    for request in (state or {}).get("requests") or ():
        original = (request.get("args") or {}).get("originalFunctionCall") or {}
        if original.get("id"):
            found.append(str(original["id"]))
    return found


def _confirmed(response: Mapping[str, Any]) -> ToolConfirmation:
    try:
        return ToolConfirmation.from_response_dict(dict(response))
    except ValueError:
        return ToolConfirmation()


def decide(log: inboxlog.Session, given: Mapping[str, Mapping[str, Any]]) -> None:
    """ADK's confirmation responses as decisions: ``allowed-once`` for ``confirmed``,
    ``rejected`` otherwise. One for an approval decided already (or unknown) is recorded
    as rejected by the log and changes nothing: the first decision stands."""
    for approval_id, response in given.items():
        outcome: ApprovalOutcome = "allowed-once" if _confirmed(response).confirmed else "rejected"
        with contextlib.suppress(inboxlog.AlreadyDecidedError, inboxlog.NotFoundError):
            log.decide_approval(approval_id, outcome)


def decision_event(
    invocation_id: str,
    state: Mapping[str, Any] | None,
    decisions: Mapping[str, ApprovalOutcome],
    given: Mapping[str, Mapping[str, Any]],
) -> Event | None:
    """The log's decisions as ADK's confirmation response: one user event answering each
    parked ``adk_request_confirmation`` call, ``confirmed`` only for ``allowed-once`` (a
    payload the user's own response carried is kept)."""
    parts = []
    for request in (state or {}).get("requests") or ():
        approval_id = request.get("id")
        if approval_id not in decisions:
            continue
        confirmation = _confirmed(given.get(approval_id) or {})
        confirmation.confirmed = decisions[approval_id] == "allowed-once"
        response = confirmation.model_dump(mode="json", by_alias=True, exclude_none=True)
        answer = types.FunctionResponse(id=approval_id, name=CONFIRMATION, response=response)
        parts.append(types.Part(function_response=answer))
    if not parts:
        return None
    content = types.Content(role="user", parts=parts)
    return Event(author="user", invocation_id=invocation_id, content=content)


__all__ = [
    "CONFIRMATION",
    "ask",
    "asked_calls",
    "decide",
    "decision_event",
    "park_state",
    "requests",
    "responses",
]
