"""The PostgreSQL store from Python (ARCHITECTURE.md#postgresql): what is stored, ownership and
takeover, and the errors of bad URLs and unreachable servers. The behaviour tests
shared by every store run on it through the `store` fixture."""

from __future__ import annotations

import json
import os
import re

import pytest
from conftest import PG_URL, m, sql

import inboxlog


def schema_of(store: inboxlog.Store) -> str:
    text = repr(store)
    return text.split('schema="', 1)[1].split('"', 1)[0]


def test_a_log_is_one_select_of_compact_lines(postgres: inboxlog.Store) -> None:
    schema = schema_of(postgres)
    with postgres.create("s") as s:
        s.inbox.append("next-turn", m("a", text="é"))
        s.append("note", {"z": 1, "a": 12345678901234567890})
        events = s.events()
    lines = sql(f"SELECT line FROM \"{schema}\".events WHERE session = 's' ORDER BY seq")
    stored = lines.splitlines()
    assert [json.loads(line) for line in stored] == events
    assert '{"z":1,"a":12345678901234567890}' in stored[1]
    with postgres.open("s") as again:
        assert again.inbox.next_turn == [m("a", text="é")]
    assert [h["id"] for h in postgres.list()] == ["s"]


def test_locked_then_takeover_fences_the_old_owner(postgres: inboxlog.Store) -> None:
    first = postgres.create("s")
    first.append("note", {"n": 1})
    with pytest.raises(inboxlog.LockedError, match='session "s" is locked') as err:
        postgres.open("s")
    assert (err.value.session, err.value.code) == ("s", 3)
    second = postgres.open("s", takeover=True)
    second.append("note", {"n": 2})
    with pytest.raises(inboxlog.FencedError, match="taken over by another writer") as fenced:
        first.append("note", {"n": 3})
    assert (fenced.value.kind, fenced.value.code, fenced.value.session) == ("fenced", 15, "s")
    with pytest.raises(inboxlog.FencedError):
        first.open_turn()
    assert [e["data"]["n"] for e in second.events()] == [1, 2]
    second.close()


def test_takeover_is_refused_by_stores_without_remote_owners(tmp_path: os.PathLike[str]) -> None:
    for store in (inboxlog.Store.memory(), inboxlog.Store(f"{tmp_path}/logs")):
        store.create("s").close()
        with pytest.raises(inboxlog.InvalidInputError, match="takeover is for stores"):
            store.open("s", takeover=True)
        store.open("s", takeover=False).close()


def test_batched_appends_and_flush(postgres: inboxlog.Store) -> None:
    schema = schema_of(postgres)
    store = inboxlog.Store.postgres(PG_URL, schema=schema, durability="batched")
    with store.create("b") as s:
        for i in range(10):
            s.append("note", {"i": i})
        s.flush()
    count = sql(f"SELECT count(*) FROM \"{schema}\".events WHERE session = 'b'")
    assert count.strip() == "10"


def test_bad_urls_schemas_and_durability_are_invalid_input() -> None:
    for url, needle in [
        ("mysql://u:hunter2@h/db", "must start with postgresql://"),
        ("postgresql://u:hunter2@h:x/db", 'port "x"'),
    ]:
        with pytest.raises(inboxlog.InvalidInputError, match=needle) as err:
            inboxlog.Store.postgres(url)
        assert "hunter2" not in str(err.value)
    with pytest.raises(inboxlog.InvalidInputError, match="not a plain SQL identifier"):
        inboxlog.Store.postgres(PG_URL, schema="Bad-Name")
    with pytest.raises(inboxlog.InvalidInputError):
        inboxlog.Store.postgres(PG_URL, durability="sometimes")
    with pytest.raises(TypeError):
        inboxlog.Store.postgres(5)  # type: ignore[arg-type]


def test_an_unreachable_server_is_unavailable_without_the_password() -> None:
    url = "postgresql://someone:hunter2@127.0.0.1:9/test?connect_timeout=2"
    with pytest.raises(inboxlog.UnavailableError, match=re.escape("127.0.0.1:9")) as err:
        inboxlog.Store.postgres(url)
    assert (err.value.kind, err.value.code) == ("unavailable", 16)
    assert "hunter2" not in str(err.value) and "hunter2" not in repr(err.value)


def test_repr_shows_no_password(postgres: inboxlog.Store) -> None:
    schema = schema_of(postgres)
    url = PG_URL.replace("://postgres@", "://postgres:hunter2@", 1)
    store = inboxlog.Store.postgres(url, schema=schema)
    assert "hunter2" not in repr(store)
    assert "Store.postgres(" in repr(store)


def test_the_default_sslmode_encrypts_whenever_the_server_offers_tls(
    postgres: inboxlog.Store,
) -> None:
    """`prefer`, the default, means what it means in libpq (issue #26): TLS whenever the
    server offers it, a self-signed certificate included; plain text only from a server
    that offers none. Read back from the server's `pg_stat_ssl` for the store's own
    backends."""
    schema = schema_of(postgres)
    app = f"py_tls_{os.getpid()}"
    sep = "&" if "?" in PG_URL else "?"
    store = inboxlog.Store.postgres(f"{PG_URL}{sep}application_name={app}", schema=schema)
    with store.create("s") as s:
        s.append("note", {"secret": "over the wire"})
        ssl = sql(
            "SELECT s.ssl FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) "
            f"WHERE a.application_name = '{app}'"
        ).split()
    offered = sql("SHOW ssl").strip() == "on"
    assert ssl, "the store's backends are not in pg_stat_activity"
    assert ssl == ["t" if offered else "f"] * len(ssl), ssl
