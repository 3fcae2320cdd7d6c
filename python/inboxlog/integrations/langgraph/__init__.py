"""LangChain and LangGraph on inboxlog: an agent middleware and a checkpointer (SPEC §12).

    pip install "./python[langgraph]"

    import inboxlog
    from inboxlog.integrations.langgraph import InboxlogMiddleware, InboxlogSaver

    with InboxlogSaver(inboxlog.Store("sessions")) as saver:
        agent = create_agent(model, tools, middleware=[InboxlogMiddleware(saver)],
                             checkpointer=saver)
        agent.invoke({"messages": [...]}, {"configurable": {"thread_id": "chat-1"}})

:class:`InboxlogMiddleware` (``middleware.py``) makes a ``create_agent`` run one turn of
the session its ``thread_id`` names:

- ``before_agent`` opens the turn and appends the run's new input (the state's messages
  the log does not hold) to ``next-turn``, as one splice.
- ``before_model`` is the step boundary: it records what the agent added since the last
  step and the log does not hold yet, ends the previous step (``continue``), claims
  (``propose_step``; at the first step the rest of ``next-turn`` joins the claim, so
  input that was pending comes first, then the run's own), lets the pre-step
  ``plugins`` decide, and records the decision. The messages that entered reach the
  model as ``HumanMessage`` messages whose ids are their inbox ids; at the first step the
  conversation is rebuilt from the log (:func:`conversation`) and replaces the state's
  when they differ, so a run resumed elsewhere sees exactly what was committed. The rest
  of ``next-turn`` is removed after the decision with one splice (the log records it as
  a removal; the step's ``user/message`` events say where it went): a crash in between
  leaves it pending, and the rebuilt conversation holds each id once.
- ``after_model`` appends the model's message as one ``assistant/message`` (SPEC §15.5:
  text, reasoning and tool-call blocks, ``usage``, provider and model, the ``AIMessage``
  itself as ``source.replayState``); when it called no tool the step ends
  ``completed`` (``max-tokens`` when the finish reason says ``length``) and, if
  ``next-step`` input is pending, the agent jumps back to the model for one more call;
  otherwise the turn closes.
- ``wrap_tool_call`` appends ``tool/call`` before the tool runs (durable first, so a
  worker killed inside the tool leaves the call for the next open to answer,
  ``TOOL_OUTCOME_UNKNOWN``) and ``tool/result`` after it (the ``ToolMessage`` under the
  key ``langchain``; ``isError`` for an error status or an exception). The conversation
  rebuilt from the log gives the model a call that repair answered as a ``ToolMessage``,
  and a tool that LangGraph's checkpoint would resume after such a crash is not run
  again: the log's answer is its result. A message of any other kind the agent adds
  goes in a ``langchain/messages`` event, as every message did in logs of earlier
  releases, which still resume.
- ``wrap_model_call`` and ``wrap_tool_call`` end the turn ``error`` on an exception
  (re-raised) and ``aborted`` on a cancellation, ``KeyboardInterrupt`` or
  ``GeneratorExit`` (the turn driver's one policy, ``inboxlog/integrations/_driver.py``,
  which the middleware runs on); a killed
  worker leaves the turn open and the next open closes it ``interrupted``. A LangGraph
  ``interrupt()`` (a human in the loop) is no ending: the turn stays open and goes on
  when the graph is resumed with ``Command(resume=...)`` in the same process; resumed
  on another worker, the interrupted turn was closed when that worker opened the thread
  and a new turn continues from the history.
- LangChain's ``HumanInTheLoopMiddleware`` (``approvals.py``, SPEC §17.4), beside this
  middleware with the same saver as checkpointer: the calls its interrupts gate are
  asked as approvals and the turn parked when the saver lets the thread go or the next
  run starts; ``invoke(None, config)`` on any worker then resumes the parked turn, each
  interrupt answered from the log's decision (``ApprovalsPendingError``, nothing
  written, while any is pending), so a tool runs once and only when allowed.

:class:`InboxlogSaver` (``saver.py``) is LangGraph's checkpointer on any store: a thread
is a session it holds as its one writer from its first write (reads take nothing); a
``put`` appends one ``langgraph/checkpoint`` event with the changed channels only (every
channel, now and then, so that a new saver reads the latest state, not the history), a
``put_writes`` one ``langgraph/writes`` event. Its checkpoints hold the state's messages:
the one copy of the conversation beside the log's own (SPEC §15.5), as LangGraph's
state must hold it.
"""

from __future__ import annotations

try:
    import langchain.agents.middleware  # noqa: F401
    import langgraph.checkpoint.base  # noqa: F401
except ModuleNotFoundError as error:  # pragma: no cover - exercised in a subprocess
    if not (error.name or "").startswith(("langgraph", "langchain")):
        raise
    raise ImportError(
        "inboxlog.integrations.langgraph needs the langchain and langgraph packages: "
        'pip install "inboxlog[langgraph]"'
    ) from error

from inboxlog.integrations._common import StepRejectedError, TurnEndedError
from inboxlog.integrations.langgraph.middleware import (
    MESSAGES,
    InboxlogMiddleware,
    conversation,
    inbox_message,
    langchain_message,
)
from inboxlog.integrations.langgraph.saver import CHECKPOINT, WRITES, InboxlogSaver

__all__ = [
    "CHECKPOINT",
    "MESSAGES",
    "WRITES",
    "InboxlogMiddleware",
    "InboxlogSaver",
    "StepRejectedError",
    "TurnEndedError",
    "conversation",
    "inbox_message",
    "langchain_message",
]
