"""``Store.read`` and ``Store.tail`` (issue #41): reading a session without owning it,
at the cost of what the read returns, as the same slices of ``inspect`` on every
store, and through ``inboxlog.aio``."""

from __future__ import annotations

import asyncio
import random
from pathlib import Path

import pytest
from conftest import m

import inboxlog
import inboxlog.aio


def fill(s: inboxlog.Session, n: int, rng: random.Random) -> None:
    for i in range(n):
        if rng.random() < 0.1:
            s.inbox.append("next-turn", m(f"m{i}"))
        else:
            s.append(rng.choice(["host/a", "host/b"]), {"i": i, "pad": "x" * rng.randrange(50)})


def test_read_and_tail_are_slices_of_inspect(store: inboxlog.Store) -> None:
    rng = random.Random(41)
    s = store.create("s")
    fill(s, 60, rng)
    # Read while the writer holds the session: no lock taken, none needed.
    _, events = store.inspect("s")
    n = len(events)
    for since in [0, 1, n // 2, n - 1, n, n + 10]:
        assert store.read("s", since) == events[since:]
    assert store.read("s") == events
    for limit in [0, 1, 5, n, n + 1]:
        assert store.tail("s", limit) == events[n - min(limit, n) :]
        for types in (["host/a"], ("host/b", "agent/inbox/spliced"), []):
            of = [e for e in events if e["type"] in types]
            assert store.tail("s", limit, types) == of[len(of) - min(limit, len(of)) :]
    s.append("host/after", {})
    assert store.tail("s", 1)[0]["type"] == "host/after"
    s.close()
    # Nothing was locked or written: the session opens as it was left.
    with store.open("s") as again:
        assert again.events() == store.read("s")


def test_a_missing_session_and_bad_arguments_are_refused(store: inboxlog.Store) -> None:
    with pytest.raises(inboxlog.NotFoundError):
        store.read("nope")
    with pytest.raises(inboxlog.NotFoundError):
        store.tail("nope", 3)
    with pytest.raises(inboxlog.InvalidInputError):
        store.tail("../x", 3)
    store.create("s").close()
    with pytest.raises(OverflowError):
        store.tail("s", -1)
    with pytest.raises(TypeError):
        store.tail("s", 1, "host/a")  # type: ignore[arg-type]


def test_a_torn_jsonl_tail_reads_as_inspect_reads_it(tmp_path: Path) -> None:
    store = inboxlog.Store(tmp_path / "logs", durability="sync")
    with store.create("s") as s:
        for i in range(5):
            s.append("host/a", {"i": i})
    with open(tmp_path / "logs" / "s.jsonl", "ab") as f:
        f.write(b'{"type":"host/a","seq":5,"ti')
    _, events = store.inspect("s")
    assert [e["data"]["i"] for e in store.tail("s", 2)] == [3, 4]
    assert store.read("s", 3) == events[3:]


def test_aio_reads_without_owning(tmp_path: Path) -> None:
    async def main() -> None:
        store = inboxlog.aio.Store(tmp_path / "logs", durability="none")
        s = await store.create("s")
        for i in range(4):
            await s.append("host/a" if i % 2 else "host/b", {"i": i})
        assert [e["data"]["i"] for e in await store.tail("s", 2)] == [2, 3]
        assert [e["data"]["i"] for e in await store.tail("s", 5, ["host/b"])] == [0, 2]
        assert [e["data"]["i"] for e in await store.read("s", 3)] == [3]
        await s.close()

    asyncio.run(main())
