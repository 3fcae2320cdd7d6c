"""The console's ASGI application (SPEC §14): the routes of the JSON + SSE API and the
pages, behind the guard of :mod:`inboxlog.console.security`.

Every store call blocks, so each runs on the app's executor, never on the event loop;
the SSE feeds wait on a second executor of their own (one thread per followed session
while it waits, however many clients follow it), so that a burst of followed sessions
never starves the API's calls.
"""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Receive, Scope, Send

import inboxlog
import inboxlog.aio

from . import api
from .limits import Limits
from .security import Guard, route_path
from .stream import Hub

_T = TypeVar("_T")

#: The largest request body: one event line at the store's default record limit
#: (SPEC §7.5), since a posted message becomes one.
MAX_BODY = 64 << 20
#: Threads for the API's store calls.
API_THREADS = 16
#: Threads the SSE feeds wait on: one per followed session.
FEED_THREADS = 256

STATIC = Path(__file__).parent / "static"

#: What a page route answers when the wheel's pages are missing (a source tree
#: without them): a page that says so, under the same headers.
_NO_PAGES = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>inboxlog console</title></head>
<body><p>The console's pages are missing from this installation; the API is at
<code>api/</code>.</p></body></html>
"""


class _Console:
    """The state behind the routes: the store, its reader, the feeds, the executors."""

    def __init__(self, store: inboxlog.Store, limits: Limits, read_only: bool = False) -> None:
        self.store = store
        #: Every mutation is refused (the guard answers 403); the pages disable theirs.
        self.read_only = read_only
        self.reader = api.Reader(store, limits)
        self.executor = ThreadPoolExecutor(API_THREADS, thread_name_prefix="inboxlog-console")
        #: The store as coroutines on the same executor: the mutations' durable writes
        #: (an fsync each) run there, many at once, never on the event loop.
        self.aio = inboxlog.aio.Store.wrap(store, executor=self.executor)
        self.feed_executor = ThreadPoolExecutor(FEED_THREADS, thread_name_prefix="inboxlog-feed")
        self.hub = Hub(store, self.reader, self.feed_executor, limits)

    async def run(self, fn: Callable[..., _T], *args: Any) -> _T:
        """``fn(*args)`` on the executor."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.executor, functools.partial(fn, *args))


def _json(body: Any, status: int = 200) -> Response:
    return JSONResponse(body, status, headers={"cache-control": "no-store"})


def _error(e: inboxlog.InboxlogError) -> Response:
    return _json(api.error_body(e), api.status_of(e))


async def _answer(call: Callable[[], Any]) -> Response:
    try:
        return _json(await call())
    except inboxlog.InboxlogError as e:
        return _error(e)


async def _body(request: Request) -> dict[str, Any]:
    """The request's JSON object; ``invalid_input`` for anything else."""
    try:
        body = json.loads(await request.body())
    except (ValueError, UnicodeDecodeError) as e:
        raise api.invalid(f"the body is not JSON: {e}") from None
    if not isinstance(body, dict):
        raise api.invalid("the body must be a JSON object")
    return body


def _page(name: str) -> Callable[[Request], Any]:
    async def page(request: Request) -> Response:
        path = STATIC / name
        if not path.is_file():
            path = STATIC / "index.html"
        if not path.is_file():
            return Response(_NO_PAGES, media_type="text/html")
        return FileResponse(path, media_type="text/html", headers={"cache-control": "no-cache"})

    return page


def _routes(console: _Console) -> list[Route | Mount]:
    store, reader, run = console.store, console.reader, console.run

    async def health(request: Request) -> Response:
        return _json({"ok": True})

    async def sessions(request: Request) -> Response:
        async def call() -> Any:
            q = request.query_params
            limit = api.count(q.get("limit"), "limit", *api.SESSIONS_LIMIT)
            return await run(api.sessions, store, q.get("after"), limit)

        return await _answer(call)

    async def session(request: Request) -> Response:
        async def call() -> Any:
            summary = await run(reader.summary, request.path_params["id"])
            return {**summary, "readOnly": console.read_only}

        return await _answer(call)

    async def events(request: Request) -> Response:
        async def call() -> Any:
            q = request.query_params
            since = api.count(q.get("since"), "since", 0, None)
            limit = api.count(q.get("limit"), "limit", *api.EVENTS_LIMIT)
            return await run(reader.events, request.path_params["id"], since, limit)

        return await _answer(call)

    async def baseline(request: Request) -> Response:
        async def call() -> Any:
            at = api.count(request.query_params.get("at"), "at", None, None)
            return await run(reader.baseline, request.path_params["id"], at)

        return await _answer(call)

    async def surface(request: Request) -> Response:
        return await _answer(lambda: run(store.surface, request.path_params["id"]))

    def mutation(
        fn: Callable[[inboxlog.aio.Store, str, dict[str, Any]], Awaitable[dict[str, str]]],
    ) -> Any:
        async def endpoint(request: Request) -> Response:
            try:
                body = await _body(request)
                answer = await fn(console.aio, request.path_params["id"], body)
            except inboxlog.InboxlogError as e:
                return _error(e)
            return _json(answer, 202)

        return endpoint

    return [
        Route("/api/health", health),
        Route("/api/sessions", sessions),
        Route("/api/sessions/{id}", session),
        Route("/api/sessions/{id}/events", events),
        Route("/api/sessions/{id}/baseline", baseline),
        Route("/api/sessions/{id}/surface", surface),
        Route("/api/sessions/{id}/follow", _Follow(console), methods=["GET"]),
        Route("/api/follow", _FollowList(console), methods=["GET"]),
        Route("/api/sessions/{id}/inbox", mutation(api.post), methods=["POST"]),
        Route("/api/sessions/{id}/inbox/remove", mutation(api.remove), methods=["POST"]),
        Route("/api/sessions/{id}/inbox/replace", mutation(api.replace), methods=["POST"]),
        Route("/api/sessions/{id}/inbox/move", mutation(api.move), methods=["POST"]),
        Route("/api/sessions/{id}/approvals", mutation(api.decide), methods=["POST"]),
        Route("/", _page("index.html")),
        Route("/sessions/{id}", _page("session.html")),
        Mount("/static", StaticFiles(directory=STATIC, check_dir=False)),
    ]


class _Follow:
    """``GET /api/sessions/{id}/follow``: the session's events as SSE."""

    def __init__(self, console: _Console) -> None:
        self.console = console

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        try:
            # A reconnect's Last-Event-ID (the last seq it got) wins over `since`.
            last = request.headers.get("last-event-id")
            if last is not None and last.strip():
                since = api.count(last.strip(), "Last-Event-ID", None, None)
                assert since is not None
                since += 1
            else:
                since = api.count(request.query_params.get("since"), "since", 0, None)
                assert since is not None
            await self.console.hub.session(
                request.path_params["id"], since, self.console.run, scope, receive, send
            )
        except inboxlog.InboxlogError as e:
            await _error(e)(scope, receive, send)


class _FollowList:
    """``GET /api/follow``: sessions created and deleted, as SSE."""

    def __init__(self, console: _Console) -> None:
        self.console = console

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.console.hub.sessions(self.console.run, scope, receive, send)


async def _http_error(request: Request, exc: Exception) -> Response:
    """Starlette's own refusals (no such route, a wrong method): JSON on the API, no
    ``code`` (nothing of inboxlog's failed)."""
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    kind = {404: "not_found", 405: "method_not_allowed"}.get(status, "http")
    detail = exc.detail if isinstance(exc, HTTPException) else "internal error"
    path = route_path(request.scope)
    if path.startswith("/api/") or status != 404:
        return _json({"kind": kind, "message": detail}, status)
    return Response(b"not found", 404, media_type="text/plain")


class Console:
    """The ASGI application :func:`app` returns."""

    def __init__(self, guard: Guard, hub: Hub) -> None:
        self._guard = guard
        #: The SSE feeds (their counts show what the console holds open).
        self.hub = hub

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._guard(scope, receive, send)


def app(
    store: inboxlog.Store,
    token: str | None = None,
    read_only: bool = False,
    allowed_hosts: Sequence[str] | None = None,
    limits: Limits | None = None,
) -> Console:
    """The console and its API over ``store`` as an ASGI application, to mount under
    any path prefix of a host app or to run with ``inboxlog serve``.

    ``token``: every request but ``/api/health`` must carry it (``Authorization:
    Bearer``, or the cookie a visit with ``?token=`` sets). ``read_only``: every
    mutation is refused (403), and the session JSON's ``readOnly`` tells the pages to
    disable their decisions. ``allowed_hosts``: the ``Host`` values answered
    (``NAME`` with any port, ``NAME:PORT``); ``None`` leaves ``Host`` to the host app.
    ``limits``: the bounds of what it holds of events (:class:`Limits`, its defaults
    when ``None``).
    """
    console = _Console(store, limits or Limits(), read_only)
    routes = Starlette(
        routes=_routes(console),
        exception_handlers={HTTPException: _http_error},
    )
    guard = Guard(
        routes, token=token, read_only=read_only, allowed_hosts=allowed_hosts, max_body=MAX_BODY
    )
    return Console(guard, console.hub)
