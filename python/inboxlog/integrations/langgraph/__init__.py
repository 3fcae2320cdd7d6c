"""LangChain and LangGraph on inboxlog: an agent middleware and a checkpointer.

pip install "./python[langgraph]"
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

from inboxlog.integrations.langgraph.middleware import (
    MESSAGES,
    InboxlogMiddleware,
    StepRejectedError,
    TurnEndedError,
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
