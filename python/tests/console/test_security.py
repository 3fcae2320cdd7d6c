"""The console's guard (SPEC §14.3): token, Host, Origin, JSON-only and bounded
mutations, read-only, no CORS, the Content-Security-Policy; and ``inboxlog serve``'s
refusals and its silence about passwords."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import PG_URL, m, sql
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Mount, Route
from starlette.testclient import TestClient

import inboxlog
import inboxlog.console
from inboxlog.console import security

TOKEN = "t0k3n-Secret_value"
MUTATIONS = [
    ("/api/sessions/s/inbox", {"target": "next-turn", "message": {"id": "x"}}),
    ("/api/sessions/s/inbox/remove", {"id": "x"}),
    ("/api/sessions/s/inbox/replace", {"id": "x", "message": {"id": "y"}}),
    ("/api/sessions/s/inbox/move", {"id": "x", "target": "next-step"}),
    ("/api/sessions/s/approvals", {"id": "x", "outcome": "allowed-once"}),
]


@pytest.fixture
def store(tmp_path: Path) -> inboxlog.Store:
    store = inboxlog.Store(tmp_path / "logs", durability="none")
    store.create("s").close()
    return store


def client_of(store: inboxlog.Store, **options: Any) -> TestClient:
    return TestClient(inboxlog.console.app(store, **options))


def test_without_the_token_the_api_is_401_and_pages_say_how_to_log_in(
    store: inboxlog.Store,
) -> None:
    c = client_of(store, token=TOKEN)
    r = c.get("/api/sessions")
    assert r.status_code == 401
    assert r.json()["kind"] == "unauthorized"
    assert "code" not in r.json()
    for path in ["/", "/sessions/s"]:
        page = c.get(path)
        assert page.status_code == 401
        assert page.headers["content-type"].startswith("text/html")
        assert "?token=" in page.text
        assert TOKEN not in page.text
    assert c.get("/api/sessions", headers={"authorization": "Bearer wrong"}).status_code == 401
    assert c.get("/api/sessions", params={"token": "wrong"}).status_code == 401
    assert c.get("/api/sessions/s/follow").status_code == 401
    for path, body in MUTATIONS:
        assert c.post(path, json=body).status_code == 401, path
    # Health needs none.
    assert c.get("/api/health").json() == {"ok": True}


def test_a_bearer_token_opens_the_api(store: inboxlog.Store) -> None:
    c = client_of(store, token=TOKEN)
    r = c.get("/api/sessions", headers={"authorization": f"Bearer {TOKEN}"})
    assert r.status_code == 200
    assert [h["id"] for h in r.json()["sessions"]] == ["s"]


def test_a_visit_with_the_token_sets_a_strict_cookie_and_drops_it_from_the_address(
    store: inboxlog.Store,
) -> None:
    c = client_of(store, token=TOKEN)
    r = c.get("/sessions/s", params={"token": TOKEN, "x": "1"}, follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/sessions/s?x=1"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{security.COOKIE}={TOKEN};")
    assert {"HttpOnly", "SameSite=Strict", "Path=/"} <= {p.strip() for p in cookie.split(";")}
    # The cookie then opens pages and the API alike.
    assert c.get("/sessions/s").status_code == 200
    assert c.get("/api/sessions/s").status_code == 200
    stranger = client_of(store, token=TOKEN)
    stranger.cookies.set(security.COOKIE, "wrong")
    assert stranger.get("/api/sessions/s").status_code == 401


def test_mounted_under_a_prefix_the_cookie_path_is_the_apps_root(store: inboxlog.Store) -> None:
    host = Starlette(
        routes=[
            Route("/", lambda request: PlainTextResponse("host app")),
            Mount("/ops/inboxlog", inboxlog.console.app(store, token=TOKEN)),
        ]
    )
    c = TestClient(host)
    assert c.get("/").text == "host app"
    assert c.get("/ops/inboxlog/api/health").json() == {"ok": True}
    r = c.get("/ops/inboxlog/", params={"token": TOKEN}, follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/ops/inboxlog/"
    assert "Path=/ops/inboxlog" in r.headers["set-cookie"]
    r = c.get("/ops/inboxlog/api/sessions/s", headers={"authorization": f"Bearer {TOKEN}"})
    assert r.json()["header"]["id"] == "s"
    assert c.get("/ops/inboxlog/api/sessions/s").status_code == 200  # the cookie
    assert TestClient(host).get("/ops/inboxlog/api/sessions/s").status_code == 401


def test_a_foreign_host_is_403(store: inboxlog.Store) -> None:
    c = client_of(store, allowed_hosts=["127.0.0.1:8765", "console.lan", "[::1]:8765"])
    for host in ["127.0.0.1:8765", "console.lan", "console.lan:9000", "CONSOLE.lan", "[::1]:8765"]:
        assert c.get("/api/sessions", headers={"host": host}).status_code == 200, host
    for host in ["evil.com", "127.0.0.1:8766", "127.0.0.1", "[::1]:1", "evil.com:8765", ""]:
        r = c.get("/api/sessions", headers={"host": host})
        assert r.status_code == 403, host
        assert r.json()["kind"] == "forbidden"
        assert "code" not in r.json()
        # Before the token: a rebinding page learns nothing, not even that one is needed.
    guarded = client_of(store, token=TOKEN, allowed_hosts=["console.lan"])
    assert guarded.get("/api/health", headers={"host": "evil.com"}).status_code == 403
    # Mounted without allowed_hosts, Host is the host app's business.
    assert client_of(store).get("/api/sessions", headers={"host": "anything"}).status_code == 200


def test_a_foreign_origin_is_403_on_any_request(store: inboxlog.Store) -> None:
    c = client_of(store)
    for origin in ["http://evil.com", "null", "http://testserver.evil.com", "file://"]:
        r = c.get("/api/sessions", headers={"origin": origin})
        assert r.status_code == 403, origin
        for path, body in MUTATIONS:
            assert c.post(path, json=body, headers={"origin": origin}).status_code == 403, path
    # The app's own origin is welcome.
    path, body = MUTATIONS[0]
    assert c.post(path, json=body, headers={"origin": "http://testserver"}).status_code == 202


@pytest.mark.parametrize(("path", "body"), MUTATIONS)
def test_a_mutation_that_is_not_json_is_415(
    store: inboxlog.Store, path: str, body: dict[str, Any]
) -> None:
    c = client_of(store)
    for content_type in ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]:
        r = c.post(path, content=b'{"id":"x"}', headers={"content-type": content_type})
        assert r.status_code == 415, content_type
        assert r.json()["kind"] == "unsupported_media_type"
        assert "code" not in r.json()
    r = c.post(path, content=b'{"id":"x"}')
    assert r.status_code == 415


@pytest.mark.parametrize(("path", "body"), MUTATIONS)
def test_read_only_refuses_every_mutation(
    store: inboxlog.Store, path: str, body: dict[str, Any]
) -> None:
    c = client_of(store, read_only=True)
    r = c.post(path, json=body)
    assert r.status_code == 403
    assert r.json()["kind"] == "forbidden"
    assert c.get("/api/sessions/s").status_code == 200
    assert inboxlog.Store.verify(store, "s")["nextTurn"] == 0
    assert store.inspect("s")[1] == []


def test_a_body_over_the_record_limit_is_413(store: inboxlog.Store) -> None:
    async def echo(scope: Any, receive: Any, send: Any) -> None:
        body = (await receive())["body"]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    guard = security.Guard(echo, token=None, read_only=False, allowed_hosts=None, max_body=16)
    c = TestClient(guard)
    ok = c.post("/api/x", content=b'{"a":"12345678"}', headers={"content-type": "application/json"})
    assert (ok.status_code, ok.content) == (200, b'{"a":"12345678"}')

    def chunks() -> Iterator[bytes]:
        yield b'{"a":"1234'
        yield b'56789"}'

    for content in [b'{"a":"123456789"}', chunks()]:
        r = c.post("/api/x", content=content, headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert (r.json()["code"], r.json()["kind"]) == (12, "too_large")
    # Through the app, a declared length past 64 MiB is refused before it is read.
    app = client_of(store)
    r = app.post(
        "/api/sessions/s/inbox",
        content=b"{}",
        headers={"content-type": "application/json", "content-length": str((64 << 20) + 1)},
    )
    assert r.status_code == 413


def test_no_cors_headers_and_a_strict_csp_on_every_response(store: inboxlog.Store) -> None:
    c = client_of(store, token=TOKEN)
    auth = {"authorization": f"Bearer {TOKEN}"}
    responses = [
        c.get("/", headers=auth),
        c.get("/sessions/s", headers=auth),
        c.get("/"),
        c.get("/api/sessions", headers=auth),
        c.get("/api/health", headers={"origin": "http://evil.com"}),
        c.options(
            "/api/sessions/s/inbox",
            headers={
                **auth,
                "origin": "http://testserver",
                "access-control-request-method": "POST",
            },
        ),
    ]
    for r in responses:
        assert not [h for h in r.headers if h.lower().startswith("access-control-")]
        csp = r.headers["content-security-policy"]
        directives = dict(d.strip().split(" ", 1) for d in csp.split(";"))
        assert directives["default-src"] == "'self'"
        assert "unsafe-inline" not in csp and "unsafe-eval" not in csp
        assert "*" not in csp and "http" not in csp and "data:" not in csp
        assert r.headers["x-content-type-options"] == "nosniff"


def test_host_forms_parse_and_the_bound_hosts_include_loopback_names() -> None:
    assert security.parse_host("Box.LAN:80") == ("box.lan", 80)
    assert security.parse_host("[::1]:8765") == ("[::1]", 8765)
    assert security.parse_host("::1") == ("[::1]", None)
    for bad in ["box:0", "box:x", "[::1", ":80", "box:70000"]:
        with pytest.raises(ValueError, match=r"host|port"):
            security.parse_host(bad)
    assert security.bound_hosts("127.0.0.1", 9) == [
        "127.0.0.1:9",
        "localhost:9",
        "[::1]:9",
    ]
    assert security.bound_hosts("10.1.2.3", 9) == ["10.1.2.3:9"]
    assert security.bound_hosts("::1", 9)[0] == "[::1]:9"
    with pytest.raises(ValueError, match="the token must be"):
        security.check_token("has space")
    with pytest.raises(ValueError, match="the token must be"):
        inboxlog.console.app(inboxlog.Store.memory(), token="semi;colon")


def serve(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-P", "-m", "inboxlog", "serve", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "INBOXLOG_TOKEN": "", **(env or {})},
    )


def test_a_non_loopback_bind_without_a_token_exits_saying_why(tmp_path: Path) -> None:
    for host in ["0.0.0.0", "10.0.0.1", "::", "box.example"]:
        done = serve(str(tmp_path), "--host", host, "--port", "1")
        assert done.returncode == 2, done
        assert "not a loopback address, without a token" in done.stderr
        assert "--token" in done.stderr
    bad = serve(str(tmp_path), "--allow-host", "box:x")
    assert (bad.returncode, "--allow-host" in bad.stderr) == (2, True)
    bad = serve(str(tmp_path), "--token", "a b")
    assert bad.returncode == 2
    assert "token" in bad.stderr


class Served:
    """``inboxlog serve`` in a child process on a free loopback port; its log (uvicorn's
    access log goes to stdout) is what :meth:`stop` returns."""

    def __init__(self, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-P", "-m", "inboxlog", "serve", *args, "--port", "0"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env={**os.environ, **(env or {})},
        )
        assert self.process.stdout is not None
        self.banner = self.process.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:(\d+)/", self.banner)
        assert found, self.banner
        self.url = f"http://127.0.0.1:{found.group(1)}"

    def stop(self) -> str:
        self.process.send_signal(signal.SIGTERM)
        out, _ = self.process.communicate(timeout=30)
        return self.banner + out


def test_serve_takes_the_token_from_the_environment_and_answers_its_hosts(
    tmp_path: Path,
) -> None:
    inboxlog.Store(tmp_path, durability="none").create("s").close()
    served = Served(str(tmp_path), "--allow-host", "box.lan", env={"INBOXLOG_TOKEN": TOKEN})
    try:
        port = served.url.rsplit(":", 1)[1]
        with httpx.Client(base_url=served.url, follow_redirects=True) as c:
            assert c.get("/api/health").json() == {"ok": True}
            assert c.get("/api/sessions").status_code == 401
            auth = {"authorization": f"Bearer {TOKEN}"}
            for host in [f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}", "box.lan:1"]:
                r = c.get("/api/sessions", headers={**auth, "host": host})
                assert r.status_code == 200, host
            for host in ["evil.com", f"evil.com:{port}", "127.0.0.1:1"]:
                assert c.get("/api/sessions", headers={**auth, "host": host}).status_code == 403
            r = c.get("/", params={"token": TOKEN})
            assert (r.status_code, r.url.query) == (200, b"")
            assert c.get("/api/sessions").status_code == 200  # the cookie
    finally:
        log = served.stop()
    assert TOKEN not in log, log
    assert "token=***" in log, log


def test_no_postgresql_password_reaches_a_response_or_the_log() -> None:
    password = f"pw{uuid.uuid4().hex}"
    schema = f"console_{uuid.uuid4().hex[:12]}"
    url = PG_URL.replace("postgres@", f"postgres:{password}@")
    assert password in url
    served = Served(url, "--schema", schema)
    try:
        with httpx.Client(base_url=served.url) as c:
            answers = [
                c.get("/api/sessions"),
                c.get("/api/sessions/nope"),
                c.get("/api/sessions/..bad"),
                c.get("/api/sessions/nope/events"),
                c.post("/api/sessions/nope/inbox", json={"target": "next-turn", "message": m("x")}),
                c.get("/"),
            ]
            assert [a.status_code for a in answers] == [200, 404, 400, 404, 404, 200]
            for answer in answers:
                assert password not in answer.text
                assert password not in str(answer.headers)
    finally:
        log = served.stop()
        sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    assert "postgres:***@" in log
    assert password not in log


def test_serve_says_when_the_console_extra_is_missing_or_the_port_is_taken(
    tmp_path: Path,
) -> None:
    missing = (
        "import sys\n"
        "sys.modules['uvicorn'] = None\n"
        "from inboxlog.__main__ import main\n"
        f"sys.exit(main(['serve', {str(tmp_path)!r}]))\n"
    )
    done = subprocess.run([sys.executable, "-P", "-c", missing], capture_output=True, text=True)
    assert done.returncode == 1
    assert "inboxlog serve needs the console extra" in done.stderr
    assert "pip install 'inboxlog[console]'" in done.stderr
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = serve(str(tmp_path), "--port", str(port))
    assert done.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr


def test_a_malformed_cookie_header_carries_no_token(store: inboxlog.Store) -> None:
    c = client_of(store, token=TOKEN)
    for cookie in ['inboxlog_token="unterminated', "=;;=", f"other={TOKEN}"]:
        r = c.get("/api/sessions", headers={"cookie": cookie})
        assert r.status_code == 401, cookie
    r = c.get("/api/sessions", headers={"cookie": f"a=b; {security.COOKIE}={TOKEN}"})
    assert r.status_code == 200
