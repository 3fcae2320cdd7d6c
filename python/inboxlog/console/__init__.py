"""A web console and a JSON + SSE API over any store (SPEC §14): ``inboxlog serve STORE``
runs it; :func:`app` returns it as an ASGI application to mount in a host app::

    from starlette.applications import Starlette
    from starlette.routing import Mount
    import inboxlog
    import inboxlog.console

    store = inboxlog.Store.open("sessions")
    web = Starlette(routes=[Mount("/inboxlog", inboxlog.console.app(store, token="s3cret"))])

The extra ``inboxlog[console]`` installs what it needs (Starlette, uvicorn);
``import inboxlog`` never imports it.
"""

from __future__ import annotations

from .app import Console, app
from .limits import Limits

__all__ = ["Console", "Limits", "app"]
