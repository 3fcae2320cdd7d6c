"""The console's guard (SPEC §14.3): an ASGI middleware in front of every route that
checks ``Host`` (DNS rebinding) and ``Origin`` (cross-site requests), the token, the
read-only mode, the content type and size of mutations, and puts a strict
Content-Security-Policy and its companions on every response. It adds no CORS header,
ever: a browser on another origin can neither read an answer nor send a mutation.

Checks run in this order, so that a request from a wrong place learns nothing: ``Host``
and ``Origin`` (403), the token (401; ``/api/health`` needs none), read-only (403),
the content type of a mutation (415), its size (413).
"""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterable, Sequence
from html import escape
from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import parse_qsl, urlencode

from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: The cookie a visit with ``?token=T`` sets.
COOKIE = "inboxlog_token"

#: The policy of every response: this origin only, no inline script or style, no eval,
#: no frames, no plugins, no form posted elsewhere.
CSP = (
    "default-src 'self'; base-uri 'self'; form-action 'self'; "
    "frame-ancestors 'none'; object-src 'none'"
)

_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
]

_MUTATIONS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

#: Characters a token may hold: it travels in a cookie and a header unquoted.
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=")

LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>inboxlog console: token needed</title>
</head><body><h1>inboxlog console</h1>
<p>This console needs its token. Open it as <code>{url}?token=TOKEN</code>, with the
token given to <code>inboxlog serve --token</code> (or <code>INBOXLOG_TOKEN</code>);
the browser then keeps it in a cookie for this site.</p></body></html>
"""


def check_token(token: str) -> str:
    """``token`` when it can serve as the console's token; ``ValueError`` otherwise."""
    if not token or not set(token) <= _TOKEN_CHARS:
        raise ValueError(
            "the token must be a non-empty string of letters, digits and -._~+/= "
            "(it travels in a cookie and a header)"
        )
    return token


def parse_host(value: str) -> tuple[str, int | None]:
    """``NAME[:PORT]`` (``[IPV6][:PORT]``, or a bare IPv6 address) as
    ``(lowercase name, port or None)``; ``ValueError`` for a bad port."""
    value = value.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        if end < 0:
            raise ValueError(f"bad host {value!r}: no closing ]")
        name, rest = value[: end + 1], value[end + 1 :]
        if rest and not rest.startswith(":"):
            raise ValueError(f"bad host {value!r}")
        port = rest[1:] if rest else None
    elif value.count(":") > 1:
        return f"[{value}]", None
    elif ":" in value:
        name, port = value.split(":")
    else:
        name, port = value, None
    if not name:
        raise ValueError("empty host name")
    if port is None:
        return name, None
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"bad port in host {value!r}")
    return name, int(port)


def bound_hosts(host: str, port: int) -> list[str]:
    """The ``Host`` values a server bound to ``host:port`` answers: the bound address
    with the port, and on a loopback bind also ``localhost`` and ``[::1]`` with it."""
    name = f"[{host}]" if ":" in host and not host.startswith("[") else host
    hosts = [f"{name}:{port}"]
    if is_loopback(host):
        hosts += [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}"]
    return list(dict.fromkeys(hosts))


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address or ``localhost``) names this machine only."""
    import ipaddress

    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class HostList:
    """The allowed ``Host`` values (``NAME`` with any port, ``NAME:PORT`` that port)."""

    def __init__(self, entries: Iterable[str]) -> None:
        self.entries = [parse_host(e) for e in entries]

    def allows(self, host: str, scheme: str) -> bool:
        try:
            name, port = parse_host(host)
        except ValueError:
            return False
        if port is None:
            port = 443 if scheme in ("https", "wss") else 80
        return any(n == name and p in (None, port) for n, p in self.entries)


def route_path(scope: Scope) -> str:
    """The request's path below the app's own root (where it is mounted)."""
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    if root and path.startswith(root) and (len(path) == len(root) or path[len(root)] == "/"):
        return path[len(root) :] or "/"
    return path


class Guard:
    """The ASGI middleware of SPEC §14.3 around the console's routes."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        read_only: bool,
        allowed_hosts: Sequence[str] | None,
        max_body: int,
    ) -> None:
        self.app = app
        self.token = None if token is None else check_token(token).encode()
        self.read_only = read_only
        self.hosts = None if allowed_hosts is None else HostList(allowed_hosts)
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def guarded_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", []), *_HEADERS]
            await send(message)

        await self.check(scope, receive, guarded_send)

    async def check(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = _headers(scope)
        path = route_path(scope)
        is_api = path == "/api" or path.startswith("/api/")
        scheme = scope.get("scheme", "http")
        host = headers.get("host", "")
        if self.hosts is not None and not self.hosts.allows(host, scheme):
            await _refuse(send, 403, "forbidden", "this Host is not one the console answers")
            return
        origin = headers.get("origin")
        if origin is not None and not _same_origin(origin, host):
            await _refuse(send, 403, "forbidden", "requests from another origin are refused")
            return
        method = scope["method"]
        if self.token is not None and path != "/api/health":
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            given = _bearer(headers) or _cookie(headers) or query.get("token")
            if given is None or not hmac.compare_digest(given.encode(), self.token):
                if is_api:
                    await _refuse(send, 401, "unauthorized", "this console needs its token")
                else:
                    await _login(send, scope)
                return
            if "token" in query and not is_api and method == "GET":
                await _set_cookie(send, scope, query, self.token.decode())
                return
        if method in _MUTATIONS:
            if self.read_only:
                await _refuse(send, 403, "forbidden", "this console is read-only")
                return
            media = headers.get("content-type", "").split(";")[0].strip().lower()
            if media != "application/json":
                await _refuse(send, 415, "unsupported_media_type", "a mutation's body must be JSON")
                return
            body = await _body(receive, headers, self.max_body)
            if body is None:
                await _too_large(send, self.max_body)
                return
            receive = _replay(body, receive)
        await self.app(scope, receive, send)


def _headers(scope: Scope) -> dict[str, str]:
    """The request's headers by lowercase name (the first of repeated ones wins,
    except that repeated cookies are joined)."""
    out: dict[str, str] = {}
    for raw_name, raw_value in scope["headers"]:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        if name == "cookie" and name in out:
            out[name] += "; " + value
        else:
            out.setdefault(name, value)
    return out


def _same_origin(origin: str, host: str) -> bool:
    for scheme in ("http://", "https://"):
        if origin.lower().startswith(scheme):
            return origin[len(scheme) :].lower() == host.lower() and host != ""
    return False


def _bearer(headers: dict[str, str]) -> str | None:
    value = headers.get("authorization", "")
    kind, _, token = value.partition(" ")
    return token.strip() if kind.lower() == "bearer" and token.strip() else None


def _cookie(headers: dict[str, str]) -> str | None:
    jar: SimpleCookie = SimpleCookie()
    try:
        jar.load(headers.get("cookie", ""))
    except Exception:  # a malformed cookie header is one without the token
        return None
    morsel = jar.get(COOKIE)
    return None if morsel is None else morsel.value


async def _body(receive: Receive, headers: dict[str, str], limit: int) -> bytes | None:
    """The whole request body, or ``None`` once it is past ``limit`` bytes."""
    declared = headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return None
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands ``body`` over once, then waits as ``receive`` does."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _respond(
    send: Send, status: int, body: bytes, content_type: bytes, extra: list[Any] | None = None
) -> None:
    headers = [
        (b"content-type", content_type),
        (b"content-length", str(len(body)).encode()),
        (b"cache-control", b"no-store"),
        *(extra or []),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _refuse(send: Send, status: int, kind: str, message: str) -> None:
    """One of HTTP's own refusals: ``{"kind","message"}``, no ``code``."""
    body = json.dumps({"kind": kind, "message": message}).encode()
    extra = [(b"www-authenticate", b"Bearer")] if status == 401 else None
    await _respond(send, status, body, b"application/json", extra)


async def _too_large(send: Send, limit: int) -> None:
    body = json.dumps(
        {
            "code": 12,
            "kind": "too_large",
            "message": f"the request body is larger than the record limit of {limit} bytes",
        }
    ).encode()
    await _respond(send, 413, body, b"application/json")


async def _login(send: Send, scope: Scope) -> None:
    url = escape(scope.get("root_path", "") + route_path(scope))
    page = LOGIN_PAGE.format(url=url).encode()
    await _respond(send, 401, page, b"text/html; charset=utf-8", [(b"www-authenticate", b"Bearer")])


async def _set_cookie(send: Send, scope: Scope, query: dict[str, str], token: str) -> None:
    """Sets the token's cookie and sends the browser to the same page without the token
    in its address (so it stays out of history and logs)."""
    root = scope.get("root_path", "") or "/"
    rest = urlencode([(k, v) for k, v in query.items() if k != "token"])
    location = scope.get("root_path", "") + route_path(scope) + (f"?{rest}" if rest else "")
    secure = "; Secure" if scope.get("scheme") == "https" else ""
    cookie = f"{COOKIE}={token}; HttpOnly; SameSite=Strict; Path={root}{secure}"
    await _respond(
        send,
        303,
        b"",
        b"text/plain",
        [(b"location", location.encode()), (b"set-cookie", cookie.encode())],
    )
