"""Google ADK on inboxlog: a session service over every store and a plugin that runs the
step protocol (SPEC §12).

    pip install "./python[adk]"

    import inboxlog
    from inboxlog.integrations.adk import InboxlogPlugin, InboxlogSessionService

    service = InboxlogSessionService(inboxlog.Store("sessions"))
    app = App(name="app", root_agent=agent, plugins=[InboxlogPlugin(service)])
    runner = Runner(app=app, session_service=service)

:class:`InboxlogSessionService` (``sessions.py``) is ADK's ``BaseSessionService`` on any
store: one log per ADK session, only ever appended, held by one writer at a time; app
and user state shared through logs of their own. ADK's ids map to inboxlog ids
reversibly (``ids.py``). :class:`InboxlogPlugin` (``plugin.py``) makes each invocation
one turn on the one turn driver, each model call one step claimed at
``before_model_callback``. ADK's tool confirmation is an approval that parks the run,
decided from anywhere and resumed once on any worker (``approvals.py``).
"""

from __future__ import annotations

try:
    import google.adk.sessions.base_session_service  # noqa: F401
except ModuleNotFoundError as error:  # pragma: no cover - exercised in a subprocess
    if not (error.name or "").startswith("google"):
        raise
    raise ImportError(
        'inboxlog.integrations.adk needs the google-adk package: pip install "inboxlog[adk]"'
    ) from error

from inboxlog.integrations._common import StepRejectedError, TurnEndedError
from inboxlog.integrations.adk.plugin import (
    CONTINUE,
    METADATA,
    InboxlogPlugin,
    adk_content,
    inbox_message,
)
from inboxlog.integrations.adk.sessions import CREATED, EVENT, SCOPE, STATE, InboxlogSessionService

__all__ = [
    "CONTINUE",
    "CREATED",
    "EVENT",
    "METADATA",
    "SCOPE",
    "STATE",
    "InboxlogPlugin",
    "InboxlogSessionService",
    "StepRejectedError",
    "TurnEndedError",
    "adk_content",
    "inbox_message",
]
