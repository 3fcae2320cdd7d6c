"""Shared fixtures: stores of both kinds and small message helpers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import inboxlog


def m(id: str, **rest: Any) -> dict[str, Any]:
    """A message with `id` and any other keys."""
    return {"id": id, **rest}


def spliced(session: inboxlog.Session, since: int = 0) -> list[dict[str, Any]]:
    """The `agent/inbox/spliced` records written from seq `since` on."""
    return [e["data"] for e in session.events(since) if e["type"] == "agent/inbox/spliced"]


def next_seq(session: inboxlog.Session) -> int:
    last = session.last_seq
    return 0 if last is None else last + 1


@pytest.fixture(params=["memory", "jsonl"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> inboxlog.Store:
    """A memory store and a JSONL store (durability `none`: the tests need no fsync)."""
    if request.param == "memory":
        return inboxlog.Store.memory()
    return inboxlog.Store(tmp_path / "logs", durability="none")


@pytest.fixture
def jsonl(tmp_path: Path) -> inboxlog.Store:
    return inboxlog.Store(tmp_path / "logs", durability="none")


@pytest.fixture
def session(store: inboxlog.Store) -> Iterator[inboxlog.Session]:
    with store.create("s") as s:
        yield s
