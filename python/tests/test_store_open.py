"""``Store.open(url_or_path, ...)``: one constructor for every store (issue #20), beside
``store.open(id)``, which opens a session, and the CLI that picks its store through it."""

from __future__ import annotations

import asyncio
import os
import uuid
from pathlib import Path

import pytest
from conftest import PG_URL, m, sql

import inboxlog
import inboxlog.aio
from inboxlog.__main__ import main


def test_the_url_or_path_picks_the_backend(tmp_path: Path) -> None:
    memory = inboxlog.Store.open("memory:")
    assert repr(memory) == '<inboxlog.Store.open("memory:")>'
    jsonl = inboxlog.Store.open(tmp_path / "logs", "none")
    for store in (memory, jsonl):
        with store.create("s") as s:
            s.inbox.append("next-turn", m("a"))
        with store.open("s") as s:
            assert s.inbox.next_turn == [m("a")]
        assert [h["id"] for h in store.list()] == ["s"]
    assert (tmp_path / "logs" / "s.jsonl").is_file()
    # The same store, reopened through the same constructor.
    again = inboxlog.Store.open(str(tmp_path / "logs"), record_limit=1 << 20)
    assert again.open("s").inbox.next_turn == [m("a")]


def test_postgresql_urls_open_the_postgresql_store() -> None:
    schema = f"py_open_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        store = inboxlog.Store.open(PG_URL, "sync", schema=schema)
    except inboxlog.UnavailableError as e:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no PostgreSQL server at INBOXLOG_TEST_PG: {e}")
    try:
        store.create("s").close()
        assert [h["id"] for h in store.list()] == ["s"]
        assert sql(f'SELECT id FROM "{schema}".sessions') == "s\n"
    finally:
        del store
        sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_options_a_store_has_no_use_for_are_refused(tmp_path: Path) -> None:
    with pytest.raises(inboxlog.InvalidInputError, match="a schema is an option of PostgreSQL"):
        inboxlog.Store.open(tmp_path, schema="x")
    with pytest.raises(inboxlog.InvalidInputError, match="a record limit is an option"):
        inboxlog.Store.open("memory:", record_limit=10)
    with pytest.raises(inboxlog.InvalidInputError, match="durability must be"):
        inboxlog.Store.open("memory:", "fast")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        inboxlog.Store.open(42)  # type: ignore[arg-type]
    with pytest.raises(inboxlog.UnavailableError) as err:
        inboxlog.Store.open("postgresql://u:hunter2@127.0.0.1:9/db?connect_timeout=2")
    assert "127.0.0.1:9" in str(err.value)
    assert "hunter2" not in str(err.value)


def test_store_open_on_a_store_still_opens_a_session() -> None:
    store = inboxlog.Store.memory()
    store.create("s").close()
    opener = store.open
    with opener("s") as s:
        assert s.id == "s"
    with pytest.raises(inboxlog.InvalidInputError, match="takeover is for stores"):
        store.open("s", takeover=True)
    with pytest.raises(TypeError):
        inboxlog.Store.open.__get__(object())


def test_aio_store_open_opens_stores_and_sessions(tmp_path: Path) -> None:
    async def run() -> list[str]:
        store = await inboxlog.aio.Store.open(tmp_path / "logs", "none")
        s = await store.create("s")
        await s.close()
        s = await store.open("s")
        await s.close()
        memory = await inboxlog.aio.Store.open("memory:")
        assert await memory.list() == []
        return [h["id"] for h in await store.list()]

    assert asyncio.run(run()) == ["s"]


def test_the_cli_opens_its_store_through_store_open(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    inboxlog.Store.open(tmp_path).create("s1").close()
    assert main(["list", str(tmp_path)]) == 0
    assert "s1" in capsys.readouterr().out
    assert main(["list", str(tmp_path), "--schema", "x"]) == 1
    assert "invalid_input: a schema is an option of PostgreSQL" in capsys.readouterr().err


def test_a_connection_bound_is_an_option_of_postgresql_stores_only(tmp_path: Path) -> None:
    needle = "a connection bound is an option of PostgreSQL stores only"
    for where in ("memory:", tmp_path / "logs"):
        with pytest.raises(inboxlog.InvalidInputError, match=needle):
            inboxlog.Store.open(where, max_connections=4)
        with pytest.raises(inboxlog.InvalidInputError, match=needle):
            asyncio.run(inboxlog.aio.Store.open(where, max_connections=4))
    assert not (tmp_path / "logs").exists()
    with pytest.raises(OverflowError):
        inboxlog.Store.open(PG_URL, max_connections=-1)
    with pytest.raises(OverflowError):
        inboxlog.Store.postgres(PG_URL, max_connections=1 << 32)
    with pytest.raises(TypeError):
        inboxlog.Store.postgres(PG_URL, max_connections="8")  # type: ignore[arg-type]


def test_every_postgresql_constructor_takes_a_connection_bound() -> None:
    schema = f"py_bound_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        first = inboxlog.Store.postgres(PG_URL, schema=schema, max_connections=2)
    except inboxlog.UnavailableError as e:
        if os.environ.get("CI") == "true":
            raise
        pytest.skip(f"no PostgreSQL server at INBOXLOG_TEST_PG: {e}")

    async def through_aio() -> list[str]:
        by_url = await inboxlog.aio.Store.open(PG_URL, schema=schema, max_connections=3)
        await (await by_url.create("c")).close()
        direct = await inboxlog.aio.Store.postgres(PG_URL, schema, max_connections=4)
        await (await direct.create("d")).close()
        return [h["id"] for h in await direct.list()]

    try:
        first.create("a").close()
        second = inboxlog.Store.open(PG_URL, "none", schema=schema, max_connections=2)
        second.create("b").close()
        assert asyncio.run(through_aio()) == ["a", "b", "c", "d"]
    finally:
        del first
        sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def test_a_connection_bound_below_two_is_refused() -> None:
    # One connection holds the handle's ownership lock; appends need another.
    schema = f"py_bound_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    try:
        for bound in (0, 1):
            with pytest.raises(inboxlog.InvalidInputError, match="at least 2"):
                inboxlog.Store.postgres(PG_URL, schema=schema, max_connections=bound)
            with pytest.raises(inboxlog.InvalidInputError, match="at least 2"):
                inboxlog.Store.open(PG_URL, schema=schema, max_connections=bound)
    finally:
        sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
