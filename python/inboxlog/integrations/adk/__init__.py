"""Google ADK on inboxlog: a session service over every store and a plugin that runs the
step protocol (SPEC §12).

    pip install "./python[adk]"

    import inboxlog
    from inboxlog.integrations.adk import InboxlogSessionService

    service = InboxlogSessionService(inboxlog.Store("sessions"))
    runner = Runner(app=App(name="app", root_agent=agent), session_service=service)

:class:`InboxlogSessionService` (``sessions.py``) is ADK's ``BaseSessionService`` on any
store: one log per ADK session, only ever appended, held by one writer at a time; app
and user state shared through logs of their own. ADK's ids map to inboxlog ids
reversibly (``ids.py``).
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

from inboxlog.integrations.adk.sessions import CREATED, EVENT, SCOPE, STATE, InboxlogSessionService

__all__ = ["CREATED", "EVENT", "SCOPE", "STATE", "InboxlogSessionService"]
